// 3x3 stride-1 Convs on kiln's own Winograd loops, F(3x3, 3x3) or F(4x4, 3x3): each 3 x 3 (4 x 4)
// tile of output pixels comes from a 5 x 5 (6 x 6) tile of input pixels in 25 (36) products of
// channels instead of 81 (144) taps. oneDNN's Winograd kernels generate their code and search
// their blocking for each image size (0.2-0.5 ms per Conv, for every new image size and at a
// first run); these loops generate nothing, so a new size costs no code generation. The input
// and output are nChw16c, as for kiln's other blocked Convs. A run takes the tiles a chunk at a
// time: the chunk's input tiles are transformed (V = Bᵀ d B, 16 channels a vector), each point
// multiplies its transformed tiles by its transformed weights (U = G g Gᵀ, packed once) on the
// 1x1 Conv loops of conv_loops.cpp, and the products are transformed back (Y = Aᵀ M A), with
// the bias, the loops' post-ops and a residual applied before the store.

#include <kiln/engine/cpu/blocked_loops_op.h>
#include <kiln/engine/cpu/conv_loops.h>
#include <kiln/engine/cpu/dnnl_common.h>
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

constexpr int64_t kGemmTile = 12;  // conv_loops.cpp's pixels a tile
// The transformed input and products of a chunk of tiles stay within this many bytes (of a
// 2 MB L2), in whole 12-tile steps of the product loops.
constexpr int64_t kChunkBytes = 1 << 19;
constexpr int64_t kMaxChunkTiles = 96;

// Winograd's results differ from a direct convolution's by more rounding, growing with the
// tile: F(3x3, 3x3) rounds to up to about 4e-7 of the sum of the products' magnitudes,
// F(4x4, 3x3) to about 9e-7 (sums of 300-1300 products of random data, winograd_conv_test.cpp),
// so outputs near zero can differ from a direct convolution's by more than 1e-5 (as oneDNN's
// F(4x4, 3x3) kernel's do). F(2x2, 3x3) rounds least, but these loops ran it at 100-220 GFLOP/s
// (of the direct algorithm's work, 1 thread) against 150-300 for F(3x3, 3x3).

// F(3x3, 3x3): 5 x 5 input pixels a tile, 25 products for 9 outputs (3.24 x fewer multiplies
// than taps), over the points 0, 1, -1, 2 and infinity.
struct F3 {
  static constexpr int64_t kOut = 3, kIn = 5, kPoints = kIn * kIn;
  static constexpr const char* kName = "F(3x3, 3x3)";
  static constexpr double kG[kIn][3] = {{1.0 / 2, 0, 0},
                                        {-1.0 / 2, -1.0 / 2, -1.0 / 2},
                                        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                        {1.0 / 6, 1.0 / 3, 2.0 / 3},
                                        {0, 0, 1}};
  // Bᵀ d for five vectors (one column or row of a tile).
  [[gnu::always_inline]] static void input(const Floats* d, Floats* r) {
    r[0] = 2.0f * (d[0] - d[2]) - d[1] + d[3];
    r[1] = d[3] - 2.0f * d[1] - d[2];
    r[2] = 2.0f * d[1] - 3.0f * d[2] + d[3];
    r[3] = d[3] - d[1];
    r[4] = 2.0f * (d[1] - d[3]) - d[2] + d[4];
  }
  // Aᵀ m for five vectors, three results.
  [[gnu::always_inline]] static void output(const Floats* m, Floats* r) {
    const Floats s12 = m[1] + m[2];
    r[0] = m[0] + s12 + m[3];
    r[1] = m[1] - m[2] + 2.0f * m[3];
    r[2] = s12 + 4.0f * m[3] + m[4];
  }
};

