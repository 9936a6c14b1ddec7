#include <kiln/engine/compile/work_flops.h>

#include <algorithm>
#include <variant>

namespace kiln::engine::compile {

namespace {

double product(const std::vector<int64_t>& sizes, size_t begin, size_t end) {
  double n = 1.0;
  for (size_t i = begin; i < end && i < sizes.size(); ++i) {
    n *= static_cast<double>(std::max<int64_t>(sizes[i], 0));
  }
  return n;
}

int64_t int_attribute(const ir::Node& node, std::string_view name, int64_t fallback) {
  const ir::Attribute* a = node.attribute(name);
  if (a == nullptr) return fallback;
  const auto* value = std::get_if<int64_t>(&a->value);
  return value != nullptr ? *value : fallback;
}

double matmul_flops(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) return 0.0;
  const double m = a.size() >= 2 ? static_cast<double>(a[a.size() - 2]) : 1.0;
  const double k = static_cast<double>(a.back());
  const double n = b.size() >= 2 ? static_cast<double>(b.back()) : 1.0;
  // The broadcast batch: the larger of each pair of leading dimensions, aligned from the right.
  const size_t a_batch = a.size() > 2 ? a.size() - 2 : 0;
  const size_t b_batch = b.size() > 2 ? b.size() - 2 : 0;
  double batch = 1.0;
  for (size_t i = 0; i < std::max(a_batch, b_batch); ++i) {
    const int64_t da = i < a_batch ? a[a_batch - 1 - i] : 1;
    const int64_t db = i < b_batch ? b[b_batch - 1 - i] : 1;
    batch *= static_cast<double>(std::max<int64_t>({da, db, 0}));
  }
  return 2.0 * batch * m * std::max(k, 0.0) * n;
}

}  // namespace

bool counts_work(std::string_view op) {
  return op == "Conv" || op == "ConvTranspose" || op == "MatMul" || op == "Gemm";
}

double work_flops(const ir::Node& node, const std::vector<std::vector<int64_t>>& inputs,
                  const std::vector<int64_t>& output) {
  if (!counts_work(node.op) || inputs.size() < 2) return 0.0;
  const std::vector<int64_t>& a = inputs[0];
  const std::vector<int64_t>& w = inputs[1];
  if (node.op == "MatMul") return matmul_flops(a, w);
  if (node.op == "Gemm") {
    if (a.size() != 2 || w.size() != 2) return 0.0;
    const bool trans_a = int_attribute(node, "transA", 0) != 0;
    const bool trans_b = int_attribute(node, "transB", 0) != 0;
    const double m = static_cast<double>(trans_a ? a[1] : a[0]);
    const double k = static_cast<double>(trans_a ? a[0] : a[1]);
    const double n = static_cast<double>(trans_b ? w[0] : w[1]);
    return 2.0 * std::max(m, 0.0) * std::max(k, 0.0) * std::max(n, 0.0);
  }
  if (w.size() < 3 || w[0] <= 0) return 0.0;
  const double per_channel = product(w, 1, w.size());  // the weights of one channel
  if (node.op == "Conv") {
    if (output.size() != w.size()) return 0.0;
    return 2.0 * product(output, 0, output.size()) * per_channel;
  }
  if (a.size() != w.size()) return 0.0;  // ConvTranspose
  return 2.0 * product(a, 0, a.size()) * per_channel;
}

}  // namespace kiln::engine::compile
