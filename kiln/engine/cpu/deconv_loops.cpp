// ConvTranspose whose kernel equals its strides, from a producer's nChw16c (a blocked Conv's
// output), on kiln's 1x1 Conv loops (conv_loops.h's pointwise_range), which generate no code:
// each input pixel's patch of M x kH x kW values is a 1x1 Conv of the pixel's channels to
// that many channels, computed in nChw16c into scratch memory, then scattered into the output
// (nhwc when handed over natively, else NCHW). oneDNN's matmul of the same patches
// (dnnl_deconv_patches.cpp) generates its kernel for each shape: 0.4-0.7 ms of the OCR
// detector's first run at a new image size, for a layer that runs in about 0.3 ms at 1
// thread, where these loops take 10-20 % longer (the patches are written, then scattered). So
// only ops that avoid generated code (OpDesc::avoid_generated_code) take them.

#include <kiln/engine/cpu/blocked_loops_op.h>
#include <kiln/engine/cpu/conv_loops.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/dnnl_staged.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/vector_math.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

using vec::kLanes;
constexpr int64_t kTilePixels = 12;  // conv_loops.cpp's

class DeconvLoopsOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }

  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index != 0) return std::nullopt;
    return native_layout(
        memory::desc(to_dims(in_sizes_), memory::data_type::f32, memory::format_tag::aBcd16b));
  }
  /// The output in nhwc: each patch row's channels stay contiguous.
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index != 0) return std::nullopt;
    return native_layout(
        memory::desc(to_dims(outputs_[0].sizes), memory::data_type::f32, memory::format_tag::nhwc));
  }
  Status use_native_input(size_t index) override {
    if (index != 0) return CpuOp::use_native_input(index);
    native_in_ = true;
    return Status();
  }
  Status use_native_output(size_t index) override {
    if (index != 0) return CpuOp::use_native_output(index);
    native_out_ = true;
    return Status();
  }

  // The patches in nChw16c: [N][OB][pixels][16].
  uint64_t scratchpad_bytes() const override {
    return static_cast<uint64_t>(in_sizes_[0] * job_.blocks_out * job_.pixels * kLanes) *
           sizeof(float);
  }
  void use_scratchpad(void* data) override {
    patches_ = static_cast<float*>(data);
    own_patches_ = {};
  }

  Status finish() override {
    if (!native_in_) {
      x_blocked_.assign(static_cast<size_t>(in_sizes_[0] * job_.c16 * job_.pixels), 0.0f);
    }
    finished_ = true;
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op 'ConvTranspose' (" + describe_ + "): expected input 0 and one output");
    }
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    if (patches_ == nullptr) {  // no storage shared with other ops: its own
      own_patches_.resize(scratchpad_bytes() / sizeof(float));
      patches_ = own_patches_.data();
    }
    const int64_t n = in_sizes_[0];
    ConvJob j = job_;
    j.x = static_cast<const float*>(inputs[0]->data());
    if (!native_in_) {
      to_blocked(j.x, x_blocked_.data(), n, in_sizes_[1], j.pixels);
      j.x = x_blocked_.data();
    }
    j.y = patches_;
    float* y = static_cast<float*>(outputs[0]->mutable_data());
    const int parts = std::max(1, num_threads_);
    const int64_t tiles = (j.pixels + kTilePixels - 1) / kTilePixels;
    for (int64_t i = 0; i < n; ++i) {
      if (parts == 1) {
        pointwise_range(j, i, 0, j.blocks_out, 0, j.pixels);
        continue;
      }
      // Whole tiles of pixels to each thread.
#pragma omp parallel for num_threads(parts) schedule(static)
      for (int t = 0; t < parts; ++t) {
        auto at = [&](int k) { return std::min(j.pixels, tiles * k / parts * kTilePixels); };
        pointwise_range(j, i, 0, j.blocks_out, at(t), at(t + 1));
      }
    }
    const int64_t rows = n * in_sizes_[2];
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
    for (int64_t r = 0; r < rows; ++r) scatter(r, y);
    return Status();
  }

 private:
  // Input row r (image r / H, row r % H): each pixel's patch into the output's kH rows.
  void scatter(int64_t r, float* y) const {
    const int64_t h = in_sizes_[2], w = in_sizes_[3];
    const int64_t image = r / h, row = r % h;
    const int64_t oh = h * kh_, ow = w * kw_;
    const int64_t plane = job_.pixels * kLanes;  // one block of the patches
    const float* patches = patches_ + image * job_.blocks_out * plane;
    // Where patch value `col` ((i, j, m) in kH x kW x M) of input pixel p is.
    auto value = [&](int64_t p, int64_t col) {
      return patches + (col / kLanes) * plane + p * kLanes + col % kLanes;
    };
    for (int64_t i = 0; i < kh_; ++i) {
      const int64_t out_row = row * kh_ + i;
      if (native_out_) {
        // nhwc: output row out_row is, pixel after pixel, each patch's row i.
        float* to = y + (image * oh + out_row) * ow * m_;
        for (int64_t x = 0; x < w; ++x) {
          const int64_t p = row * w + x;
          for (int64_t jw = 0; jw < kw_; ++jw) {
            float* pixel = to + (x * kw_ + jw) * m_;
            const int64_t col0 = (i * kw_ + jw) * m_;
            if (m_ % kLanes == 0) {  // whole vectors of the patches
              for (int64_t b = 0; b < m_; b += kLanes) {
                std::memcpy(pixel + b, value(p, col0 + b), sizeof(float) * kLanes);
              }
            } else {
              for (int64_t mi = 0; mi < m_; ++mi) pixel[mi] = *value(p, col0 + mi);
            }
          }
        }
        continue;
      }
      for (int64_t mi = 0; mi < m_; ++mi) {
        float* to = y + ((image * m_ + mi) * oh + out_row) * ow;
        for (int64_t x = 0; x < w; ++x) {
          const int64_t p = row * w + x;
          for (int64_t jw = 0; jw < kw_; ++jw)
            to[x * kw_ + jw] = *value(p, (i * kw_ + jw) * m_ + mi);
        }
      }
    }
  }

  std::string describe_;
  std::vector<int64_t> in_sizes_;
  std::vector<TensorDesc> outputs_;
  ConvJob job_;  // the patches as a 1x1 Conv: weights, biases, post-ops; tensors set per run
  int64_t m_ = 0, kh_ = 0, kw_ = 0;
  int num_threads_ = 1;
  bool native_in_ = false, native_out_ = false, finished_ = false;
  std::vector<PostOp> post_ops_;
  std::vector<float> own_weights_, bias_, last_lanes_, x_blocked_, own_patches_;
  float* patches_ = nullptr;  // the shared scratchpad, or own_patches_
};

