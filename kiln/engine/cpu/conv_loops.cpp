// The loops of kiln's own blocked Convs (conv_loops.h), compiled ahead of time. A tile is up to
// kTilePixels output pixels of one row by one or two blocks of 16 output channels: 24 vectors
// of sums in registers. For each input channel and tap, the 16 weights of each block are loaded
// once and each pixel's input value is broadcast against them. A 1x1 Conv is the tile of one
// tap over consecutive pixels (its rows need not be told apart); a Conv of taps runs its tiles
// along each output row, the columns whose taps reach past the input's edges one at a time
// over the taps that are there. Biases, the post-ops and one residual (in the output's layout)
// are applied before the store. A 1x1 Conv of many input channels sums them in parts, each
// part's weights meeting every pixel tile while they are in L1, the partial sums kept in the
// output between parts.

#include <kiln/engine/cpu/conv_loops.h>
#include <kiln/engine/cpu/vector_math.h>

#include <algorithm>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using namespace vec;  // NOLINT: the vector helpers of the loops below

constexpr int kTilePixels = 12;

// The tile's accumulators, named (an array of vectors would stay in memory).
#define KILN_PW_PIXELS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// `...` for each accumulator of the tile, as `v` (a##p for block 0, b##p for block 1) with
// `px` its pixel in the tile and `k` its block (0 or 1).
#define KILN_PW_ON(p, ...)                                \
  if constexpr (kP > (p)) {                               \
    {                                                     \
      Floats& v = a##p;                                   \
      [[maybe_unused]] constexpr int64_t px = (p), k = 0; \
      __VA_ARGS__;                                        \
    }                                                     \
    if constexpr (kBlocks > 1) {                          \
      Floats& v = b##p;                                   \
      [[maybe_unused]] constexpr int64_t px = (p), k = 1; \
      __VA_ARGS__;                                        \
    }                                                     \
  }
#define KILN_PW_EACH(...)                                                          \
  KILN_PW_ON(0, __VA_ARGS__)                                                       \
  KILN_PW_ON(1, __VA_ARGS__)                                                       \
  KILN_PW_ON(2, __VA_ARGS__)                                                       \
  KILN_PW_ON(3, __VA_ARGS__)                                                       \
  KILN_PW_ON(4, __VA_ARGS__)                                                       \
  KILN_PW_ON(5, __VA_ARGS__)                                                       \
  KILN_PW_ON(6, __VA_ARGS__)                                                       \
  KILN_PW_ON(7, __VA_ARGS__) KILN_PW_ON(8, __VA_ARGS__) KILN_PW_ON(9, __VA_ARGS__) \
      KILN_PW_ON(10, __VA_ARGS__) KILN_PW_ON(11, __VA_ARGS__)

// Where a tile reads: the input block planes from `image` (each `plane` floats), its first
// pixel's first tap at offset `base` of a plane (negative above or left of the input), and the
// taps [kh0, kh1) x [kw0, kw1) that every pixel of the tile has inside the input.
struct TileInput {
  const float* image;
  int64_t plane, base, kh0, kh1, kw0, kw1;
  // The input blocks summed, [ib0, ib1) (ib1 < 0: to the last); `partial`: the sums start from
  // what the output holds (an earlier range's) unless `first`, and are stored raw unless `last`.
  int64_t ib0 = 0, ib1 = -1;
  bool partial = false, first = true, last = true;
};

