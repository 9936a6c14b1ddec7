// How many intra-op threads an op is worth (cpu_op.h: `op_threads`).
//
// Starting and joining an OpenMP team costs microseconds (much more when the other cores are
// busy with other work: the team waits for its slowest member), so an op whose work takes
// about as long on one thread runs faster on one. The work is estimated from the op's shapes
// as single-thread time: FLOPs at a rate per op kind plus elements touched at a memory rate.
// The rates are conservative single-thread figures of `kiln bench --profile --threads 1` on
// AVX-512 (brgemm Conv and MatMul run 100-220 GFLOP/s, depthwise ~50; element-wise ops in
// cache 8-16 elements/ns). The threshold keeps every op of the bench's vad and gpt_decode on
// one thread (their largest, GPT's 1x128x1000 head MatMul, estimates 16 us and takes 9) and
// every Conv of ResNet-18 and MobileNetV2 and GPT prefill's MatMuls on the threads asked.

#include <kiln/engine/cpu/cpu_op.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kiln::engine::cpu {

namespace {

// Single-thread rates (per microsecond) of the estimates.
constexpr double kDenseFlopsPerUs = 100e3;     // Conv, MatMul, Gemm, ConvTranspose.
constexpr double kDepthwiseFlopsPerUs = 25e3;  // Convs of one input channel per group.
// Elements read + written (all inputs and the output; for the compute-bound ops in addition
// to their FLOPs: a matrix-vector product is bound by reading its weights).
constexpr double kElementsPerUs = 10e3;
// Ops estimated under this many microseconds on one thread run on one.
constexpr double kMinParallelUs = 20.0;

double numel(const std::vector<int64_t>& sizes) {
  double n = 1.0;
  for (int64_t s : sizes) n *= static_cast<double>(std::max<int64_t>(s, 0));
  return n;
}

bool present(const OpDesc& desc, size_t index) {
  if (index >= desc.inputs.size()) return false;
  return desc.inputs_present.empty() || desc.inputs_present[index];
}

int64_t int_attr(const OpDesc& desc, const char* name, int64_t fallback) {
  for (const ir::Attribute& a : desc.attributes) {
    if (a.name != name) continue;
    if (const auto* i = std::get_if<int64_t>(&a.value)) return *i;
  }
  return fallback;
}

std::vector<int64_t> ints_attr(const OpDesc& desc, const char* name) {
  for (const ir::Attribute& a : desc.attributes) {
    if (a.name != name) continue;
    if (const auto* v = std::get_if<std::vector<int64_t>>(&a.value)) return *v;
  }
  return {};
}

double prod(const std::vector<int64_t>& v, size_t begin, size_t end) {
  double n = 1.0;
  for (size_t i = begin; i < end && i < v.size(); ++i) n *= static_cast<double>(v[i]);
  return n;
}

/// 2 * M * K * N over the broadcast batch.
double matmul_flops(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) return 0.0;
  double m = a.size() >= 2 ? static_cast<double>(a[a.size() - 2]) : 1.0;
  double k = static_cast<double>(a.back());
  double n = b.size() >= 2 ? static_cast<double>(b.back()) : 1.0;
  double batch = std::max(a.size() > 2 ? prod(a, 0, a.size() - 2) : 1.0,
                          b.size() > 2 ? prod(b, 0, b.size() - 2) : 1.0);
  return 2.0 * batch * m * k * n;
}

/// Conv: every weight meets every output pixel of its output channel's image; ConvTranspose:
/// every weight meets every input pixel.
double conv_flops(const OpDesc& desc, bool transposed) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  if (x.size() < 3 || w.size() != x.size()) return 0.0;
  double pixels = prod(x, 2, x.size());
  if (!transposed) {
    for (int64_t s : ints_attr(desc, "strides"))
      pixels /= static_cast<double>(std::max<int64_t>(s, 1));
  }
  return 2.0 * static_cast<double>(x[0]) * numel(w) * pixels;
}