Result<std::unique_ptr<CpuOp>> DeconvLoopsOp::create(const OpDesc& desc) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& ws = desc.inputs[1].sizes;
  const bool post_ops_ok =
      std::all_of(desc.post_ops.begin(), desc.post_ops.end(), [](const PostOp& p) {
        return p.kind != PostOpKind::Gelu && p.kind != PostOpKind::AddResidual;
      });
  if (desc.op != "ConvTranspose" || x.size() != 4 || ws.size() != 4 || !all_float(desc) ||
      !post_ops_ok || num_residuals(desc) != 0 || desc.inputs.size() > 3 ||
      input_constant(desc, 1) == nullptr || x[1] != ws[0]) {
    return error(desc, Error::NotSupported,
                 "not a 2-D f32 ConvTranspose of constant W with the loops' post-ops");
  }
  KILN_ASSIGN_OR_RETURN(bool patches, kernel_equals_strides(desc));
  if (!patches) {
    return error(desc, Error::NotSupported, "its kernel is not its strides (or it has pads)");
  }
  const memory::desc blocked(to_dims(x), memory::data_type::f32, memory::format_tag::aBcd16b);
  auto hint = input_layout_hint(desc, 0, to_dims(x));
  if (!hint || layout_bytes(*hint) != layout_bytes(blocked)) {
    return error(desc, Error::NotSupported, "its input is not a producer's nChw16c");
  }
  const bool has_bias = desc.inputs.size() == 3 && input_present(desc, 2);
  const int64_t c = x[1], m = ws[1], kh = ws[2], kw = ws[3], cols = m * kh * kw;
  if (has_bias &&
      (input_constant(desc, 2) == nullptr || desc.inputs[2].sizes != std::vector<int64_t>{m})) {
    return error(desc, Error::NotSupported, "B is not a constant [M]");
  }
  for (int64_t size : x) {
    if (size <= 0) return error(desc, Error::NotSupported, "an empty input");
  }
  auto op = std::make_unique<DeconvLoopsOp>();
  op->in_sizes_ = x;
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, {x[0], m, x[2] * kh, x[3] * kw}}};
  op->m_ = m, op->kh_ = kh, op->kw_ = kw;
  op->num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  op->post_ops_ = desc.post_ops;
  ConvJob& j = op->job_;
  j.channels = c;
  j.c16 = (c + kLanes - 1) / kLanes * kLanes;
  j.blocks_out = (cols + kLanes - 1) / kLanes;
  j.pixels = x[2] * x[3];
  if (cols % kLanes != 0) {
    op->last_lanes_.assign(kLanes, 0.0f);
    std::fill(op->last_lanes_.begin(), op->last_lanes_.begin() + cols % kLanes, 1.0f);
  }
  if (has_bias) {
    // B [M] for each value of the patch, (i, j, m) in order.
    const float* b = input_constant(desc, 2)->data_ptr<float>();
    op->bias_.assign(static_cast<size_t>(j.blocks_out * kLanes), 0.0f);
    for (int64_t col = 0; col < cols; ++col) op->bias_[static_cast<size_t>(col)] = b[col % m];
  }
  // W [C, M, kH, kW] as a 1x1 Conv's [OB][C16][16]: output channel col = (i * kW + j) * M + m.
  const float* source = input_constant(desc, 1)->data_ptr<float>();
  const int64_t c16 = j.c16, blocks = j.blocks_out;
  // (Stored under W's content hash and this layout's name.)
  KILN_ASSIGN_OR_RETURN(j.w, pack_floats(
                                 desc, 1, "kiln f32 W patches [OB][C16][16] of (kH, kW, M)",
                                 static_cast<size_t>(blocks * c16 * kLanes),
                                 [&](float* to) {
                                   std::fill(to, to + blocks * c16 * kLanes, 0.0f);
                                   for (int64_t ci = 0; ci < c; ++ci) {
                                     for (int64_t mi = 0; mi < m; ++mi) {
                                       for (int64_t k = 0; k < kh * kw; ++k) {
                                         const int64_t col = k * m + mi;
                                         to[((col / kLanes) * c16 + ci) * kLanes + col % kLanes] =
                                             source[(ci * m + mi) * kh * kw + k];
                                       }
                                     }
                                   }
                                 },
                                 op->own_weights_));
  j.bias = op->bias_.empty() ? nullptr : op->bias_.data();
  j.ops = op->post_ops_.data();
  j.num_ops = op->post_ops_.size();
  j.last_lanes = op->last_lanes_.empty() ? nullptr : op->last_lanes_.data();
  op->describe_ = "kiln ConvTranspose as patches (own 1x1 loops: nChw16c in, " +
                  std::to_string(cols) + " patch values a pixel)";
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_deconv_loops(const OpDesc& desc) {
  return DeconvLoopsOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