// F(4x4, 3x3): 6 x 6 input pixels a tile, 36 products for 16 outputs (4 x fewer multiplies than
// taps), over the points 0, 1, -1, 2, -2 and infinity.
struct F4 {
  static constexpr int64_t kOut = 4, kIn = 6, kPoints = kIn * kIn;
  static constexpr const char* kName = "F(4x4, 3x3)";
  static constexpr double kG[kIn][3] = {{1.0 / 4, 0, 0},
                                        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                        {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                        {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                        {0, 0, 1}};
  // Bᵀ d for six vectors.
  [[gnu::always_inline]] static void input(const Floats* d, Floats* r) {
    const Floats a = d[4] - 4.0f * d[2], b = d[3] - 4.0f * d[1];
    const Floats c = d[4] - d[2], e = 2.0f * (d[3] - d[1]);
    r[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
    r[1] = a + b;
    r[2] = a - b;
    r[3] = c + e;
    r[4] = c - e;
    r[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
  }
  // Aᵀ m for six vectors, four results.
  [[gnu::always_inline]] static void output(const Floats* m, Floats* r) {
    const Floats s12 = m[1] + m[2], d12 = m[1] - m[2];
    const Floats s34 = m[3] + m[4], d34 = m[3] - m[4];
    r[0] = m[0] + s12 + s34;
    r[1] = d12 + 2.0f * d34;
    r[2] = s12 + 4.0f * s34;
    r[3] = d12 + 8.0f * d34 + m[5];
  }
};

// F(4x4, 3x3) unless its tiles would do over 0.9 x the products of F(3x3, 3x3)'s, counting the
// tiles' parts past the image's edges: its transforms and weights cost more per product. At 1
// and 2 threads F(4x4, 3x3) took 0.61-0.92 x F(3x3, 3x3)'s time on images of 4 x 4 to 160 x 160
// pixels, 1.01-1.08 x on 14 x 14, where F(3x3, 3x3) wastes fewer pixels (kiln_winograd_bench,
// modes 3 and 4).
WinogradTile choose_tile(int64_t oh, int64_t ow) {
  auto products = [&](int64_t tile, int64_t points) {
    return points * ((oh + tile - 1) / tile) * ((ow + tile - 1) / tile);
  };
  return products(F4::kOut, F4::kPoints) * 10 <= products(F3::kOut, F3::kPoints) * 9
             ? WinogradTile::F4x4
             : WinogradTile::F3x3;
}

// U = G g Gᵀ for one 3x3 kernel `g` (row-major), in double, written to u[point * stride].
template <typename T>
void transform_kernel(const float* g, float* u, int64_t stride) {
  constexpr int64_t kIn = T::kIn;
  constexpr const auto& kG = T::kG;
  double gg[kIn][3];
  for (int i = 0; i < kIn; ++i) {
    for (int j = 0; j < 3; ++j) {
      gg[i][j] = kG[i][0] * g[j] + kG[i][1] * g[3 + j] + kG[i][2] * g[6 + j];
    }
  }
  for (int i = 0; i < kIn; ++i) {
    for (int j = 0; j < kIn; ++j) {
      const double v = gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2];
      u[(i * kIn + j) * stride] = static_cast<float>(v);
    }
  }
}

// W [o][c][3][3] as U [points][OB][C16 / 16][16 input][16 output] (padding zero): per point,
// the weights the 1x1 loops take. Block by block of 16 x 16 channels, each block's points made
// together and then copied to their places (writing each kernel's values where they go
// scattered the writes over the whole packing: 7 ms for 256 x 256 channels).
template <typename T>
void pack_winograd(const float* w, int64_t o, int64_t c, int64_t c16, float* to) {
  constexpr int64_t kPoints = T::kPoints;
  constexpr int64_t kBlock = kLanes * kLanes;
  const int64_t in_blocks = c16 / kLanes, out_blocks = (o + kLanes - 1) / kLanes;
  const int64_t point_floats = out_blocks * in_blocks * kBlock;
  std::vector<float> block(static_cast<size_t>(kPoints * kBlock));
  for (int64_t ob = 0; ob < out_blocks; ++ob) {
    for (int64_t ib = 0; ib < in_blocks; ++ib) {
      std::fill(block.begin(), block.end(), 0.0f);
      for (int64_t ol = 0; ol < std::min(kLanes, o - ob * kLanes); ++ol) {
        for (int64_t il = 0; il < std::min(kLanes, c - ib * kLanes); ++il) {
          const int64_t oc = ob * kLanes + ol, ic = ib * kLanes + il;
          transform_kernel<T>(w + (oc * c + ic) * 9, block.data() + il * kLanes + ol, kBlock);
        }
      }
      for (int64_t p = 0; p < kPoints; ++p) {
        std::memcpy(to + p * point_floats + (ob * in_blocks + ib) * kBlock,
                    block.data() + p * kBlock, sizeof(float) * kBlock);
      }
    }
  }
}

// One run's geometry and buffers, in plain values.
struct WinoJob {
  const float* x = nullptr;  // [C16 / 16][H][W][16] of one image
  const float* u = nullptr;  // pack_winograd's
  const float* bias = nullptr;
  const float* residual = nullptr;  // the output's layout, of this image, or null
  float* y = nullptr;               // [OB][OH][OW][16] of this image
  int64_t c16 = 0, blocks_out = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0, tiles_w = 0;
  const PostOp* ops = nullptr;
  size_t num_ops = 0;
  const float* last_lanes = nullptr;
};

// V [points][C16 / 16][count][16] of tiles [t0, t0 + count).
template <typename T>
[[gnu::always_inline]] inline void transform_inputs(const WinoJob& j, int64_t t0, int64_t count,
                                                    float* v) {
  constexpr int64_t kOut = T::kOut, kIn = T::kIn;
  const int64_t in_blocks = j.c16 / kLanes;
  const int64_t point_stride = in_blocks * count * kLanes;
  for (int64_t cb = 0; cb < in_blocks; ++cb) {
    const float* plane = j.x + cb * j.in_h * j.in_w * kLanes;
    for (int64_t t = 0; t < count; ++t) {
      const int64_t tile = t0 + t;
      const int64_t y0 = tile / j.tiles_w * kOut - j.pad_top;
      const int64_t x0 = tile % j.tiles_w * kOut - j.pad_left;
      const bool inside = y0 >= 0 && x0 >= 0 && y0 + kIn <= j.in_h && x0 + kIn <= j.in_w;
      Floats cols[kIn][kIn];  // the tile's columns
      for (int64_t r = 0; r < kIn; ++r) {
        const int64_t iy = y0 + r;
        for (int64_t c = 0; c < kIn; ++c) {
          const int64_t ix = x0 + c;
          cols[c][r] = inside || (iy >= 0 && iy < j.in_h && ix >= 0 && ix < j.in_w)
                           ? load(plane + (iy * j.in_w + ix) * kLanes)
                           : Floats{};
        }
      }
      Floats rows[kIn][kIn];  // Bᵀ d, column by column
      for (int64_t c = 0; c < kIn; ++c) {
        Floats r[kIn];
        T::input(cols[c], r);
        for (int64_t i = 0; i < kIn; ++i) rows[i][c] = r[i];
      }
      float* to = v + (cb * count + t) * kLanes;
      for (int64_t i = 0; i < kIn; ++i) {
        Floats r[kIn];
        T::input(rows[i], r);
        for (int64_t k = 0; k < kIn; ++k) store(to + (i * kIn + k) * point_stride, r[k]);
      }
    }
  }
}

// Y of tiles [t0, t0 + count), output blocks [ob0, ob1), from M [points][OB][count][16].
template <typename T>
[[gnu::always_inline]] inline void transform_outputs(const WinoJob& j, int64_t t0, int64_t count,
                                                     int64_t ob0, int64_t ob1, const float* m) {
  constexpr int64_t kOut = T::kOut, kIn = T::kIn;
  const int64_t point_stride = j.blocks_out * count * kLanes;
  const Epilogue e{nullptr, nullptr, j.ops, j.num_ops, nullptr};
  for (int64_t ob = ob0; ob < ob1; ++ob) {
    const Floats bias = j.bias != nullptr ? load(j.bias + ob * kLanes) : Floats{};
    const bool last = ob + 1 == j.blocks_out && j.last_lanes != nullptr;
    const Floats keep = last ? load(j.last_lanes) : splat(1.0f);
    float* plane = j.y + ob * j.out_h * j.out_w * kLanes;
    const float* residual_plane =
        j.residual != nullptr ? j.residual + ob * j.out_h * j.out_w * kLanes : nullptr;
    for (int64_t t = 0; t < count; ++t) {
      const float* from = m + (ob * count + t) * kLanes;
      Floats rows[kOut][kIn];  // Aᵀ m, column by column
      for (int64_t c = 0; c < kIn; ++c) {
        Floats col[kIn];
        for (int64_t i = 0; i < kIn; ++i) col[i] = load(from + (i * kIn + c) * point_stride);
        Floats r[kOut];
        T::output(col, r);
        for (int64_t i = 0; i < kOut; ++i) rows[i][c] = r[i];
      }
      const int64_t tile = t0 + t;
      const int64_t oy0 = tile / j.tiles_w * kOut, ox0 = tile % j.tiles_w * kOut;
      for (int64_t i = 0; i < kOut && oy0 + i < j.out_h; ++i) {
        Floats r[kOut];
        T::output(rows[i], r);
        for (int64_t k = 0; k < kOut && ox0 + k < j.out_w; ++k) {
          const int64_t at = ((oy0 + i) * j.out_w + ox0 + k) * kLanes;
          const Floats res = residual_plane != nullptr ? load(residual_plane + at) : Floats{};
          Floats out = post_process(r[k] + bias, e, res);
          if (last) out = keep > splat(0.0f) ? out : splat(0.0f);
          store(plane + at, out);
        }
      }
    }
  }
}

// Tiles [t0, t0 + count) of output blocks [ob0, ob1): transform, the points' products,
// transform back. `v` and `m` hold the chunk's transformed input and products.
template <typename T>
[[gnu::always_inline]] inline void chunk_body(const WinoJob& j, int64_t t0, int64_t count,
                                              int64_t ob0, int64_t ob1, float* v, float* m) {
  transform_inputs<T>(j, t0, count, v);
  const int64_t in_blocks = j.c16 / kLanes;
  ConvJob g;
  g.c16 = j.c16;
  g.channels = j.c16;
  g.blocks_out = j.blocks_out;
  g.pixels = count;
  for (int64_t p = 0; p < T::kPoints; ++p) {
    g.x = v + p * in_blocks * count * kLanes;
    g.w = j.u + p * j.blocks_out * j.c16 * kLanes;
    g.y = m + p * j.blocks_out * count * kLanes;
    pointwise_range(g, 0, ob0, ob1, 0, count);
  }
  transform_outputs<T>(j, t0, count, ob0, ob1, m);
}

KILN_VECTOR_CLONES void run_chunk3(const WinoJob& j, int64_t t0, int64_t count, int64_t ob0,
                                   int64_t ob1, float* v, float* m) {
  chunk_body<F3>(j, t0, count, ob0, ob1, v, m);
}
KILN_VECTOR_CLONES void run_chunk4(const WinoJob& j, int64_t t0, int64_t count, int64_t ob0,
                                   int64_t ob1, float* v, float* m) {
  chunk_body<F4>(j, t0, count, ob0, ob1, v, m);
}

class WinogradConvOp final : public BlockedLoopsOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc, WinogradTile tile);

  // Each thread's transformed tiles and products, in storage shared with other ops.
  uint64_t scratchpad_bytes() const override {
    return static_cast<uint64_t>(num_threads_ * thread_floats()) * sizeof(float);
  }
  void use_scratchpad(void* data) override {
    scratch_ = static_cast<float*>(data);
    own_scratch_ = {};
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override;

 private:
  int64_t thread_floats() const {
    return points_ * (c16_ / kLanes + blocks_out_) * chunk_ * kLanes;
  }
  // The tile's chunks of tiles, packed weights and description.
  template <typename T>
  Status set_up(const OpDesc& desc, const runtime::Tensor& w, const std::vector<int64_t>& out);

  std::vector<PostOp> post_ops_;
  int64_t c16_ = 0, blocks_out_ = 0, pad_top_ = 0, pad_left_ = 0, chunk_ = kGemmTile;
  int64_t out_tile_ = F3::kOut, points_ = F3::kPoints;  // the output tile's side; its points
  int num_threads_ = 1;
  // The transformed weights outweigh the transformed tiles: threads share the output blocks
  // (each reading its share of the weights), in as few chunks of tiles as may be.
  bool weight_heavy_ = false;
  const float* weights_ = nullptr;
  float* scratch_ = nullptr;  // the shared scratchpad, or own_scratch_
  std::vector<float> own_scratch_, own_weights_, bias_, last_lanes_;
  // Staging: the input, output and residual in nChw16c where given or wanted plain.
  std::vector<float> x_blocked_, y_stage_, r_stage_;
};

Status WinogradConvOp::run(runtime::Span<const runtime::Tensor*> inputs,
                           runtime::Span<runtime::Tensor*> outputs) {
  KILN_RETURN_IF_ERROR(check_run(inputs, outputs));
  const int64_t n = in_sizes_[0], c = in_sizes_[1], h = in_sizes_[2], w = in_sizes_[3];
  const int64_t o = outputs_[0].sizes[1], oh = outputs_[0].sizes[2], ow = outputs_[0].sizes[3];
  const int64_t in_floats = c16_ * h * w, out_floats = blocks_out_ * kLanes * oh * ow;
  const float* x = static_cast<const float*>(inputs[0]->data());
  if (!native_in_) {
    x_blocked_.resize(static_cast<size_t>(n * in_floats));
    to_blocked(x, x_blocked_.data(), n, c, h * w);
    x = x_blocked_.data();
  }
  const float* residual = nullptr;
  if (has_residual_) {
    residual = static_cast<const float*>(inputs[residual_index_]->data());
    if (!native_residual_) {
      r_stage_.resize(static_cast<size_t>(n * out_floats));
      to_blocked(residual, r_stage_.data(), n, o, oh * ow);
      residual = r_stage_.data();
    }
  }
  float* y = static_cast<float*>(outputs[0]->mutable_data());
  float* y_blocked = y;
  if (!native_out_) {
    y_stage_.resize(static_cast<size_t>(n * out_floats));
    y_blocked = y_stage_.data();
  }
  if (scratch_ == nullptr) {  // no storage shared with other ops (use_scratchpad): its own
    own_scratch_.resize(scratchpad_bytes() / sizeof(float));
    scratch_ = own_scratch_.data();
  }
  WinoJob j;
  j.u = weights_;
  j.bias = bias_.empty() ? nullptr : bias_.data();
  j.c16 = c16_;
  j.blocks_out = blocks_out_;
  j.in_h = h;
  j.in_w = w;
  j.out_h = oh;
  j.out_w = ow;
  j.pad_top = pad_top_;
  j.pad_left = pad_left_;
  j.tiles_w = (ow + out_tile_ - 1) / out_tile_;
  j.ops = post_ops_.data();
  j.num_ops = post_ops_.size();
  j.last_lanes = last_lanes_.empty() ? nullptr : last_lanes_.data();
  const int64_t tiles = (oh + out_tile_ - 1) / out_tile_ * j.tiles_w;
  const int parts = std::max(1, num_threads_);
  // Threads take equal numbers of chunks of tiles (smaller ones where that makes more), unless
  // the tiles are too few for a product tile per thread and the output blocks are not: then
  // each transforms all the tiles and takes a share of the output blocks. (Splitting the one
  // block of a 64 -> 16 Conv over 40 x 40 left a thread idle: 1.5 x the time.)
  const bool by_tiles =
      parts == 1 || blocks_out_ < parts || (!weight_heavy_ && tiles >= kGemmTile * parts);
  int64_t chunks = (tiles + chunk_ - 1) / chunk_;
  if (by_tiles) chunks = (chunks + parts - 1) / parts * parts;
  const int64_t chunk = by_tiles ? (tiles + chunks - 1) / chunks : chunk_;
  const int64_t in_part = points_ * (c16_ / kLanes) * chunk_ * kLanes;
  const auto run_chunk = out_tile_ == F4::kOut ? run_chunk4 : run_chunk3;
  for (int64_t i = 0; i < n; ++i) {
    j.x = x + i * in_floats;
    j.y = y_blocked + i * out_floats;
    j.residual = residual != nullptr ? residual + i * out_floats : nullptr;
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
    for (int t = 0; t < parts; ++t) {
      float* v = scratch_ + t * thread_floats();
      float* m = v + in_part;
      const int64_t ob0 = by_tiles ? 0 : blocks_out_ * t / parts;
      const int64_t ob1 = by_tiles ? blocks_out_ : blocks_out_ * (t + 1) / parts;
      const int64_t k0 = by_tiles ? chunks * t / parts : 0;
      const int64_t k1 = by_tiles ? chunks * (t + 1) / parts : chunks;
      for (int64_t k = k0; k < k1 && ob0 < ob1; ++k) {
        const int64_t t0 = k * chunk;
        if (t0 < tiles) run_chunk(j, t0, std::min(chunk, tiles - t0), ob0, ob1, v, m);
      }
    }
  }
  if (!native_out_) from_blocked(y_stage_.data(), y, n, o, oh * ow);
  return Status();
}

template <typename T>
Status WinogradConvOp::set_up(const OpDesc& desc, const runtime::Tensor& w,
                              const std::vector<int64_t>& out) {
  out_tile_ = T::kOut;
  points_ = T::kPoints;
  const int64_t tile_bytes =
      T::kPoints * (c16_ / kLanes + blocks_out_) * kLanes * static_cast<int64_t>(sizeof(float));
  chunk_ = std::clamp(kChunkBytes / tile_bytes / kGemmTile * kGemmTile, kGemmTile, kMaxChunkTiles);
  // Each chunk reads all the transformed weights: where they outweigh the image's transformed
  // tiles (many channels, a small image), the chunks are as large as they may be.
  const int64_t tiles = (out[2] + T::kOut - 1) / T::kOut * ((out[3] + T::kOut - 1) / T::kOut);
  weight_heavy_ = T::kPoints * c16_ * blocks_out_ * kLanes > tiles * tile_bytes / 4;
  if (weight_heavy_) chunk_ = std::clamp(tiles, kGemmTile, kMaxChunkTiles);
  const int64_t c = in_sizes_[1], o = out[1];
  const auto* source = static_cast<const float*>(w.data());
  const size_t packed = static_cast<size_t>(T::kPoints * blocks_out_ * kLanes * c16_);
  const std::string layout = std::string("kiln f32 W Winograd ") + T::kName + " [" +
                             std::to_string(T::kPoints) + "][O/16][C16][16]";
  KILN_ASSIGN_OR_RETURN(
      weights_, pack_floats(
                    desc, 1, layout, packed,
                    [&](float* to) { pack_winograd<T>(source, o, c, c16_, to); }, own_weights_));
  describe_ = std::string("kiln Winograd ") + T::kName + " Conv (own loops: nChw16c, " +
              std::to_string(chunk_) + " tiles a chunk)";
  return Status();
}

Result<std::unique_ptr<CpuOp>> WinogradConvOp::create(const OpDesc& desc, WinogradTile tile) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 4));
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& ws = desc.inputs[1].sizes;
  const int residuals = num_residuals(desc);
  const bool post_ops_ok = std::all_of(desc.post_ops.begin(), desc.post_ops.end(),
                                       [](const PostOp& p) { return p.kind != PostOpKind::Gelu; });
  if (desc.op != "Conv" || desc.activation_layout != ActivationLayout::Blocked || x.size() != 4 ||
      ws.size() != 4 || ws[2] != 3 || ws[3] != 3 || x[1] < kLanes || !all_float(desc) ||
      !post_ops_ok || residuals > 1) {
    return error(desc, Error::NotSupported,
                 "not a blocked 2-D f32 3x3 Conv of 16 or more input channels with the loops' "
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
  if (group != 1 || !all(dilations, 0) || !all(strides, 1)) {
    return error(desc, Error::NotSupported, "groups, dilations or strides");
  }
  const int64_t c = x[1], o = ws[0];
  auto op = std::make_unique<WinogradConvOp>();
  op->in_sizes_ = x;
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
  op->c16_ = (c + kLanes - 1) / kLanes * kLanes;
  op->blocks_out_ = (o + kLanes - 1) / kLanes;
  op->pad_top_ = pad_begin[0];
  op->pad_left_ = pad_begin[1];
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
  if (tile == WinogradTile::Auto) tile = choose_tile(out[2], out[3]);
  KILN_RETURN_IF_ERROR(tile == WinogradTile::F4x4 ? op->set_up<F4>(desc, *w, out)
                                                  : op->set_up<F3>(desc, *w, out));
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_winograd_conv(const OpDesc& desc, WinogradTile tile) {
  return WinogradConvOp::create(desc, tile);
}

}  // namespace kiln::engine::cpu::dnnl_impl
