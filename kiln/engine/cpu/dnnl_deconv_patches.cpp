// ConvTranspose whose kernel equals its strides (no pads, dilations, groups or output
// padding), as U-Net and text-detector heads upsample: each input pixel writes its own
// kH x kW patch of the output, so the op is one matrix product [pixels, C] x [C, M * kH * kW]
// followed by a scatter of the patches into the output (NCHW, or nhwc when the consumer
// takes it natively: then each patch row is one contiguous copy). oneDNN's deconvolution runs
// such layers as a strided backward convolution at a fraction of the matmul's rate (a 16 -> 1
// channel 2x2 head over a 160x160 map: 3.2 ms against 0.16 ms, 1 thread). The bias (constant) and
// eltwise post-ops are fused into the matmul; anything else goes to the general deconvolution
// (dnnl_deconv.cpp).

#include <kiln/engine/cpu/dnnl_staged.h>

#include <omp.h>

#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

using dnnl::memory;

std::optional<memory::desc> pixel_rows(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims != 4 || d.offset0 != 0) return std::nullopt;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  const int64_t c = d.dims[1], h = d.dims[2], w = d.dims[3];
  int64_t row = 0;
  if (b.inner_nblks == 0 && b.strides[1] == 1) {
    row = c;
  } else if (b.inner_nblks == 1 && b.inner_idxs[0] == 1 && d.padded_dims[1] == b.inner_blks[0]) {
    row = b.inner_blks[0];
  } else {
    return std::nullopt;
  }
  if (b.strides[3] != row || b.strides[2] != w * row) return std::nullopt;
  return memory::desc({d.dims[0], h * w, c}, memory::data_type::f32,
                      memory::dims{b.strides[0], row, 1});
}

namespace {

class DeconvPatchesOp final : public DnnlOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc, const memory::desc& rows,
                                               std::optional<memory::desc> staged);

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
    if (inputs[0] == nullptr) {
      return Status(Error::InvalidArgument, "run op '" + op_ + "' (oneDNN): input 0 is null");
    }
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    if (src_stage_) {
      // The matmul reads the rows of the conversion's buffer (a step buffer: placed late).
      KILN_RETURN_IF_ERROR(convert(*src_stage_, inputs[0]->data()));
      point(args_[DNNL_ARG_SRC], src_stage_->internal().get_data_handle());
    } else {
      point(args_[DNNL_ARG_SRC], inputs[0]->data());
    }
    KILN_RETURN_IF_ERROR(execute(primitive_, args_));
    scatter(outputs[0]->mutable_data_ptr<float>());
    return Status();
  }
  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index == 0 && src_stage_) return src_stage_->native();
    return std::nullopt;
  }
  /// The output in nhwc: the patches' channel runs stay contiguous (and element-wise and
  /// normalization ops after it keep their fast kernels).
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index == 0 && !native_output_) return native_layout(nhwc_);
    return std::nullopt;
  }
  Status use_native_output(size_t index) override {
    if (index != 0 || native_output_) return CpuOp::use_native_output(index);
    native_output_ = true;
    return Status();
  }
  Status use_native_input(size_t index) override {
    if (index != 0 || !src_stage_) return CpuOp::use_native_input(index);
    src_stage_.reset();
    return Status();
  }
  /// Makes the source's conversion, if left.
  Status finish() override {
    if (finished_) return Status();
    if (src_stage_) KILN_RETURN_IF_ERROR(make(*src_stage_));
    finished_ = true;
    return Status();
  }

 private:
  /// Writes the patches [N, H, W, kH, kW, M] into `y` ([N, M, H * kH, W * kW] as NCHW, or
  /// nhwc when handed over natively). oneDNN's reorder between these 6-D views runs element by
  /// element (6 ms for 16 channels at 160x160); here each row is one copy or one gather.
  void scatter(float* y) const {
    const float* patches = static_cast<const float*>(patches_.get_data_handle());
    const int64_t cols = kh_ * kw_ * m_, oh = h_ * kh_, ow = w_ * kw_;
    const int64_t rows = n_ * h_;
    const int threads = num_threads_ > 0 ? num_threads_ : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) if (threads > 1 && rows * cols * w_ >= 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = r / h_, h = r % h_;
      const float* from = patches + r * w_ * cols;
      for (int64_t i = 0; i < kh_; ++i) {
        if (native_output_) {
          // nhwc: output row h * kH + i is, pixel after pixel, each patch's row i.
          float* to = y + ((n * oh + h * kh_ + i) * ow) * m_;
          const int64_t run = kw_ * m_;
          for (int64_t x = 0; x < w_; ++x) {
            std::memcpy(to + x * run, from + x * cols + i * run,
                        static_cast<size_t>(run) * sizeof(float));
          }
          continue;
        }
        for (int64_t mi = 0; mi < m_; ++mi) {
          float* to = y + ((n * m_ + mi) * oh + h * kh_ + i) * ow;
          const float* at = from + i * kw_ * m_ + mi;
          for (int64_t x = 0; x < w_; ++x) {
            for (int64_t j = 0; j < kw_; ++j) to[x * kw_ + j] = at[x * cols + j * m_];
          }
        }
      }
    }
  }

  dnnl::primitive primitive_;
  // With a staged source: the caller's plain tensor, reordered into the layout the producer
  // hinted (whose pixel rows the matmul reads) unless handed over natively.
  std::optional<Staging> src_stage_;
  bool finished_ = false;
  memory patches_;  ///< The matmul's result [N, H * W, kH * kW * M], a step buffer.
  int64_t n_ = 0, h_ = 0, w_ = 0, kh_ = 0, kw_ = 0, m_ = 0;  ///< The patches' geometry.
  memory::desc nhwc_;                                        ///< The output's native layout.
  bool native_output_ = false;
  memory weights_, bias_;
};

