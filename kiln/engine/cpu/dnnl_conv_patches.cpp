// A 1-D Conv of few input channels and a long kernel (an audio model's framing or STFT
// front end: 1 channel, 128 taps, stride 64) as one matrix product: the input windows are
// gathered into rows [N, OW, C * K] and multiplied by W read as [C * K, OC], which gives the
// output in nwc (the consumer's native layout, or transposed into NCW). oneDNN's direct
// kernels reduce over the C channels of one tap at a time, so with C = 1 they run at a small
// fraction of the matmul's rate (vad's 512-sample STFT: about 22 us against 2 us, 1 thread).
// Bias (constant) and eltwise post-ops are fused into the matmul; anything else takes the
// general convolution (dnnl_conv.cpp).

#include <kiln/engine/cpu/dnnl_common.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

/// At most this many input channels (more, and oneDNN's kernels reduce enough per tap).
constexpr int64_t kMaxChannels = 4;
/// At least this many taps.
constexpr int64_t kMinTaps = 16;
/// At most this many bytes of gathered windows held by the op.
constexpr int64_t kMaxRowsBytes = int64_t{16} << 20;

class ConvPatchesOp final : public DnnlOp {
 public:
  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
    if (inputs[0] == nullptr) {
      return Status(Error::InvalidArgument, "run op '" + op_ + "' (oneDNN): input 0 is null");
    }
    gather(inputs[0]->data_ptr<float>());
    float* y = outputs[0]->mutable_data_ptr<float>();
    point(args_[DNNL_ARG_DST], native_output_ ? y : result_.data());
    KILN_RETURN_IF_ERROR(execute(primitive_, args_));
    if (!native_output_) {
      // [N, OW, OC] -> [N, OC, OW].
      for (int64_t n = 0; n < n_; ++n) {
        const float* from = result_.data() + n * ow_ * oc_;
        float* to = y + n * oc_ * ow_;
        for (int64_t o = 0; o < ow_; ++o) {
          for (int64_t m = 0; m < oc_; ++m) to[m * ow_ + o] = from[o * oc_ + m];
        }
      }
    }
    return Status();
  }
  /// The output in nwc, as the matmul writes it.
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index == 0 && !native_output_) return native_layout(nwc_);
    return std::nullopt;
  }
  Status use_native_output(size_t index) override {
    if (index != 0 || native_output_) return CpuOp::use_native_output(index);
    native_output_ = true;
    result_ = std::vector<float>();
    return Status();
  }

  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc, int64_t stride,
                                               int64_t pad_begin, const std::vector<int64_t>& out);

 private:
  /// The windows of x [N, C, W] as rows [N * OW, C * K], zeros where they overhang the pads.
  void gather(const float* x) {
    float* rows = rows_.data();
    for (int64_t n = 0; n < n_; ++n) {
      for (int64_t o = 0; o < ow_; ++o) {
        const int64_t start = o * stride_ - pad_begin_;
        const int64_t first = std::max<int64_t>(0, -start);
        const int64_t last = std::min<int64_t>(k_, w_ - start);  // one past
        for (int64_t c = 0; c < c_; ++c) {
          float* to = rows + ((n * ow_ + o) * c_ + c) * k_;
          if (last <= first) {
            std::fill(to, to + k_, 0.0f);
            continue;
          }
          const float* from = x + (n * c_ + c) * w_ + (start + first);
          std::fill(to, to + first, 0.0f);
          std::memcpy(to + first, from, static_cast<size_t>(last - first) * sizeof(float));
          std::fill(to + last, to + k_, 0.0f);
        }
      }
    }
  }

  dnnl::primitive primitive_;
  std::vector<float> rows_;    ///< The gathered windows [N, OW, C * K].
  std::vector<float> result_;  ///< The matmul's [N, OW, OC] unless written to the output.
  int64_t n_ = 0, c_ = 0, w_ = 0, k_ = 0, oc_ = 0, ow_ = 0, stride_ = 1, pad_begin_ = 0;
  memory::desc nwc_;
  bool native_output_ = false;
  memory weights_, bias_;
};