/// The elements a Conv (or ConvTranspose, not counting its output padding) writes.
double conv_output(const OpDesc& desc, bool transposed) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  if (x.size() < 3 || w.size() != x.size()) return 0.0;
  double pixels = prod(x, 2, x.size());
  for (int64_t s : ints_attr(desc, "strides")) {
    double stride = static_cast<double>(std::max<int64_t>(s, 1));
    pixels = transposed ? pixels * stride : pixels / stride;
  }
  double channels = transposed ? static_cast<double>(w[1] * int_attr(desc, "group", 1))
                               : static_cast<double>(w[0]);
  return static_cast<double>(x[0]) * channels * pixels;
}

/// The elements a Resize writes, from its constant sizes or scales (else 4 x its input's).
double resize_output(const OpDesc& desc) {
  double in = numel(desc.inputs[0].sizes);
  for (size_t index : {size_t{3}, size_t{2}, size_t{1}}) {
    if (!present(desc, index) || index >= desc.constants.size()) continue;
    const runtime::Tensor* t = desc.constants[index];
    if (t == nullptr || t->numel() == 0) continue;
    if (t->dtype() == runtime::ScalarType::Int64 && index == 3) {
      const auto* v = static_cast<const int64_t*>(t->data());
      double n = 1.0;
      for (int64_t i = 0; i < t->numel(); ++i) n *= static_cast<double>(v[i]);
      return n;
    }
    if (t->dtype() == runtime::ScalarType::Float32 && index != 3) {
      const auto* v = static_cast<const float*>(t->data());
      double n = in;
      for (int64_t i = 0; i < t->numel(); ++i) n *= static_cast<double>(v[i]);
      return n;
    }
  }
  return 4.0 * in;
}

}  // namespace

double estimated_us(const OpDesc& desc) {
  const std::string& op = desc.op;
  if (op == "LSTM" || op == "GRU") return -1.0;  // Sized by their own rule (dnnl_rnn.cpp).
  if (desc.inputs.empty()) return -1.0;
  double read = 0.0;
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    if (present(desc, i)) read += numel(desc.inputs[i].sizes);
  }
  if (op == "MatMul" && desc.inputs.size() >= 2) {
    const std::vector<int64_t>& a = desc.inputs[0].sizes;
    const std::vector<int64_t>& b = desc.inputs[1].sizes;
    double flops = matmul_flops(a, b);
    double k = a.empty() ? 1.0 : static_cast<double>(std::max<int64_t>(a.back(), 1));
    return flops / kDenseFlopsPerUs + (read + flops / (2.0 * k)) / kElementsPerUs;
  }
  if (op == "Gemm" && desc.inputs.size() >= 2) {
    const std::vector<int64_t>& a = desc.inputs[0].sizes;
    const std::vector<int64_t>& b = desc.inputs[1].sizes;
    if (a.size() != 2 || b.size() != 2) return -1.0;
    double m = static_cast<double>(int_attr(desc, "transA", 0) != 0 ? a[1] : a[0]);
    double n = static_cast<double>(int_attr(desc, "transB", 0) != 0 ? b[0] : b[1]);
    double flops = 2.0 * numel(a) * n;
    return flops / kDenseFlopsPerUs + (read + m * n) / kElementsPerUs;
  }
  if ((op == "Conv" || op == "ConvTranspose") && desc.inputs.size() >= 2) {
    bool transposed = op == "ConvTranspose";
    double flops = conv_flops(desc, transposed);
    const std::vector<int64_t>& w = desc.inputs[1].sizes;
    bool depthwise = int_attr(desc, "group", 1) > 1 && w.size() >= 2 && w[transposed ? 0 : 1] == 1;
    return flops / (depthwise ? kDepthwiseFlopsPerUs : kDenseFlopsPerUs) +
           (read + conv_output(desc, transposed)) / kElementsPerUs;
  }
  double written = op == "Resize" || op == "Upsample" ? resize_output(desc)
                   : op == "Concat"                   ? read
                                                      : numel(desc.inputs[0].sizes);
  return (read + written) / kElementsPerUs;
}

int op_threads(const OpDesc& desc) {
  double us = estimated_us(desc);
  if (us >= 0.0 && us < kMinParallelUs) return 1;
  return desc.num_threads;
}

}  // namespace kiln::engine::cpu