// Output blocks [ob, ob + kBlocks) of the kP output pixels from p0 (an index into the output's
// pixels), whose inputs are kStride pixels apart. kRaw: the sums are stored as they are, for
// finish_sums (the post-ops' code once, not in every tile: it made the file take minutes to
// compile).
template <int kP, int kBlocks, int kStride, bool kRaw = false>
[[gnu::always_inline]] inline void conv_tile(const ConvJob& j, const TileInput& in, int64_t n,
                                             int64_t ob, int64_t p0) {
  static_assert(kP <= kTilePixels && kBlocks >= 1 && kBlocks <= 2);
#define KILN_PW_DECLARE(p) Floats a##p = {}, b##p = {};
  KILN_PW_PIXELS(KILN_PW_DECLARE)
#undef KILN_PW_DECLARE
  const int64_t in_blocks = j.c16 / kLanes;
  const int64_t taps = j.kernel_h * j.kernel_w;
  const int64_t block_weights = in_blocks * taps * kLanes * kLanes;  // one output block's
  const float* w0 = j.w + ob * block_weights;
  const float* w1 = w0 + block_weights;
  const int64_t at0 = ((n * j.blocks_out + ob) * j.pixels + p0) * kLanes;
  const int64_t block_floats = j.pixels * kLanes;
  if (in.partial && !in.first) {
    const float* sums = j.y + at0;
    KILN_PW_EACH(v = load(sums + k * block_floats + px * kLanes))
  }
  // The input channels that are there: the last block's padding lanes are skipped.
  const int64_t ib_end = in.ib1 < 0 ? in_blocks : in.ib1;
  for (int64_t ib = in.ib0; ib < ib_end; ++ib) {
    const int64_t lanes = std::min<int64_t>(kLanes, j.channels - ib * kLanes);
    const float* xb = in.image + ib * in.plane;
    for (int64_t kh = in.kh0; kh < in.kh1; ++kh) {
      for (int64_t kw = in.kw0; kw < in.kw1; ++kw) {
        const float* xr = xb + (in.base + (kh * j.in_w + kw) * kLanes);
        const int64_t tap = (ib * taps + kh * j.kernel_w + kw) * kLanes * kLanes;
        const float* wt0 = w0 + tap;
        const float* wt1 = w1 + tap;
        for (int64_t l = 0; l < lanes; ++l) {
          const Floats v0 = load(wt0 + l * kLanes);
          Floats v1{};
          if constexpr (kBlocks > 1) v1 = load(wt1 + l * kLanes);
            // (A scalar times a vector: the compiler broadcasts it from memory for both FMAs.)
#define KILN_PW_FMA(p)                            \
  if constexpr (kP > (p)) {                       \
    const float s = xr[(p)*kStride * kLanes + l]; \
    a##p += v0 * s;                               \
    if constexpr (kBlocks > 1) b##p += v1 * s;    \
  }
          KILN_PW_PIXELS(KILN_PW_FMA)
#undef KILN_PW_FMA
        }
      }
    }
  }
  // Biases, then the post-ops in order, each over the whole tile.
  if (kRaw || (in.partial && !in.last)) {
    float* out = j.y + at0;
    KILN_PW_EACH(store(out + k * block_floats + px * kLanes, v))
    return;
  }
  if (j.bias != nullptr) {
    const Floats bias0 = load(j.bias + ob * kLanes);
    Floats bias1{};
    if constexpr (kBlocks > 1) bias1 = load(j.bias + (ob + 1) * kLanes);
    KILN_PW_EACH(v += k == 0 ? bias0 : bias1)
  }
  for (size_t i = 0; i < j.num_ops; ++i) {
    const PostOp& op = j.ops[i];
    switch (op.kind) {
      case PostOpKind::Relu: {
        const Floats zero{};
        KILN_PW_EACH(v = v < zero ? zero : v)
        break;
      }
      case PostOpKind::Clip: {
        const Floats lo = splat(op.alpha), hi = splat(op.beta);
        KILN_PW_EACH(v = v < lo ? lo : v; v = v > hi ? hi : v)
        break;
      }
      case PostOpKind::Sigmoid:
        KILN_PW_EACH(v = sigmoid(v))
        break;
      case PostOpKind::Tanh:
        KILN_PW_EACH(v = tanh_of(v))
        break;
      case PostOpKind::Swish:
        KILN_PW_EACH(v = v * sigmoid(v))
        break;
      case PostOpKind::Linear: {
        const Floats alpha = splat(op.alpha), beta = splat(op.beta);
        KILN_PW_EACH(v = v * alpha + beta)
        break;
      }
      case PostOpKind::AddResidual: {
        const float* r = j.residual + at0;
        KILN_PW_EACH(v += load(r + k * block_floats + px * kLanes))
        break;
      }
      case PostOpKind::Gelu:
        break;  // declined at creation
    }
  }
  if (ob + kBlocks == j.blocks_out && j.last_lanes != nullptr) {
    const Floats keep = load(j.last_lanes);
    const Floats zero{};
    KILN_PW_EACH(if (k == kBlocks - 1) v = keep > zero ? v : zero)
  }
  float* out = j.y + at0;
  KILN_PW_EACH(store(out + k * block_floats + px * kLanes, v))
}

// The tile of `count` (1 to kTilePixels) pixels from p0 of blocks [ob, ob + kBlocks).
template <int kBlocks, int kStride, bool kRaw = false>
[[gnu::always_inline]] inline void conv_tiles(const ConvJob& j, const TileInput& in, int64_t n,
                                              int64_t ob, int64_t p0, int64_t count) {
  switch (count) {
#define KILN_PW_COUNT(c)                                    \
  case c:                                                   \
    conv_tile<c, kBlocks, kStride, kRaw>(j, in, n, ob, p0); \
    break;
    KILN_PW_COUNT(1)
    KILN_PW_COUNT(2)
    KILN_PW_COUNT(3)
    KILN_PW_COUNT(4)
    KILN_PW_COUNT(5)
    KILN_PW_COUNT(6)
    KILN_PW_COUNT(7)
    KILN_PW_COUNT(8) KILN_PW_COUNT(9) KILN_PW_COUNT(10) KILN_PW_COUNT(11) KILN_PW_COUNT(12)
#undef KILN_PW_COUNT
        default : break;
  }
}

