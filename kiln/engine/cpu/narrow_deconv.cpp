// ConvTranspose whose kernel equals its strides into few values per input pixel (M output
// channels x kH x kW at most 16: a text detector's probability map, 16 -> 1 channel, 2x2 of
// stride 2, then a sigmoid) on kiln's own loops. oneDNN's matmul of such patches
// ([pixels, C] x [C, M kH kW], dnnl_deconv_patches.cpp) fills a few of its 16 lanes, and the
// scatter into NCHW then writes one float at a time: the detector's head took 0.37 ms at
// 160 x 160 (1 thread), 5 % of the model. Here the lanes hold 16 input pixels of one row: each
// channel's values of them (read from NCHW planes, or transposed from the pixel rows of the
// producer's nhwc or one-block nChw16c layout, read natively), each value of the patch a sum of
// weights times those vectors, then the bias and the loops' post-ops, and the patch's rows
// written into the NCHW output (pairs of vectors interleaved when kW is 2).

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/dnnl_staged.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/vector_math.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;
using namespace vec;  // NOLINT: the vector helpers of the loops below

constexpr int64_t kMaxValues = 16;     // M x kH x kW: the values of one input pixel's patch
constexpr int64_t kMaxChannels = 256;  // a tile's channel vectors: 16 KiB, in L1
// Below this many multiply-adds the patches op takes it (small_ops.cpp's bound).
constexpr double kMinMacs = 1 << 18;
constexpr int kGroup = 4;  // patch values summed together (two chains each)

struct Geometry {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t out_c = 0, kernel_h = 0, kernel_w = 0;
  int64_t values() const { return out_c * kernel_h * kernel_w; }
};

// The input of one run: NCHW planes, or (rows) each pixel's channels first in a row of `row`
// floats, pixel after pixel.
struct Source {
  const float* x = nullptr;
  bool rows = false;
  int64_t row = 0;
};

// Swaps the off-diagonal D x D blocks of rows a and b of a 16 x 16 matrix: after D = 8, 4, 2
// and 1 over the right pairs of rows, the matrix is transposed.
template <int D, int... J>
[[gnu::always_inline]] inline void swap_blocks(Floats& a, Floats& b,
                                               std::integer_sequence<int, J...> /*lanes*/) {
  const Floats lo = __builtin_shufflevector(a, b, ((J & D) == 0 ? J : kLanes + J - D)...);
  const Floats hi = __builtin_shufflevector(a, b, ((J & D) == 0 ? J + D : kLanes + J)...);
  a = lo;
  b = hi;
}

// Channels [c0, c0 + 16) of pixel j of the tile (zero past `count` pixels and past the row's
// `channels`).
[[gnu::always_inline]] inline Floats pixel_chunk(const float* at, int64_t row, int64_t j,
                                                 int64_t count, int64_t c0, int64_t channels) {
  if (j >= count) return Floats{};
  if (c0 + kLanes <= row) return load(at + j * row + c0);
  float part[kLanes] = {};
  std::memcpy(part, at + j * row + c0,
              sizeof(float) * static_cast<size_t>(std::min(kLanes, channels - c0)));
  return load(part);
}

