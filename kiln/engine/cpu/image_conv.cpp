// The first Conv of a network of blocked Convs, over an image of a few channels (1-15: RGB),
// on loops of kiln's own, compiled ahead of time. oneDNN generates the code of its first-layer
// kernel when the primitive is created, 0.4-0.9 ms: the largest part of what a new image size
// cost the OCR detector with expect_frequent_reshapes, whose other Convs generate nothing.
// The image is read plain (NCHW, as oneDNN's first-layer kernels read it); the result is
// nChw16c, the layout of the Convs after it. A tile is up to kTilePixels output pixels of one
// row by one or two blocks of 16 output channels (24 vectors of sums in registers): for each
// input channel and tap the 16 weights of each block are loaded once and each pixel's input
// value is broadcast against them. Columns whose taps reach past the image's edges are done one
// at a time over the taps that are there. Biases, the loops' post-ops and one residual are
// applied over each finished row (conv_loops.h's finish_sums).

#include <kiln/engine/cpu/blocked_loops_op.h>
#include <kiln/engine/cpu/conv_loops.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/vector_math.h>

#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;
using namespace vec;  // NOLINT: the vector helpers of the loops below

constexpr int kTilePixels = 12;
// The most taps (input channels x kernel rows x kernel columns) the loops take: the list of a
// row's taps is on the stack.
constexpr int64_t kMaxTaps = 1024;

// The epilogue a tile applies itself when the op's post-ops are at most one Relu or Clip
// keeping zero (no residual): the biases, then the bounds [lo, hi]. Otherwise the tiles store
// raw sums and finish_sums finishes each row.
struct Bounds {
  float lo, hi;
};

// One tap of a tile: where its input is from the tile's first input pixel (c, ih, iw), and
// where its 16 weights are in an output block's.
struct Tap {
  int64_t x, w;
};

// The taps [kh0, kh1) x [kw0, kw1) of every input channel into `taps`; returns their number.
int64_t list_taps(const ConvJob& j, int64_t kh0, int64_t kh1, int64_t kw0, int64_t kw1, Tap* taps) {
  int64_t count = 0;
  for (int64_t c = 0; c < j.channels; ++c) {
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      for (int64_t kw = kw0; kw < kw1; ++kw) {
        taps[count++] = {(c * j.in_h + kh) * j.in_w + kw,
                         ((c * j.kernel_h + kh) * j.kernel_w + kw) * kLanes};
      }
    }
  }
  return count;
}