// Weights of this many bytes are taken together over the pixels (so each pixel tile, read
// once into L1, meets all of them while they stay in L1 or L2).
constexpr int64_t kChunkWeightBytes = 32 << 10;
// A 1x1 Conv's sums over more input blocks than 1.5 times this go over them in about this many
// at a time (pointwise_range): MobileNet-V2's 384 -> 64 to 960 -> 160 layers ran 5-9 % faster
// (`kiln_blocked_conv_bench`, 1 thread, 3 interleaved runs; the model 2-3 % at 1 thread).
constexpr int64_t kPartBlocks = 12;

// One output row's tiles of blocks [ob, ob + kBlocks): the columns whose taps are all inside
// the input in tiles, the others one at a time over the taps they have. kOnePixel: every
// column one at a time (the baseline build's small code; see spatial_range).
template <int kBlocks, int kStride, bool kOnePixel>
[[gnu::always_inline]] inline void conv_row(const ConvJob& j, const float* image, int64_t n,
                                            int64_t ob, int64_t oh, int64_t ow_lo, int64_t ow_hi) {
  const int64_t ih = oh * j.stride_h - j.pad_top;
  TileInput in{image,
               j.in_h * j.in_w * kLanes,
               0,
               std::max<int64_t>(0, -ih),
               std::min(j.kernel_h, j.in_h - ih),
               0,
               j.kernel_w};
  if (in.kh0 >= in.kh1) in.kh0 = in.kh1 = 0;  // (no row of taps inside: the biases alone)
    // (Not a lambda: it would be compiled for the baseline target, outside the clones.)
#define KILN_CONV_EDGE(ow)                                                    \
  {                                                                           \
    const int64_t iw = (ow)*kStride - j.pad_left;                             \
    TileInput one = in;                                                       \
    one.kw0 = std::max<int64_t>(0, -iw);                                      \
    one.kw1 = std::max(one.kw0, std::min(j.kernel_w, j.in_w - iw));           \
    one.base = (ih * j.in_w + iw) * kLanes;                                   \
    conv_tile<1, kBlocks, kStride, true>(j, one, n, ob, oh * j.out_w + (ow)); \
  }
  const int64_t p_row = oh * j.out_w;
  if constexpr (kOnePixel) {
    for (int64_t ow = 0; ow < j.out_w; ++ow) KILN_CONV_EDGE(ow)
    finish_sums(j, n, ob, kBlocks, p_row, j.out_w);
    return;
  }
  for (int64_t ow = 0; ow < ow_lo; ++ow) KILN_CONV_EDGE(ow)
  // Tiles of even sizes (a row of 14: 7 and 7, not 12 and 2).
  const int64_t width = ow_hi - ow_lo;
  const int64_t tiles = (width + kTilePixels - 1) / kTilePixels;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t ow = ow_lo + width * t / tiles;
    in.base = (ih * j.in_w + ow * kStride - j.pad_left) * kLanes;
    conv_tiles<kBlocks, kStride, true>(j, in, n, ob, oh * j.out_w + ow,
                                       ow_lo + width * (t + 1) / tiles - ow);
  }
  for (int64_t ow = std::max(ow_lo, ow_hi); ow < j.out_w; ++ow) KILN_CONV_EDGE(ow)
#undef KILN_CONV_EDGE
  finish_sums(j, n, ob, kBlocks, p_row, j.out_w);  // the row, in L1
}