Result<std::unique_ptr<CpuOp>> DeconvPatchesOp::create(const OpDesc& desc, const memory::desc& rows,
                                                       std::optional<memory::desc> staged) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  const int64_t n = x[0], c = x[1], h = x[2], wd = x[3];
  const int64_t m = w[1], kh = w[2], kw = w[3], cols = m * kh * kw;
  const std::vector<int64_t> out = {n, m, h * kh, wd * kw};
  auto op = std::make_unique<DeconvPatchesOp>();
  op->op_ = desc.op;
  op->num_threads_ = desc.num_threads;
  op->num_inputs_ = desc.inputs.size();
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};

  const memory::desc w_plain({1, c, cols}, memory::data_type::f32, memory::dims{c * cols, cols, 1});
  const memory::desc w_any({1, c, cols}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc b_md({1, 1, cols}, memory::data_type::f32, memory::dims{cols, cols, 1});
  const memory::desc dst_md({n, h * wd, cols}, memory::data_type::f32,
                            memory::dims{h * wd * cols, cols, 1});
  const bool has_bias = desc.inputs.size() == 3 && input_present(desc, 2);
  dnnl::primitive_attr attr = base_attr();
  dnnl::post_ops ops;
  KILN_RETURN_IF_ERROR(append_post_ops(desc, dst_md, false, ops).status());
  attr.set_post_ops(ops);
  auto matmul_desc = has_bias ? dnnl::matmul::desc(rows, w_any, b_md, dst_md)
                              : dnnl::matmul::desc(rows, w_any, dst_md);
  dnnl::matmul::primitive_desc pd(matmul_desc, attr, cpu_engine());
  op->primitive_ = dnnl::matmul(pd);
  op->hold_scratchpad(pd);
  // W [C, M, kH, kW] as the matrix [C, (kH, kW, M)]: each pixel's patch comes out with
  // every channel of one output pixel contiguous, as nhwc stores it.
  const float* w_onnx = input_constant(desc, 1)->data_ptr<float>();
  std::vector<float> w_rows(static_cast<size_t>(c * cols));
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t mi = 0; mi < m; ++mi) {
      for (int64_t k = 0; k < kh * kw; ++k) {
        w_rows[static_cast<size_t>(ci * cols + k * m + mi)] = w_onnx[(ci * m + mi) * kh * kw + k];
      }
    }
  }
  // The permuted bytes are not W's: they are named by their own hash, not W's content hash.
  OpDesc rows_desc = desc;
  rows_desc.constant_hashes.clear();
  KILN_ASSIGN_OR_RETURN(op->weights_,
                        pack_constant(rows_desc, 1, w_plain, w_rows.data(), pd.weights_desc()));
  op->args_[DNNL_ARG_WEIGHTS] = op->weights_;
  if (has_bias) {
    // B [M] repeated for each position of the patch.
    op->bias_ = memory(b_md, cpu_engine());
    const float* b = input_constant(desc, 2)->data_ptr<float>();
    float* to = static_cast<float*>(op->bias_.get_data_handle());
    for (int64_t i = 0; i < cols; ++i) to[i] = b[i % m];
    op->args_[DNNL_ARG_BIAS] = op->bias_;
  }
  KILN_ASSIGN_OR_RETURN(op->patches_, op->step_buffer(dst_md));
  op->args_[DNNL_ARG_DST] = op->patches_;
  op->describe_ = describe_pd(pd) + " (ConvTranspose as patches) src:" +
                  (staged ? format_of(*staged) : std::string("nchw"));
  if (staged) op->src_stage_.emplace(plain_md(x), *staged, true);
  op->args_[DNNL_ARG_SRC] = wrap(rows, nullptr);

  op->n_ = n, op->h_ = h, op->w_ = wd, op->kh_ = kh, op->kw_ = kw, op->m_ = m;
  op->nhwc_ =
      memory::desc({n, m, h * kh, wd * kw}, memory::data_type::f32, memory::format_tag::nhwc);
  return std::unique_ptr<CpuOp>(std::move(op));
}