#define KILN_IMG_PIXELS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// The raw sums of output blocks [ob, ob + kBlocks) of kP pixels from output pixel p (an index
// into the output's pixels; j.y: one image's output), the first reading from `origin` (its
// input pixel in channel 0), each kStride columns after the one before, over `taps` (all
// inside the image). W is [OB][C][KH][KW][16]. (A list of taps rather than loops over the
// kernel's rows and columns: GCC carried a stride-2 row's values from one column to the next
// in registers, with more moves than loads saved.)
template <int kP, int kBlocks, int kStride, bool kFused>
[[gnu::always_inline]] inline void image_tile(const ConvJob& j, const Tap* taps, int64_t num_taps,
                                              const float* origin, int64_t ob, int64_t p,
                                              Bounds bounds) {
  static_assert(kP >= 1 && kP <= kTilePixels && kBlocks >= 1 && kBlocks <= 2);
#define KILN_IMG_DECLARE(q) Floats a##q = {}, b##q = {};
  KILN_IMG_PIXELS(KILN_IMG_DECLARE)
#undef KILN_IMG_DECLARE
  const int64_t block_weights = j.channels * j.kernel_h * j.kernel_w * kLanes;
  const float* w0 = j.w + ob * block_weights;
  for (int64_t t = 0; t < num_taps; ++t) {
    const float* xr = origin + taps[t].x;
    const Floats v0 = load(w0 + taps[t].w);
    Floats v1{};
    if constexpr (kBlocks > 1) v1 = load(w0 + block_weights + taps[t].w);
#define KILN_IMG_FMA(q)                        \
  if constexpr (kP > (q)) {                    \
    const float s = xr[(q)*kStride];           \
    a##q += v0 * s;                            \
    if constexpr (kBlocks > 1) b##q += v1 * s; \
  }
    KILN_IMG_PIXELS(KILN_IMG_FMA)
#undef KILN_IMG_FMA
  }
  if constexpr (kFused) {
    const Floats lo = splat(bounds.lo), hi = splat(bounds.hi);
    const Floats bias0 = j.bias != nullptr ? load(j.bias + ob * kLanes) : Floats{};
    Floats bias1{};
    if (kBlocks > 1 && j.bias != nullptr) bias1 = load(j.bias + (ob + 1) * kLanes);
#define KILN_IMG_EPILOGUE(q)        \
  if constexpr (kP > (q)) {         \
    a##q += bias0;                  \
    a##q = a##q < lo ? lo : a##q;   \
    a##q = a##q > hi ? hi : a##q;   \
    if constexpr (kBlocks > 1) {    \
      b##q += bias1;                \
      b##q = b##q < lo ? lo : b##q; \
      b##q = b##q > hi ? hi : b##q; \
    }                               \
  }
    KILN_IMG_PIXELS(KILN_IMG_EPILOGUE)
#undef KILN_IMG_EPILOGUE
  }
  float* out = j.y + (ob * j.pixels + p) * kLanes;
  const int64_t block_floats = j.pixels * kLanes;
#define KILN_IMG_STORE(q)                                                    \
  if constexpr (kP > (q)) {                                                  \
    store(out + (q)*kLanes, a##q);                                           \
    if constexpr (kBlocks > 1) store(out + block_floats + (q)*kLanes, b##q); \
  }
  KILN_IMG_PIXELS(KILN_IMG_STORE)
#undef KILN_IMG_STORE
}

template <int kBlocks, int kStride, bool kFused>
[[gnu::always_inline]] inline void image_tiles(const ConvJob& j, const Tap* taps, int64_t num_taps,
                                               const float* origin, int64_t ob, int64_t p,
                                               int64_t count, Bounds bounds) {
  switch (count) {
#define KILN_IMG_COUNT(c)                                                              \
  case c:                                                                              \
    image_tile<c, kBlocks, kStride, kFused>(j, taps, num_taps, origin, ob, p, bounds); \
    break;
    KILN_IMG_COUNT(1)
    KILN_IMG_COUNT(2)
    KILN_IMG_COUNT(3)
    KILN_IMG_COUNT(4)
    KILN_IMG_COUNT(5)
    KILN_IMG_COUNT(6)
    KILN_IMG_COUNT(7)
    KILN_IMG_COUNT(8)
    KILN_IMG_COUNT(9)
    KILN_IMG_COUNT(10)
    KILN_IMG_COUNT(11)
    KILN_IMG_COUNT(12)
#undef KILN_IMG_COUNT
    default:
      break;
  }
}

// Output row oh of blocks [ob, ob + kBlocks) of one image (`image`: its planes; j.y: its
// output), raw sums then finished. Columns whose taps reach past the image's sides go one at
// a time over the taps that are inside; kOnePixel: every column so (the baseline build's
// small code). `taps`: room for kMaxTaps.
template <int kBlocks, int kStride, bool kOnePixel, bool kFused>
[[gnu::always_inline]] inline void image_row(const ConvJob& j, const float* image, int64_t ob,
                                             int64_t oh, int64_t ow_lo, int64_t ow_hi, Tap* taps,
                                             Bounds bounds) {
  const int64_t ih = oh * j.stride_h - j.pad_top;
  int64_t kh0 = std::max<int64_t>(0, -ih), kh1 = std::min(j.kernel_h, j.in_h - ih);
  if (kh0 >= kh1) kh0 = kh1 = 0;  // (no row of taps inside: the biases alone)
  const int64_t p_row = oh * j.out_w;
  const float* row = image + ih * j.in_w;  // (ih may be negative: only offsets from it are read)
  for (int64_t ow = 0; ow < j.out_w; ++ow) {
    if (!kOnePixel && ow == ow_lo && ow_lo < ow_hi) {
      // Tiles of even sizes (a row of 14: 7 and 7, not 12 and 2).
      const int64_t num_taps = list_taps(j, kh0, kh1, 0, j.kernel_w, taps);
      const int64_t width = ow_hi - ow_lo;
      const int64_t tiles = (width + kTilePixels - 1) / kTilePixels;
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t at = ow_lo + width * t / tiles;
        image_tiles<kBlocks, kStride, kFused>(j, taps, num_taps, row + at * kStride - j.pad_left,
                                              ob, p_row + at, ow_lo + width * (t + 1) / tiles - at,
                                              bounds);
      }
      ow = ow_hi - 1;
      continue;
    }
    const int64_t iw = ow * kStride - j.pad_left;
    const int64_t kw0 = std::max<int64_t>(0, -iw);
    const int64_t kw1 = std::max(kw0, std::min(j.kernel_w, j.in_w - iw));
    const int64_t num_taps = list_taps(j, kh0, kh1, kw0, kw1, taps);
    image_tile<1, kBlocks, kStride, kFused>(j, taps, num_taps, row + iw, ob, p_row + ow, bounds);
  }
  if constexpr (!kFused) finish_sums(j, 0, ob, kBlocks, p_row, j.out_w);  // the row, in L1
}

// Output blocks [ob_begin, ob_end) of output rows [row_begin, row_end) of image n.
template <int kStride, bool kOnePixel, bool kFused>
[[gnu::always_inline]] inline void image_rows(const ConvJob& j, int64_t n, int64_t ob_begin,
                                              int64_t ob_end, int64_t row_begin, int64_t row_end,
                                              Bounds bounds) {
  Tap taps[kMaxTaps];
  const float* image = j.x + n * j.channels * j.in_h * j.in_w;
  ConvJob one = j;  // image n's output (and residual), whose blocks the rows index from 0
  one.y = j.y + n * j.blocks_out * j.pixels * kLanes;
  if (one.residual != nullptr) one.residual = j.residual + n * j.blocks_out * j.pixels * kLanes;
  // The columns whose taps are all inside the image: [ow_lo, ow_hi).
  const int64_t ow_lo = std::min(j.out_w, (j.pad_left + kStride - 1) / kStride);
  const int64_t last = j.in_w - j.kernel_w + j.pad_left;  // the last tap start inside, times 1
  const int64_t ow_hi = last < 0 ? ow_lo : std::clamp(last / kStride + 1, ow_lo, j.out_w);
  for (int64_t oh = row_begin; oh < row_end; ++oh) {
    int64_t ob = ob_begin;
    if constexpr (!kOnePixel) {
      for (; ob + 2 <= ob_end; ob += 2) {
        image_row<2, kStride, false, kFused>(one, image, ob, oh, ow_lo, ow_hi, taps, bounds);
      }
    }
    for (; ob < ob_end; ++ob) {
      image_row<1, kStride, kOnePixel, kFused>(one, image, ob, oh, ow_lo, ow_hi, taps, bounds);
    }
  }
}

// `bounds`: the epilogue the tiles apply (Bounds), or null for raw sums finished per row.
[[gnu::target("avx512f")]] void image_range_avx512(const ConvJob& j, int64_t n, int64_t ob_begin,
                                                   int64_t ob_end, int64_t row_begin,
                                                   int64_t row_end, const Bounds* bounds) {
  const Bounds b = bounds != nullptr ? *bounds : Bounds{};
  if (j.stride_w == 2) {
    if (bounds != nullptr) {
      image_rows<2, false, true>(j, n, ob_begin, ob_end, row_begin, row_end, b);
    } else {
      image_rows<2, false, false>(j, n, ob_begin, ob_end, row_begin, row_end, b);
    }
  } else if (bounds != nullptr) {
    image_rows<1, false, true>(j, n, ob_begin, ob_end, row_begin, row_end, b);
  } else {
    image_rows<1, false, false>(j, n, ob_begin, ob_end, row_begin, row_end, b);
  }
}

// The tiles are built for AVX-512 only, the CPUs kernel selection gives these loops
// (own_vector_loops); elsewhere (a test's direct call) one pixel at a time, in little code,
// finished per row.
void image_range(const ConvJob& j, int64_t n, int64_t ob_begin, int64_t ob_end, int64_t row_begin,
                 int64_t row_end, const Bounds* bounds) {
  if (__builtin_cpu_supports("avx512f")) {
    image_range_avx512(j, n, ob_begin, ob_end, row_begin, row_end, bounds);
  } else if (j.stride_w == 2) {
    image_rows<2, true, false>(j, n, ob_begin, ob_end, row_begin, row_end, Bounds{});
  } else {
    image_rows<1, true, false>(j, n, ob_begin, ob_end, row_begin, row_end, Bounds{});
  }
}

class ImageConvOp final : public BlockedLoopsOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

  // The image is read plain; the output and the residual are nChw16c.
  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index == 0) return std::nullopt;
    return BlockedLoopsOp::native_input_layout(index);
  }
  Status use_native_input(size_t index) override {
    if (index == 0) return CpuOp::use_native_input(index);
    return BlockedLoopsOp::use_native_input(index);
  }

  Status finish() override {
    const int64_t out_floats = in_sizes_[0] * blocks_out_ * kLanes * pixels_;
    if (!native_out_) y_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    if (has_residual_ && !native_residual_) r_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    finished_ = true;
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run(inputs, outputs));
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    const int64_t n = in_sizes_[0], o = outputs_[0].sizes[1];
    ConvJob j = job_;
    j.x = static_cast<const float*>(inputs[0]->data());
    if (has_residual_) {
      j.residual = static_cast<const float*>(inputs[residual_index_]->data());
      if (!native_residual_) {
        to_blocked(j.residual, r_stage_.data(), n, o, pixels_);
        j.residual = r_stage_.data();
      }
    }
    float* y = static_cast<float*>(outputs[0]->mutable_data());
    j.y = native_out_ ? y : y_stage_.data();
    // Threads share the pairs of output blocks when they divide evenly, else the rows.
    const int64_t pairs = (blocks_out_ + 1) / 2, rows = j.out_h;
    const int parts = static_cast<int>(std::min<int64_t>(num_threads_, std::max(pairs, rows)));
    const bool by_blocks = pairs % parts == 0 && rows < 4 * parts;
    const Bounds* bounds = fused_ ? &bounds_ : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      if (parts <= 1) {
        image_range(j, i, 0, blocks_out_, 0, rows, bounds);
        continue;
      }