template <int kStride, bool kOnePixel>
[[gnu::always_inline]] inline void spatial_rows(const ConvJob& j, int64_t n, int64_t ob_begin,
                                                int64_t ob_end, int64_t row_begin,
                                                int64_t row_end) {
  const int64_t in_blocks = j.c16 / kLanes;
  const float* image = j.x + n * in_blocks * j.in_h * j.in_w * kLanes;
  // The columns whose taps are all inside the input: [ow_lo, ow_hi).
  const int64_t ow_lo = std::min(j.out_w, (j.pad_left + kStride - 1) / kStride);
  const int64_t last = j.in_w - j.kernel_w + j.pad_left;  // the last tap start inside, times 1
  const int64_t ow_hi = last < 0 ? ow_lo : std::clamp(last / kStride + 1, ow_lo, j.out_w);
  const int64_t block_bytes =
      in_blocks * j.kernel_h * j.kernel_w * kLanes * kLanes * static_cast<int64_t>(sizeof(float));
  const int64_t chunk = std::max<int64_t>(2, kChunkWeightBytes / block_bytes / 2 * 2);
  // A few rows at a time meet each chunk of blocks, so that the input rows they read stay in
  // cache across the chunk's blocks.
  constexpr int64_t kRows = 4;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
    const int64_t r1 = std::min(row_end, r0 + kRows);
    for (int64_t c0 = ob_begin; c0 < ob_end; c0 += chunk) {
      const int64_t c1 = std::min(ob_end, c0 + chunk);
      int64_t ob = c0;
      if constexpr (!kOnePixel) {
        for (; ob + 2 <= c1; ob += 2) {
          for (int64_t oh = r0; oh < r1; ++oh) {
            conv_row<2, kStride, false>(j, image, n, ob, oh, ow_lo, ow_hi);
          }
        }
      }
      for (; ob < c1; ++ob) {
        for (int64_t oh = r0; oh < r1; ++oh) {
          conv_row<1, kStride, kOnePixel>(j, image, n, ob, oh, ow_lo, ow_hi);
        }
      }
    }
  }
}

}  // namespace

KILN_VECTOR_CLONES void pointwise_range(const ConvJob& j, int64_t n, int64_t ob_begin,
                                        int64_t ob_end, int64_t p_begin, int64_t p_end) {
  const int64_t in_blocks = j.c16 / kLanes;
  // Long sums go over the input channels in parts, so that a pair of output blocks' weights of
  // a part stay in L1 across the pixel tiles; the partial sums wait in the output.
  const int64_t parts =
      in_blocks > kPartBlocks + kPartBlocks / 2 ? (in_blocks + kPartBlocks - 1) / kPartBlocks : 1;
  const int64_t part_blocks = (in_blocks + parts - 1) / parts;
  const int64_t block_bytes = part_blocks * kLanes * kLanes * static_cast<int64_t>(sizeof(float));
  const int64_t chunk = std::max<int64_t>(2, kChunkWeightBytes / block_bytes / 2 * 2);
  const float* image = j.x + n * in_blocks * j.pixels * kLanes;
  for (int64_t c0 = ob_begin; c0 < ob_end; c0 += chunk) {
    const int64_t c1 = std::min(ob_end, c0 + chunk);
    for (int64_t q = 0; q < parts; ++q) {
      TileInput in{image, j.pixels * kLanes, 0, 0, 1, 0, 1};
      in.ib0 = q * part_blocks;
      in.ib1 = std::min(in_blocks, in.ib0 + part_blocks);
      in.partial = parts > 1, in.first = q == 0, in.last = q + 1 == parts;
      for (int64_t p = p_begin; p < p_end; p += kTilePixels) {
        const int64_t count = std::min<int64_t>(kTilePixels, p_end - p);
        in.base = p * kLanes;
        int64_t ob = c0;
        for (; ob + 2 <= c1; ob += 2) conv_tiles<2, 1>(j, in, n, ob, p, count);
        if (ob < c1) conv_tiles<1, 1>(j, in, n, ob, p, count);
      }
    }
  }
}

namespace {

[[gnu::target("avx512f")]] void spatial_range_avx512(const ConvJob& j, int64_t n, int64_t ob_begin,
                                                     int64_t ob_end, int64_t row_begin,
                                                     int64_t row_end) {
  if (j.stride_w == 2) {
    spatial_rows<2, false>(j, n, ob_begin, ob_end, row_begin, row_end);
  } else {
    spatial_rows<1, false>(j, n, ob_begin, ob_end, row_begin, row_end);
  }
}

}  // namespace

// The tiles are built for AVX-512 only, the CPUs kernel selection gives these loops
// (own_vector_loops): built for each target, as pointwise_range is, they took minutes to
// compile. Elsewhere (a test's direct call) one pixel at a time, in little code.
void spatial_range(const ConvJob& j, int64_t n, int64_t ob_begin, int64_t ob_end, int64_t row_begin,
                   int64_t row_end) {
  if (__builtin_cpu_supports("avx512f")) {
    spatial_range_avx512(j, n, ob_begin, ob_end, row_begin, row_end);
  } else if (j.stride_w == 2) {
    spatial_rows<2, true>(j, n, ob_begin, ob_end, row_begin, row_end);
  } else {
    spatial_rows<1, true>(j, n, ob_begin, ob_end, row_begin, row_end);
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl
