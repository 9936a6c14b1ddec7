// Convs of one group among blocked Convs on loops of kiln's own (conv_loops.cpp), compiled
// ahead of time: 1x1 Convs, and Convs of taps (stride 1 or 2, no dilation) where these loops run
// them near oneDNN's speed. oneDNN generates the code of each of its 1x1 kernels when the primitive
// is created, 0.1-0.5 ms apiece: MobileNet-V2's 34 pointwise Convs took 3.9 ms of a warm load of
// about 10, SqueezeNet's 3.7 of 8-10, more than everything else in the load together. These
// loops read and write nChw16c, as oneDNN's kernel does there, so their neighbours hand values
// over unconverted: each output vector is 16 output channels of one pixel, a tile is up to
// kTilePixels pixels by two such vectors, and each input channel's value of a pixel is
// broadcast against the weights of those 32 output channels. Biases, the loops' post-ops and
// one residual (in the output's layout) are applied before the store. A strided 1x1 Conv's
// input pixels are first copied one after another (a ResNet's downsampling projections).
// oneDNN's direct 3x3 kernels take 0.1-1 ms each to generate (OCR detection's ten took 3.5 ms of
// a first run at 1 thread); these loops generate nothing.

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
using namespace vec;  // NOLINT: the vector helpers of the loops below

constexpr int kTilePixels = 12;  // conv_loops.cpp's
// Larger outputs of 1x1 Convs go to oneDNN's kernel, which writes them faster: MobileNet-V2's
// 16 -> 96 at 112 x 112 (4.8 MB) took 0.37 ms on these loops against 0.22 (`kiln bench
// --profile`).
constexpr double kMaxOutputBytes = 2 << 20;

class PointwiseConvOp final : public BlockedLoopsOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

  // The input with its side pads (pad_columns), taken from storage shared with other ops.
  uint64_t scratchpad_bytes() const override {
    return padded_w_ == 0 ? 0
                          : static_cast<uint64_t>(in_sizes_[0] * c16_ * in_sizes_[2] * padded_w_) *
                                sizeof(float);
  }
  void use_scratchpad(void* data) override {
    padded_ = static_cast<float*>(data);
    own_padded_ = {};
  }

  Status finish() override {
    // Blocked copies of what is given (or wanted) plain.
    const int64_t n = in_sizes_[0];
    const int64_t out_floats = n * blocks_out_ * kLanes * pixels_;
    if (!native_in_)
      x_blocked_.assign(static_cast<size_t>(n * c16_ * in_sizes_[2] * in_sizes_[3]), 0.0f);
    if (strided() && !spatial_) x_stage_.assign(static_cast<size_t>(n * c16_ * pixels_), 0.0f);
    if (!native_out_) y_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    if (has_residual_ && !native_residual_) r_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    finished_ = true;
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run(inputs, outputs));
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    const int64_t n = in_sizes_[0], c = in_sizes_[1], o = outputs_[0].sizes[1];
    ConvJob j;
    j.x = static_cast<const float*>(inputs[0]->data());
    if (!native_in_) {
      to_blocked(j.x, x_blocked_.data(), n, c, in_sizes_[2] * in_sizes_[3]);
      j.x = x_blocked_.data();
    }
    if (strided() && !spatial_) {
      subsample(j.x, x_stage_.data());
      j.x = x_stage_.data();
    }
    if (has_residual_) {
      j.residual = static_cast<const float*>(inputs[residual_index_]->data());
      if (!native_residual_) {
        to_blocked(j.residual, r_stage_.data(), n, o, pixels_);
        j.residual = r_stage_.data();
      }
    }
    float* y = static_cast<float*>(outputs[0]->mutable_data());
    j.y = native_out_ ? y : y_stage_.data();
    j.w = weights_;
    j.bias = bias_.empty() ? nullptr : bias_.data();
    j.channels = in_sizes_[1];
    j.c16 = c16_;
    j.blocks_out = blocks_out_;
    j.pixels = pixels_;
    j.in_h = in_sizes_[2];
    j.in_w = in_sizes_[3];
    j.out_h = outputs_[0].sizes[2];
    j.out_w = outputs_[0].sizes[3];
    if (padded_w_ != 0) {
      if (padded_ == nullptr) {  // no storage shared with other ops (use_scratchpad): its own
        own_padded_.resize(scratchpad_bytes() / sizeof(float));
        padded_ = own_padded_.data();
      }
      pad_columns(j.x, padded_);
      j.x = padded_;
      j.in_w = padded_w_;
    }
    if (spatial_) {
      j.kernel_h = kernel_h_;
      j.kernel_w = kernel_w_;
      j.stride_h = stride_h_;
      j.stride_w = stride_w_;
      j.pad_top = pad_top_;
      j.pad_left = padded_w_ != 0 ? 0 : pad_left_;
    }
    j.ops = post_ops_.data();
    j.num_ops = post_ops_.size();
    j.last_lanes = last_lanes_.empty() ? nullptr : last_lanes_.data();
    // Threads split the pairs of output blocks when they divide evenly, else the pixels (in
    // whole tiles where there are enough; a Conv of taps, the rows).
    const int64_t pairs = (blocks_out_ + 1) / 2;
    const int parts = std::max(1, num_threads_);
    const bool by_blocks = pairs % parts == 0 || pairs >= 4 * parts;
    if (spatial_) {
      const int64_t rows = j.out_h;
      split(
          n, parts, by_blocks && rows < 4 * parts, rows, [&](int t) { return rows * t / parts; },
          [&](int64_t i, int64_t b0, int64_t b1, int64_t r0, int64_t r1) {
            spatial_range(j, i, b0, b1, r0, r1);
          });
    } else {
      const int64_t tiles = (pixels_ + kTilePixels - 1) / kTilePixels;
      split(
          n, parts, by_blocks, pixels_,
          [&](int t) {
            return tiles >= 2 * parts ? std::min(pixels_, tiles * t / parts * kTilePixels)
                                      : pixels_ * t / parts;
          },
          [&](int64_t i, int64_t b0, int64_t b1, int64_t p0, int64_t p1) {
            pointwise_range(j, i, b0, b1, p0, p1);
          });
    }
    if (!native_out_) from_blocked(y_stage_.data(), y, n, o, pixels_);
    return Status();
  }

 private:
  bool strided() const { return stride_h_ != 1 || stride_w_ != 1; }

  // Runs `range(image, first block, end block, first unit, end unit)` over each of `n` images'
  // output blocks and `units` (pixels, or rows of a Conv of taps) on `parts` threads: each
  // takes a share of the pairs of output blocks when `by_blocks`, else units
  // [unit_at(t), unit_at(t + 1)).
  template <typename UnitAt, typename Range>
  void split(int64_t n, int parts, bool by_blocks, int64_t units, UnitAt unit_at,
             Range range) const {
    const int64_t pairs = (blocks_out_ + 1) / 2;
    for (int64_t i = 0; i < n; ++i) {
      if (parts == 1) {
        range(i, 0, blocks_out_, 0, units);
        continue;
      }
#pragma omp parallel for num_threads(parts) schedule(static)
      for (int t = 0; t < parts; ++t) {
        if (by_blocks) {
          range(i, std::min(blocks_out_, 2 * (pairs * t / parts)),
                std::min(blocks_out_, 2 * (pairs * (t + 1) / parts)), 0, units);
        } else {
          range(i, 0, blocks_out_, unit_at(t), unit_at(t + 1));
        }
      }
    }
  }

  // The input pixels a strided 1x1 Conv reads, one after another: the layout the loops take.
  void subsample(const float* x, float* compact) const {
    const int64_t in_h = in_sizes_[2], in_w = in_sizes_[3];
    const int64_t out_h = outputs_[0].sizes[2], out_w = outputs_[0].sizes[3];
    const int64_t planes = in_sizes_[0] * (c16_ / kLanes);
    for (int64_t plane = 0; plane < planes; ++plane) {
      const float* from = x + plane * in_h * in_w * kLanes;
      float* to = compact + plane * pixels_ * kLanes;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        for (int64_t ow = 0; ow < out_w; ++ow) {
          std::memcpy(to + (oh * out_w + ow) * kLanes,
                      from + (oh * stride_h_ * in_w + ow * stride_w_) * kLanes,
                      sizeof(float) * kLanes);
        }
      }
    }
  }

  // The input's rows with pad_left_ zero columns before and the rest of padded_w_ after, so
  // that every output column's taps are inside: the loops' whole tiles, none of one pixel
  // (which read all of the weights for two sums each).
  void pad_columns(const float* x, float* padded) const {
    const int64_t in_w = in_sizes_[3];
    const int64_t rows = in_sizes_[0] * (c16_ / kLanes) * in_sizes_[2];
    const size_t row_bytes = sizeof(float) * static_cast<size_t>(in_w * kLanes);
    const size_t left = sizeof(float) * static_cast<size_t>(pad_left_ * kLanes);
    const size_t right =
        sizeof(float) * static_cast<size_t>((padded_w_ - pad_left_ - in_w) * kLanes);
#pragma omp parallel for num_threads(num_threads_) schedule(static) if (rows * in_w >= 4096)
    for (int64_t r = 0; r < rows; ++r) {
      float* row = padded + r * padded_w_ * kLanes;
      std::memset(row, 0, left);
      std::memcpy(row + pad_left_ * kLanes, x + r * in_w * kLanes, row_bytes);
      std::memset(row + (pad_left_ + in_w) * kLanes, 0, right);
    }
  }

  std::vector<PostOp> post_ops_;
  int64_t c16_ = 0, blocks_out_ = 0, pixels_ = 0;  // pixels_: the output's
  int64_t stride_h_ = 1, stride_w_ = 1;
  // A Conv of taps (conv_loops.h's spatial_range) rather than a 1x1 one.
  bool spatial_ = false;
  int64_t kernel_h_ = 1, kernel_w_ = 1, pad_top_ = 0, pad_left_ = 0;
  int64_t padded_w_ = 0;     // the input's rows copied with their side pads (pad_columns), or 0
  float* padded_ = nullptr;  // where: the shared scratchpad, or own_padded_
  std::vector<float> own_padded_;
  int num_threads_ = 1;
  bool finished_ = false;
  const float* weights_ = nullptr;
  // Staging: the input in nChw16c (given plain), its strided pixels compacted, the output
  // and the residual in nChw16c (wanted or given plain).
  std::vector<float> x_blocked_, x_stage_, y_stage_, r_stage_;
  std::vector<float> own_weights_, bias_, last_lanes_;
};

// Packs W [o, c, taps] into `to` ([o/16 blocks][c16/16][taps][16][16], c16 >= c a multiple of
// 16, padding zero) block by block: each block of 16 x 16 channels reads 16 rows of 16 x taps
// weights and writes 16 x 16 x taps in order, both within a few kilobytes. (Visiting the
// weights in source order scattered the writes: 8 ms for 512 x 512 x 3 x 3.)
void pack_weights(const float* source, int64_t o, int64_t c, int64_t taps, int64_t c16, float* to) {
  const int64_t in_blocks = c16 / kLanes;
  const int64_t out_blocks = (o + kLanes - 1) / kLanes;
  std::fill(to, to + out_blocks * in_blocks * taps * kLanes * kLanes, 0.0f);
  for (int64_t ob = 0; ob < out_blocks; ++ob) {
    const int64_t outs = std::min<int64_t>(kLanes, o - ob * kLanes);
    for (int64_t ib = 0; ib < in_blocks; ++ib) {
      const int64_t ins = std::min<int64_t>(kLanes, c - ib * kLanes);
      float* block = to + (ob * in_blocks + ib) * taps * kLanes * kLanes;
      const float* rows = source + (ob * kLanes * c + ib * kLanes) * taps;
      for (int64_t t = 0; t < taps; ++t) {
        for (int64_t il = 0; il < ins; ++il) {
          float* lanes = block + (t * kLanes + il) * kLanes;
          for (int64_t ol = 0; ol < outs; ++ol) lanes[ol] = rows[(ol * c + il) * taps + t];
        }
      }
    }
  }
}