Result<std::unique_ptr<CpuOp>> ConvPatchesOp::create(const OpDesc& desc, int64_t stride,
                                                     int64_t pad_begin,
                                                     const std::vector<int64_t>& out) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  auto op = std::make_unique<ConvPatchesOp>();
  op->op_ = desc.op;
  op->num_threads_ = desc.num_threads;
  op->num_inputs_ = desc.inputs.size();
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
  op->n_ = x[0], op->c_ = x[1], op->w_ = x[2], op->k_ = w[2], op->oc_ = w[0], op->ow_ = out[2];
  op->stride_ = stride, op->pad_begin_ = pad_begin;
  const int64_t n = op->n_, ck = op->c_ * op->k_, oc = op->oc_, ow = op->ow_;

  const memory::desc rows_md({n, ow, ck}, memory::data_type::f32, memory::dims{ow * ck, ck, 1});
  const memory::desc dst_md({n, ow, oc}, memory::data_type::f32, memory::dims{ow * oc, oc, 1});
  // W [OC, C, K] read as [C * K, OC]: its own bytes, transposed.
  const memory::desc w_md({1, ck, oc}, memory::data_type::f32, memory::dims{ck * oc, 1, ck});
  const memory::desc w_any({1, ck, oc}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc b_md({1, 1, oc}, memory::data_type::f32, memory::dims{oc, oc, 1});
  const bool has_bias = desc.inputs.size() == 3 && input_present(desc, 2);
  dnnl::primitive_attr attr = base_attr();
  dnnl::post_ops ops;
  KILN_RETURN_IF_ERROR(append_post_ops(desc, dst_md, false, ops).status());
  attr.set_post_ops(ops);
  ThreadScope threads(op->num_threads_);
  auto matmul_desc = has_bias ? dnnl::matmul::desc(rows_md, w_any, b_md, dst_md)
                              : dnnl::matmul::desc(rows_md, w_any, dst_md);
  dnnl::matmul::primitive_desc pd(matmul_desc, attr, cpu_engine());
  op->primitive_ = dnnl::matmul(pd);
  op->hold_scratchpad(pd);
  KILN_ASSIGN_OR_RETURN(op->weights_, pack_constant(desc, 1, w_md, input_constant(desc, 1)->data(),
                                                    pd.weights_desc()));
  op->args_[DNNL_ARG_WEIGHTS] = op->weights_;
  if (has_bias) {
    op->bias_ = memory(b_md, cpu_engine());
    std::memcpy(op->bias_.get_data_handle(), input_constant(desc, 2)->data(),
                static_cast<size_t>(oc) * sizeof(float));
    op->args_[DNNL_ARG_BIAS] = op->bias_;
  }
  op->rows_.assign(static_cast<size_t>(n * ow * ck), 0.0f);
  op->result_.assign(static_cast<size_t>(n * ow * oc), 0.0f);
  op->args_[DNNL_ARG_SRC] = wrap(rows_md, op->rows_.data());
  op->args_[DNNL_ARG_DST] = wrap(dst_md, nullptr);
  op->nwc_ = memory::desc({n, oc, ow}, memory::data_type::f32, memory::format_tag::nwc);
  op->describe_ = describe_pd(pd) + " (Conv as windows x weights) dst:nwc";
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_conv_patches(const OpDesc& desc, int64_t stride,
                                                   int64_t pad_begin,
                                                   const std::vector<int64_t>& out) {
  std::unique_ptr<CpuOp> none;
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  if (x.size() != 3 || w.size() != 3 || out.size() != 3 || num_residuals(desc) != 0 ||
      x[1] != w[1] || x[1] > kMaxChannels || w[2] < kMinTaps || stride < 1 ||
      input_constant(desc, 1) == nullptr) {
    return none;
  }
  if (desc.inputs.size() == 3 && input_present(desc, 2) && input_constant(desc, 2) == nullptr) {
    return none;  // a run-time bias: the general convolution binds it per run
  }
  for (int64_t size : x) {
    if (size <= 0) return none;
  }
  if (out[0] != x[0] || out[1] != w[0] || out[2] <= 0 ||
      x[0] * out[2] * x[1] * w[2] * static_cast<int64_t>(sizeof(float)) > kMaxRowsBytes) {
    return none;
  }
  return ConvPatchesOp::create(desc, stride, pad_begin, out);
}

}  // namespace kiln::engine::cpu::dnnl_impl
