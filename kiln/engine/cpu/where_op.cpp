// Where(condition, X, Y) of f32 on kiln's own loops: what a causal or padding mask over
// attention scores runs as (Where(mask, -inf, scores) before the Softmax). The reference kernel
// walks it an element at a time through broadcast strides (GPT prefill's [1, 4, 128, 128]
// scores: 30 us a block); its rows, where each input is contiguous or one repeated value,
// select 16 lanes at a time (AVX-512; elsewhere one at a time, with constant strides). oneDNN 2.6
// has no select primitive.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/where_rows.h>
#include <kiln/kernels/broadcast.h>

#include <array>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

class WhereOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    using runtime::ScalarType;
    if (desc.inputs.size() != 3 || !desc.post_ops.empty() || desc.num_outputs != 1 ||
        (!desc.inputs_present.empty() &&
         (!desc.inputs_present[0] || !desc.inputs_present[1] || !desc.inputs_present[2]))) {
      return error(desc, Error::NotSupported, "expected 3 inputs, one output and no post-ops");
    }
    if (desc.inputs[0].dtype != ScalarType::Bool || desc.inputs[1].dtype != ScalarType::Float32 ||
        desc.inputs[2].dtype != ScalarType::Float32) {
      return error(desc, Error::NotSupported, "not a bool condition selecting f32 values");
    }
    auto op = std::make_unique<WhereOp>();
    std::array<std::vector<int64_t>, 3> sizes;
    for (size_t i = 0; i < 3; ++i) sizes[i] = desc.inputs[i].sizes;
    auto shape = kernels::broadcast_shape(sizes[0], sizes[1]);
    if (shape.ok()) shape = kernels::broadcast_shape(*shape, sizes[2]);
    if (!shape.ok()) return error(desc, Error::InvalidArgument, shape.status().message());
    op->outputs_ = {TensorDesc{ScalarType::Float32, *shape}};
    std::array<std::vector<int64_t>, 3> strides;
    for (size_t i = 0; i < 3; ++i) strides[i] = kernels::broadcast_strides(sizes[i], *shape);
    op->loop_ = kernels::make_broadcast_loop<3>(*shape, strides);
    op->index_.assign(op->loop_.sizes.size(), 0);
    // Constant inputs (a folded mask, the fill value) are kept: run may be given null for them.
    for (size_t i = 0; i < 3; ++i) {
      const runtime::Tensor* constant = input_constant(desc, i);
      if (constant == nullptr) continue;
      if (desc.verify_constant) {
        KILN_RETURN_IF_ERROR(desc.verify_constant(i).with_context("create op 'Where'"));
      }
      const auto* bytes = static_cast<const uint8_t*>(constant->data());
      op->constants_[i].assign(bytes, bytes + constant->nbytes());
      op->constant_[i] = true;
    }
    // The innermost merged dim of dense inputs is read contiguously (stride 1) or repeated (0).
    const auto inner = [&](size_t i) { return op->loop_.strides[i].back(); };
    for (size_t i = 0; i < 3; ++i) {
      if (inner(i) != 0 && inner(i) != 1) {
        return error(desc, Error::NotSupported,
                     "an input read with an inner stride of " + std::to_string(inner(i)));
      }
    }
    op->contiguous_ = (inner(0) == 1 ? 1 : 0) | (inner(1) == 1 ? 2 : 0) | (inner(2) == 1 ? 4 : 0);
#ifdef KILN_WHERE_AVX512
    op->avx512_ = __builtin_cpu_supports("avx512f");
#endif
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return "kiln Where (own loops)"; }
  std::string provider() const override { return "kiln"; }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    std::array<const uint8_t*, 3> data{};
    for (size_t i = 0; i < 3; ++i) {
      if (constant_[i]) {
        data[i] = constants_[i].data();  // null only when empty, and then nothing is read
      } else if (i < inputs.size() && inputs[i] != nullptr) {
        data[i] = static_cast<const uint8_t*>(inputs[i]->data());
      }
    }
    // An empty output reads nothing (and its inputs may have no storage).
    const bool missing = loop_.numel > 0 && ((!constant_[0] && data[0] == nullptr) ||
                                             (!constant_[1] && data[1] == nullptr) ||
                                             (!constant_[2] && data[2] == nullptr));
    if (missing || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op 'Where' (" + describe() + "): expected 3 inputs and one output");
    }
    const auto* c = reinterpret_cast<const bool*>(data[0]);
    const auto* x = reinterpret_cast<const float*>(data[1]);
    const auto* y = reinterpret_cast<const float*>(data[2]);
    auto* to = static_cast<float*>(outputs[0]->mutable_data());
    walk_rows([&](int64_t out, const std::array<int64_t, 3>& in, int64_t count) {
      select_rows(avx512_, contiguous_, c + in[0], x + in[1], y + in[2], to + out, count);
    });
    return Status();
  }

 private:
  // kernels::for_each_broadcast_row without its per-call index vector (run allocates nothing).
  template <typename Fn>
  void walk_rows(Fn&& fn) {
    if (loop_.numel == 0) return;
    const size_t rank = loop_.sizes.size();
    const int64_t count = loop_.sizes.back();
    std::fill(index_.begin(), index_.end(), 0);
    std::array<int64_t, 3> offsets{};
    const int64_t rows = loop_.numel / count;
    for (int64_t row = 0, out = 0; row < rows; ++row, out += count) {
      fn(out, offsets, count);
      for (size_t d = rank - 1; d-- > 0;) {
        for (size_t i = 0; i < 3; ++i) offsets[i] += loop_.strides[i][d];
        if (++index_[d] < loop_.sizes[d]) break;
        for (size_t i = 0; i < 3; ++i) offsets[i] -= loop_.strides[i][d] * loop_.sizes[d];
        index_[d] = 0;
      }
    }
  }

  std::vector<TensorDesc> outputs_;
  kernels::BroadcastLoop<3> loop_;
  std::vector<int64_t> index_;
  std::array<std::vector<uint8_t>, 3> constants_;
  std::array<bool, 3> constant_ = {false, false, false};
  int contiguous_ = 0;
  bool avx512_ = false;
};

}  // namespace

Result<std::unique_ptr<CpuOp>> create_where(const OpDesc& desc) { return WhereOp::create(desc); }

}  // namespace kiln::engine::cpu::dnnl_impl