Result<std::unique_ptr<CpuOp>> PointwiseConvOp::create(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 4));
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& ws = desc.inputs[1].sizes;
  const int residuals = num_residuals(desc);
  const bool post_ops_ok =
      std::all_of(desc.post_ops.begin(), desc.post_ops.end(), [](const PostOp& p) {
        return p.kind == PostOpKind::Relu || p.kind == PostOpKind::Clip ||
               p.kind == PostOpKind::Sigmoid || p.kind == PostOpKind::Tanh ||
               p.kind == PostOpKind::Linear || p.kind == PostOpKind::Swish ||
               p.kind == PostOpKind::AddResidual;
      });
  if (desc.op != "Conv" || desc.activation_layout != ActivationLayout::Blocked || x.size() != 4 ||
      ws.size() != 4 || x[1] < kLanes || !all_float(desc) || !post_ops_ok || residuals > 1) {
    return error(desc, Error::NotSupported,
                 "not a blocked 2-D f32 Conv of 16 or more input channels with the loops' "
                 "post-ops");
  }
  const runtime::Tensor* w = input_constant(desc, 1);
  if (w == nullptr) return error(desc, Error::NotSupported, "W is not constant");
  memory::dims strides, dilations, pad_begin, pad_end;
  int64_t group = 1;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out,
                        conv_geometry(desc, strides, dilations, pad_begin, pad_end, group));
  auto all = [](const memory::dims& d, int64_t v) {
    return std::all_of(d.begin(), d.end(), [v](int64_t e) { return e == v; });
  };
  // (A strided Conv's end pads are negative where it leaves the last rows or columns unread.)
  const bool no_end_pads =
      std::all_of(pad_end.begin(), pad_end.end(), [](int64_t e) { return e <= 0; });
  const bool pointwise = ws[2] == 1 && ws[3] == 1 && all(pad_begin, 0) && no_end_pads;
  if (group != 1 || !all(dilations, 0)) {
    return error(desc, Error::NotSupported, "groups or dilations");
  }
  if (!pointwise && desc.winograd) {
    return error(desc, Error::NotSupported,
                 "a Conv given to Winograd's kernels (2.25 times fewer multiplies than taps)");
  }
  if (!pointwise && strides[1] != 1 && strides[1] != 2) {
    return error(
        desc, Error::NotSupported,
        "a horizontal stride of " + std::to_string(strides[1]) + " (the loops take 1 or 2)");
  }
  const int64_t c = x[1], o = ws[0];
  if (pointwise && static_cast<double>(out[0]) * static_cast<double>(o) *
                           static_cast<double>(out[2] * out[3]) * sizeof(float) >
                       kMaxOutputBytes) {
    return error(desc, Error::NotSupported,
                 "an output over 2 MB (oneDNN's kernel writes it faster)");
  }
  auto op = std::make_unique<PointwiseConvOp>();
  op->in_sizes_ = x;
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
  op->c16_ = (c + kLanes - 1) / kLanes * kLanes;
  op->blocks_out_ = (o + kLanes - 1) / kLanes;
  op->pixels_ = out[2] * out[3];
  op->stride_h_ = strides[0];
  op->stride_w_ = strides[1];
  op->spatial_ = !pointwise;
  op->kernel_h_ = ws[2];
  op->kernel_w_ = ws[3];
  op->pad_top_ = pad_begin[0];
  op->pad_left_ = pad_begin[1];
  // The width the last output column's taps reach, from the first pad column.
  const int64_t reach = (out[3] - 1) * strides[1] + ws[3];
  if (!pointwise && (pad_begin[1] > 0 || reach > pad_begin[1] + x[3])) {
    op->padded_w_ = std::max(reach, pad_begin[1] + x[3]);
  }
  op->num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  op->post_ops_ = desc.post_ops;
  op->has_residual_ = residuals == 1;
  if (o % kLanes != 0) {
    op->last_lanes_.assign(kLanes, 0.0f);
    std::fill(op->last_lanes_.begin(), op->last_lanes_.begin() + o % kLanes, 1.0f);
  }
  op->residual_index_ = desc.inputs.size() - 1;
  if (op->has_residual_ && desc.inputs.back().sizes != out) {
    return error(desc, Error::InvalidArgument,
                 "residual has shape " + runtime::shape_to_string(desc.inputs.back().sizes) +
                     " (expected the output's " + runtime::shape_to_string(out) + ")");
  }
  const bool has_bias =
      desc.inputs.size() - static_cast<size_t>(residuals) == 3 && input_present(desc, 2);
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(std::vector<float> bias, column_bias(desc, 2, o, 1.0f));
    bias.resize(static_cast<size_t>(op->blocks_out_ * kLanes), 0.0f);
    op->bias_ = std::move(bias);
  }
  // W [O, C, KH, KW] as [OB][C16 / 16][KH][KW][16][16]: for each block of 16 output channels,
  // each block of input channels and each tap, the 16 weights of each input channel side by
  // side (padding zero). For a 1x1 Conv, [OB][C16][16].
  const auto* source = static_cast<const float*>(w->data());
  const int64_t c16 = op->c16_, blocks = op->blocks_out_, taps = ws[2] * ws[3];
  const size_t packed = static_cast<size_t>(blocks * c16 * taps * kLanes);
  KILN_ASSIGN_OR_RETURN(
      op->weights_,
      pack_floats(
          desc, 1,
          pointwise ? "kiln f32 W 1x1 [O/16][C16][16]"
                    : "kiln f32 W [O/16][C16/16][KH][KW][16][16]",
          packed, [&](float* to) { pack_weights(source, o, c, taps, c16, to); }, op->own_weights_));
  op->describe_ = pointwise ? "kiln pointwise Conv (own loops: nChw16c, " +
                                  std::to_string(kTilePixels) + " pixels x 32 channels a tile)"
                            : "kiln Conv " + std::to_string(ws[2]) + "x" + std::to_string(ws[3]) +
                                  " (own loops: nChw16c, " + std::to_string(kTilePixels) +
                                  " pixels of a row x 32 channels a tile)";
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