bool all_equal(const std::vector<int64_t>& values, int64_t expected) {
  for (int64_t v : values) {
    if (v != expected) return false;
  }
  return true;
}

}  // namespace

Result<bool> kernel_equals_strides(const OpDesc& desc) {
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  if (w.size() != 4) return false;
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(int64_t group, attrs.get_int("group", 1));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, attrs.get_ints("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, attrs.get_ints("strides"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, attrs.get_ints("dilations"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attrs.get_ints("pads"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding, attrs.get_ints("output_padding"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, attrs.get_ints("output_shape"));
  const std::vector<int64_t> window = {w[2], w[3]};
  return group == 1 && (auto_pad == "NOTSET" || auto_pad == "VALID") && strides == window &&
         (kernel.empty() || kernel == window) && all_equal(dilations, 1) && all_equal(pads, 0) &&
         all_equal(output_padding, 0) && output_shape.empty();
}

Result<std::unique_ptr<CpuOp>> create_deconv_patches(const OpDesc& desc) {
  std::unique_ptr<CpuOp> none;
  if (desc.inputs.size() < 2 || desc.inputs.size() > 3 || num_residuals(desc) != 0) return none;
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  if (x.size() != 4 || w.size() != 4 || x[1] != w[0] || input_constant(desc, 1) == nullptr) {
    return none;
  }
  if (desc.inputs.size() == 3 && input_present(desc, 2) &&
      (input_constant(desc, 2) == nullptr || desc.inputs[2].sizes != std::vector<int64_t>{w[1]})) {
    return none;
  }
  KILN_ASSIGN_OR_RETURN(bool patches, kernel_equals_strides(desc));
  if (!patches) return none;
  for (int64_t size : x) {
    if (size <= 0) return none;
  }
  if (w[1] <= 0) return none;
  // The source: the producer's layout when its pixels are rows (then plain input is staged into
  // it), else the plain NCHW tensor read as a transposed matrix.
  const memory::dims dims = {x[0], x[1], x[2], x[3]};
  if (auto hint = input_layout_hint(desc, 0, dims)) {
    if (auto rows = pixel_rows(*hint)) return DeconvPatchesOp::create(desc, *rows, *hint);
  }
  const memory::desc rows({x[0], x[2] * x[3], x[1]}, memory::data_type::f32,
                          memory::dims{x[1] * x[2] * x[3], 1, x[2] * x[3]});
  return DeconvPatchesOp::create(desc, rows, std::nullopt);
}

}  // namespace kiln::engine::cpu::dnnl_impl