#pragma omp parallel for num_threads(parts) schedule(static)
      for (int t = 0; t < parts; ++t) {
        if (by_blocks) {
          image_range(j, i, std::min(blocks_out_, 2 * (pairs * t / parts)),
                      std::min(blocks_out_, 2 * (pairs * (t + 1) / parts)), 0, rows, bounds);
        } else {
          image_range(j, i, 0, blocks_out_, rows * t / parts, rows * (t + 1) / parts, bounds);
        }
      }
    }
    if (!native_out_) from_blocked(y_stage_.data(), y, n, o, pixels_);
    return Status();
  }

 private:
  ConvJob job_;         // the geometry, weights, biases and post-ops; the tensors are set per run
  bool fused_ = false;  // the tiles apply the post-ops themselves, within bounds_
  Bounds bounds_{};
  int64_t blocks_out_ = 0, pixels_ = 0;
  int num_threads_ = 1;
  bool finished_ = false;
  std::vector<PostOp> post_ops_;
  std::vector<float> own_weights_, bias_, last_lanes_;
  std::vector<float> y_stage_, r_stage_;  // the output and residual in nChw16c, given plain
};

Result<std::unique_ptr<CpuOp>> ImageConvOp::create(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 4));
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& ws = desc.inputs[1].sizes;
  const int residuals = num_residuals(desc);
  const bool post_ops_ok = std::all_of(desc.post_ops.begin(), desc.post_ops.end(),
                                       [](const PostOp& p) { return p.kind != PostOpKind::Gelu; });
  if (desc.op != "Conv" || desc.activation_layout != ActivationLayout::Blocked || x.size() != 4 ||
      ws.size() != 4 || x[1] >= kLanes || !all_float(desc) || !post_ops_ok || residuals > 1) {
    return error(desc, Error::NotSupported,
                 "not a blocked 2-D f32 Conv of an image (1-15 channels) with the loops' "
                 "post-ops");
  }
  const runtime::Tensor* w = input_constant(desc, 1);
  if (w == nullptr) return error(desc, Error::NotSupported, "W is not constant");
  memory::dims strides, dilations, pad_begin, pad_end;
  int64_t group = 1;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out,
                        conv_geometry(desc, strides, dilations, pad_begin, pad_end, group));
  if (group != 1 || dilations[0] != 0 || dilations[1] != 0) {
    return error(desc, Error::NotSupported, "groups or dilations");
  }
  if (strides[1] != 1 && strides[1] != 2) {
    return error(
        desc, Error::NotSupported,
        "a horizontal stride of " + std::to_string(strides[1]) + " (the loops take 1 or 2)");
  }
  const int64_t c = x[1], o = ws[0];
  if (c * ws[2] * ws[3] > kMaxTaps) {
    return error(desc, Error::NotSupported,
                 std::to_string(c * ws[2] * ws[3]) + " taps (the loops take up to " +
                     std::to_string(kMaxTaps) + ")");
  }
  auto op = std::make_unique<ImageConvOp>();
  op->in_sizes_ = x;
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
  op->blocks_out_ = (o + kLanes - 1) / kLanes;
  op->pixels_ = out[2] * out[3];
  op->num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  op->post_ops_ = desc.post_ops;
  op->has_residual_ = residuals == 1;
  op->residual_index_ = desc.inputs.size() - 1;
  if (op->has_residual_ && desc.inputs.back().sizes != out) {
    return error(desc, Error::InvalidArgument,
                 "residual has shape " + runtime::shape_to_string(desc.inputs.back().sizes) +
                     " (expected the output's " + runtime::shape_to_string(out) + ")");
  }
  if (o % kLanes != 0) {
    op->last_lanes_.assign(kLanes, 0.0f);
    std::fill(op->last_lanes_.begin(), op->last_lanes_.begin() + o % kLanes, 1.0f);
  }
  const bool has_bias =
      desc.inputs.size() - static_cast<size_t>(residuals) == 3 && input_present(desc, 2);
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(std::vector<float> bias, column_bias(desc, 2, o, 1.0f));
    bias.resize(static_cast<size_t>(op->blocks_out_ * kLanes), 0.0f);
    op->bias_ = std::move(bias);
  }
  // W [O, C, KH, KW] as [OB][C][KH][KW][16]: for each block of 16 output channels, each input
  // channel and tap, the block's 16 weights side by side (padding zero).
  const auto* source = static_cast<const float*>(w->data());
  const int64_t taps = ws[2] * ws[3], blocks = op->blocks_out_;
  KILN_ASSIGN_OR_RETURN(const float* packed,
                        pack_floats(
                            desc, 1, "kiln f32 W image [O/16][C][KH][KW][16]",
                            static_cast<size_t>(blocks * c * taps * kLanes),
                            [&](float* to) {
                              std::fill(to, to + blocks * c * taps * kLanes, 0.0f);
                              for (int64_t oc = 0; oc < o; ++oc) {
                                for (int64_t t = 0; t < c * taps; ++t) {
                                  to[((oc / kLanes) * c * taps + t) * kLanes + oc % kLanes] =
                                      source[oc * c * taps + t];
                                }
                              }
                            },
                            op->own_weights_));
  ConvJob& j = op->job_;
  j.w = packed;
  j.bias = op->bias_.empty() ? nullptr : op->bias_.data();
  j.channels = c;
  j.blocks_out = op->blocks_out_;
  j.pixels = op->pixels_;
  j.in_h = x[2], j.in_w = x[3], j.out_h = out[2], j.out_w = out[3];
  j.kernel_h = ws[2], j.kernel_w = ws[3];
  j.stride_h = strides[0], j.stride_w = strides[1];
  j.pad_top = pad_begin[0], j.pad_left = pad_begin[1];
  j.ops = op->post_ops_.data();
  j.num_ops = op->post_ops_.size();
  j.last_lanes = op->last_lanes_.empty() ? nullptr : op->last_lanes_.data();
  // At most one Relu or Clip, which keeps a zero sum zero (the padding lanes), and no residual:
  // in the tiles.
  const float inf = std::numeric_limits<float>::infinity();
  op->bounds_ = {-inf, inf};
  op->fused_ = residuals == 0 && desc.post_ops.size() <= 1;
  for (const PostOp& p : desc.post_ops) {
    if (p.kind == PostOpKind::Relu) {
      op->bounds_.lo = 0.0f;
    } else if (p.kind == PostOpKind::Clip && p.alpha <= 0.0f && p.beta >= 0.0f) {
      op->bounds_ = {p.alpha, p.beta};
    } else {
      op->fused_ = false;
    }
  }
  op->describe_ = "kiln image Conv " + std::to_string(ws[2]) + "x" + std::to_string(ws[3]) +
                  " (own loops: plain image in, nChw16c out, " + std::to_string(kTilePixels) +
                  " pixels of a row x 32 channels a tile)";
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_image_conv(const OpDesc& desc) {
  return ImageConvOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