void to_blocked(const float* plain, float* blocked, int64_t n, int64_t c, int64_t hw) {
  const int64_t blocks = (c + kLanes - 1) / kLanes;
  std::memset(blocked, 0, sizeof(float) * static_cast<size_t>(n * blocks * hw * kLanes));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* from = plain + (i * c + ch) * hw;
      float* to = blocked + ((i * blocks + ch / kLanes) * hw) * kLanes + ch % kLanes;
      for (int64_t p = 0; p < hw; ++p) to[p * kLanes] = from[p];
    }
  }
}

void from_blocked(const float* blocked, float* plain, int64_t n, int64_t c, int64_t hw) {
  const int64_t blocks = (c + kLanes - 1) / kLanes;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* from = blocked + ((i * blocks + ch / kLanes) * hw) * kLanes + ch % kLanes;
      float* to = plain + (i * c + ch) * hw;
      for (int64_t p = 0; p < hw; ++p) to[p] = from[p * kLanes];
    }
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl

namespace kiln::engine::cpu {

std::optional<CpuOp::NativeLayout> hand_over_layout(HandOver layout,
                                                    const std::vector<int64_t>& sizes) {
  if (sizes.size() != 4) return std::nullopt;
  return dnnl_impl::native_layout(
      dnnl::memory::desc(dnnl_impl::to_dims(sizes), dnnl::memory::data_type::f32,
                         layout == HandOver::Blocked16 ? dnnl::memory::format_tag::aBcd16b
                                                       : dnnl::memory::format_tag::nhwc));
}

void hand_over_to_plain(HandOver layout, const float* from, float* plain,
                        const std::vector<int64_t>& sizes) {
  const int64_t n = sizes[0], c = sizes[1], hw = sizes[2] * sizes[3];
  if (layout == HandOver::Blocked16) {
    dnnl_impl::from_blocked(from, plain, n, c, hw);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < hw; ++p) {
      const float* pixel = from + (i * hw + p) * c;
      for (int64_t ch = 0; ch < c; ++ch) plain[(i * c + ch) * hw + p] = pixel[ch];
    }
  }
}

}  // namespace kiln::engine::cpu

namespace kiln::engine::cpu::dnnl_impl {

Result<std::unique_ptr<CpuOp>> create_blocked_conv(const OpDesc& desc) {
  return PointwiseConvOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