// cols[c * 16 + j] = channel c of pixel j of the tile, for the tile's `count` pixels from `at`
// (pixel rows `row` floats apart); lanes past `count` are zero. The 16 x 16 blocks are
// transposed in registers (named: GCC at -O2 keeps an array of vectors in memory).
[[gnu::always_inline]] inline void transpose_rows(const float* at, int64_t row, int64_t count,
                                                  int64_t channels, float* cols) {
  constexpr auto kSeq = std::make_integer_sequence<int, kLanes>();
#define KILN_ND_ROWS(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define KILN_ND_LOAD(j) Floats r##j = pixel_chunk(at, row, j, count, c0, channels);
#define KILN_SWAP(d, a, b) swap_blocks<d>(r##a, r##b, kSeq)
#define KILN_ND_STORE(j) \
  if (c0 + (j) < channels) store(cols + (c0 + (j)) * kLanes, r##j);
  for (int64_t c0 = 0; c0 < channels; c0 += kLanes) {
    KILN_ND_ROWS(KILN_ND_LOAD)
    // The pairs of rows of each stage, D = 8, 4, 2 and 1.
    // clang-format off
    KILN_SWAP(8, 0, 8); KILN_SWAP(8, 1, 9); KILN_SWAP(8, 2, 10); KILN_SWAP(8, 3, 11);
    KILN_SWAP(8, 4, 12); KILN_SWAP(8, 5, 13); KILN_SWAP(8, 6, 14); KILN_SWAP(8, 7, 15);
    KILN_SWAP(4, 0, 4); KILN_SWAP(4, 1, 5); KILN_SWAP(4, 2, 6); KILN_SWAP(4, 3, 7);
    KILN_SWAP(4, 8, 12); KILN_SWAP(4, 9, 13); KILN_SWAP(4, 10, 14); KILN_SWAP(4, 11, 15);
    KILN_SWAP(2, 0, 2); KILN_SWAP(2, 1, 3); KILN_SWAP(2, 4, 6); KILN_SWAP(2, 5, 7);
    KILN_SWAP(2, 8, 10); KILN_SWAP(2, 9, 11); KILN_SWAP(2, 12, 14); KILN_SWAP(2, 13, 15);
    KILN_SWAP(1, 0, 1); KILN_SWAP(1, 2, 3); KILN_SWAP(1, 4, 5); KILN_SWAP(1, 6, 7);
    KILN_SWAP(1, 8, 9); KILN_SWAP(1, 10, 11); KILN_SWAP(1, 12, 13); KILN_SWAP(1, 14, 15);
    // clang-format on
    KILN_ND_ROWS(KILN_ND_STORE)
  }
#undef KILN_ND_ROWS
#undef KILN_ND_LOAD
#undef KILN_SWAP
#undef KILN_ND_STORE
}

// Patch value q of the tile (of output channel q / plane): bias, post-ops, into vals[q * 16 ...].
// (No lambdas: a vector passed by value to one would cross a call between code built for
// different targets.)
[[gnu::always_inline]] inline void put_value(Floats sum, int64_t q, int64_t plane,
                                             const float* bias, const Epilogue& e, float* vals) {
  const Floats b = splat(bias != nullptr ? bias[q / plane] : 0.0f);
  store(vals + q * kLanes, post_process(sum + b, e, Floats{}));
}

// The tile's patch values [q0, q0 + G): sums over the channels (`col`, vectors `stride` floats
// apart) of W [C, values] times them, then bias and post-ops, into vals[q * 16 ...].
template <int G>
[[gnu::always_inline]] inline void patch_values(const float* col, int64_t stride, const float* w,
                                                const float* bias, const Geometry& g,
                                                const Epilogue& e, int64_t q0, float* vals) {
  const int64_t q_count = g.values();
  const int64_t plane = g.kernel_h * g.kernel_w;
  Floats a0{}, a1{}, a2{}, a3{}, b0{}, b1{}, b2{}, b3{};  // even and odd channels
  int64_t c = 0;
  for (; c + 1 < g.channels; c += 2) {
    const Floats x = load(col + c * stride), z = load(col + (c + 1) * stride);
    const float* wc = w + c * q_count + q0;
    const float* wz = wc + q_count;
    a0 += wc[0] * x;
    b0 += wz[0] * z;
    if (G > 1) a1 += wc[1] * x, b1 += wz[1] * z;
    if (G > 2) a2 += wc[2] * x, b2 += wz[2] * z;
    if (G > 3) a3 += wc[3] * x, b3 += wz[3] * z;
  }
  if (c < g.channels) {
    const Floats x = load(col + c * stride);
    const float* wc = w + c * q_count + q0;
    a0 += wc[0] * x;
    if (G > 1) a1 += wc[1] * x;
    if (G > 2) a2 += wc[2] * x;
    if (G > 3) a3 += wc[3] * x;
  }
  put_value(a0 + b0, q0, plane, bias, e, vals);
  if (G > 1) put_value(a1 + b1, q0 + 1, plane, bias, e, vals);
  if (G > 2) put_value(a2 + b2, q0 + 2, plane, bias, e, vals);
  if (G > 3) put_value(a3 + b3, q0 + 3, plane, bias, e, vals);
}

// Writes the tile's patches (vals [values][16], value q = (m kH + a) kW + b) into the NCHW
// output of input row h of image n, pixels [w0, w0 + count).
[[gnu::always_inline]] inline void write_patches(const float* vals, const Geometry& g, int64_t n,
                                                 int64_t h, int64_t w0, int64_t count, float* y) {
  const int64_t out_h = g.height * g.kernel_h, out_w = g.width * g.kernel_w;
  for (int64_t m = 0; m < g.out_c; ++m) {
    for (int64_t a = 0; a < g.kernel_h; ++a) {
      float* to = y + ((n * g.out_c + m) * out_h + h * g.kernel_h + a) * out_w + w0 * g.kernel_w;
      const float* from = vals + (m * g.kernel_h + a) * g.kernel_w * kLanes;
      if (g.kernel_w == 2 && count == kLanes) {
        const Floats even = load(from), odd = load(from + kLanes);
        store(to, __builtin_shufflevector(even, odd, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6,
                                          22, 7, 23));
        store(to + kLanes, __builtin_shufflevector(even, odd, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28,
                                                   13, 29, 14, 30, 15, 31));
        continue;
      }
      for (int64_t j = 0; j < count; ++j) {
        for (int64_t b = 0; b < g.kernel_w; ++b) to[j * g.kernel_w + b] = from[b * kLanes + j];
      }
    }
  }
}

// Input rows [begin, end) (image-major) of the run: every tile of 16 pixels of each row.
// `cols` holds one tile's channel vectors (channels x 16 floats), `vals` its patch values.
KILN_VECTOR_CLONES void deconv_rows(const Source& s, const float* w, const float* bias,
                                    const Geometry& g, const Epilogue& e, int64_t begin,
                                    int64_t end, float* cols, float* vals, float* y) {
  const int64_t plane = g.height * g.width;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / g.height, h = r % g.height;
    for (int64_t w0 = 0; w0 < g.width; w0 += kLanes) {
      const int64_t count = std::min<int64_t>(kLanes, g.width - w0);
      const float* col = cols;
      int64_t stride = kLanes;
      if (s.rows) {
        transpose_rows(s.x + (r * g.width + w0) * s.row, s.row, count, g.channels, cols);
      } else if (count == kLanes) {
        col = s.x + (n * g.channels * g.height + h) * g.width + w0;
        stride = plane;
      } else {
        for (int64_t c = 0; c < g.channels; ++c) {
          float* to = cols + c * kLanes;
          std::memcpy(to, s.x + ((n * g.channels + c) * g.height + h) * g.width + w0,
                      sizeof(float) * static_cast<size_t>(count));
          std::fill(to + count, to + kLanes, 0.0f);
        }
      }
      for (int64_t q0 = 0; q0 < g.values(); q0 += kGroup) {
        switch (std::min<int64_t>(kGroup, g.values() - q0)) {
          case 4:
            patch_values<4>(col, stride, w, bias, g, e, q0, vals);
            break;
          case 3:
            patch_values<3>(col, stride, w, bias, g, e, q0, vals);
            break;
          case 2:
            patch_values<2>(col, stride, w, bias, g, e, q0, vals);
            break;
          default:
            patch_values<1>(col, stride, w, bias, g, e, q0, vals);
            break;
        }
      }
      write_patches(vals, g, n, h, w0, count, y);
    }
  }
}

class NarrowDeconvOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    auto not_here = [&](const std::string& why) { return error(desc, Error::NotSupported, why); };
    if (desc.inputs.size() < 2 || desc.inputs.size() > 3 || num_residuals(desc) != 0 ||
        !all_float(desc) || !supported_post_ops(desc)) {
      return not_here("not f32, a residual, or a post-op the loops lack");
    }
    const std::vector<int64_t>& x = desc.inputs[0].sizes;
    const std::vector<int64_t>& w = desc.inputs[1].sizes;
    if (x.size() != 4 || w.size() != 4 || x[1] != w[0] || input_constant(desc, 1) == nullptr) {
      return not_here("not a 2-D ConvTranspose of a constant W");
    }
    for (int64_t size : x) {
      if (size <= 0) return not_here("an empty input");
    }
    KILN_ASSIGN_OR_RETURN(bool patches, kernel_equals_strides(desc));
    if (!patches) return not_here("a kernel other than its strides, pads, dilations or groups");
    auto op = std::make_unique<NarrowDeconvOp>();
    Geometry& g = op->geometry_;
    g.batch = x[0], g.channels = x[1], g.height = x[2], g.width = x[3];
    g.out_c = w[1], g.kernel_h = w[2], g.kernel_w = w[3];
    const double macs = static_cast<double>(g.batch * g.height * g.width) *
                        static_cast<double>(g.channels * g.values());
    if (g.out_c <= 0 || g.values() > kMaxValues || g.channels > kMaxChannels || macs < kMinMacs) {
      return not_here("more than 16 values a pixel, more than 256 channels, or little work");
    }
    KILN_ASSIGN_OR_RETURN(op->bias_, column_bias(desc, 2, g.out_c, 1.0f));
    const auto* source = input_constant(desc, 1)->data_ptr<float>();
    const size_t count = static_cast<size_t>(g.channels * g.values());
    // ONNX's W [C, M, kH, kW] is already [C, values] in the loops' order.
    KILN_ASSIGN_OR_RETURN(
        op->weights_,
        pack_floats(
            desc, 1, "kiln f32 W [C, M kH kW]", count,
            [&](float* to) { std::memcpy(to, source, count * sizeof(float)); }, op->own_weights_));
    if (auto hint = input_layout_hint(desc, 0, memory::dims{x[0], x[1], x[2], x[3]})) {
      auto rows = pixel_rows(*hint);
      const int64_t row = rows ? rows->data.format_desc.blocking.strides[1] : 0;
      if (rows && rows->data.format_desc.blocking.strides[0] == g.height * g.width * row) {
        op->hint_ = native_layout(*hint);  // images one after another, pixel rows in each
        op->row_ = row;
      }
    }
    op->num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
    op->post_ops_ = desc.post_ops;
    op->outputs_ = {TensorDesc{runtime::ScalarType::Float32,
                               {g.batch, g.out_c, g.height * g.kernel_h, g.width * g.kernel_w}}};
    op->cols_.assign(static_cast<size_t>(op->num_threads_ * g.channels * kLanes), 0.0f);
    op->vals_.assign(static_cast<size_t>(op->num_threads_ * kMaxValues * kLanes), 0.0f);
    op->describe_ = "kiln narrow ConvTranspose (own loops: input pixels in vectors, " +
                    std::to_string(g.values()) + " value(s) a pixel)";
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override {
    return describe_ + (rows_ ? " src: pixel rows" : " src: nchw");
  }
  std::string provider() const override { return "kiln"; }

  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index == 0 && hint_) return hint_;
    return std::nullopt;
  }
  Status use_native_input(size_t index) override {
    if (index != 0 || !hint_) return CpuOp::use_native_input(index);
    rows_ = true;
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op 'ConvTranspose' (" + describe_ + "): expected input 0 and one output");
    }
    const Geometry& g = geometry_;
    const Source s{static_cast<const float*>(inputs[0]->data()), rows_, row_};
    auto* y = static_cast<float*>(outputs[0]->mutable_data());
    const Epilogue e{nullptr, nullptr, post_ops_.data(), post_ops_.size()};
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    const int64_t rows = g.batch * g.height;
    const int parts = static_cast<int>(std::min<int64_t>(num_threads_, rows));
    if (parts <= 1) {
      deconv_rows(s, weights_, bias, g, e, 0, rows, cols_.data(), vals_.data(), y);
      return Status();
    }
    const int64_t col_floats = g.channels * kLanes, val_floats = kMaxValues * kLanes;
#pragma omp parallel for num_threads(parts) schedule(static)
    for (int t = 0; t < parts; ++t) {
      deconv_rows(s, weights_, bias, g, e, rows * t / parts, rows * (t + 1) / parts,
                  cols_.data() + t * col_floats, vals_.data() + t * val_floats, y);
    }
    return Status();
  }

 private:
  Geometry geometry_{};
  std::optional<NativeLayout> hint_;  ///< The producer's pixel-row layout, when it has one.
  bool rows_ = false;                 ///< Input handed over in `hint_`.
  int64_t row_ = 0;                   ///< Floats from one pixel's row to the next's, in `hint_`.
  int num_threads_ = 1;
  std::string describe_;
  std::vector<TensorDesc> outputs_;
  std::vector<PostOp> post_ops_;
  const float* weights_ = nullptr;
  std::vector<float> own_weights_, bias_, cols_, vals_;
};

}  // namespace

Result<std::unique_ptr<CpuOp>> create_narrow_deconv(const OpDesc& desc) {
  return NarrowDeconvOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
