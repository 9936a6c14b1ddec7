// 2-D Convs of few output channels (at most kMaxChannels: an image-to-image network's last
// layer to RGB or to one map) on loops of kiln's own. oneDNN's kernels vectorize over output
// channels in blocks of 16, so such a Conv fills 3 of 16 lanes: a fast-neural-style network's
// 9x9 32 -> 3 output layer ran at 36 GFLOP/s, a third of the model's time. These loops
// vectorize over output pixels instead: each output row is computed in tiles of up to four
// vectors of 16 pixels for up to four channels at once, each tap's input vectors loaded once
// for all the tile's channels, from a zero-padded copy of the image made at each run (so the
// inner loops have no bounds to test). Stride and dilation 1, one group, constant W and B,
// the loops' post-ops; f32 NCHW in and out.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/vector_math.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using namespace vec;  // NOLINT: the vector helpers of the loops below

constexpr int64_t kMaxChannels = 8;
// Below this many multiply-adds the small loops take the Conv (small_ops.cpp: their bound).
constexpr double kMinMacs = 1 << 18;
// The padded copy of an image is the op's own memory: above this size (a 64-channel map of
// 360 x 360) oneDNN's kernels, which need none, take the Conv.
constexpr double kMaxPaddedBytes = 32.0 * (1 << 20);
constexpr int kTileChannels = 4;
constexpr int kTileVectors = 4;

// The geometry of one run, in floats.
struct Geometry {
  int64_t channels, out_c, kernel_h, kernel_w;
  int64_t out_h, out_w;
  int64_t padded_h, padded_w;  // the padded copy's plane: out + kernel - 1, rows of whole vectors
};

// Output row `oh` of channels [o0, o0 + G) over vectors [v0, v0 + V) of the row: sums of
// weights (`w`, [C, KH, KW, O]) times the padded image's windows, then biases and post-ops.
// `row` receives whole vectors (the caller keeps the valid pixels).
// One channel's sums of the tile: weight times each input vector.
#define KILN_NARROW_ADD(weight, a0, a1, a2, a3) \
  do {                                          \
    const float w_ = (weight);                  \
    a0 += w_ * x0;                              \
    if (V > 1) a1 += w_ * x1;                   \
    if (V > 2) a2 += w_ * x2;                   \
    if (V > 3) a3 += w_ * x3;                   \
  } while (0)

// Channel `o` of the tile: bias, post-ops, stored.
#define KILN_NARROW_PUT(o, a0, a1, a2, a3)                                   \
  do {                                                                       \
    const Floats b_ = splat(bias != nullptr ? bias[o0 + (o)] : 0.0f);        \
    float* out_ = row + (o)*row_stride + v0 * kLanes;                        \
    store(out_, post_process(a0 + b_, e, Floats{}));                         \
    if (V > 1) store(out_ + kLanes, post_process(a1 + b_, e, Floats{}));     \
    if (V > 2) store(out_ + 2 * kLanes, post_process(a2 + b_, e, Floats{})); \
    if (V > 3) store(out_ + 3 * kLanes, post_process(a3 + b_, e, Floats{})); \
  } while (0)

// Output row `oh` of channels [o0, o0 + G) over vectors [v0, v0 + V) of the row: sums of
// weights (`w`, [C, KH, KW, O]) times the padded image's windows, then biases and post-ops.
// `row` receives whole vectors (the caller keeps the valid pixels). No lambdas: a vector
// passed by value to one would cross a call between code built for different targets.
template <int G, int V>
[[gnu::always_inline]] inline void tile(const float* padded, const float* w, const Geometry& g,
                                        int64_t oh, int64_t o0, int64_t v0, const float* bias,
                                        const Epilogue& e, float* row, int64_t row_stride) {
  // Named sums (GCC at -O2 keeps arrays of vectors in memory); unused ones fold away.
  Floats s00{}, s01{}, s02{}, s03{}, s10{}, s11{}, s12{}, s13{};
  Floats s20{}, s21{}, s22{}, s23{}, s30{}, s31{}, s32{}, s33{};
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const float* in = padded + (c * g.padded_h + oh + kh) * g.padded_w + v0 * kLanes;
      const float* wk = w + ((c * g.kernel_h + kh) * g.kernel_w) * g.out_c + o0;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw, wk += g.out_c) {
        const Floats x0 = load(in + kw);
        const Floats x1 = V > 1 ? load(in + kw + kLanes) : Floats{};
        const Floats x2 = V > 2 ? load(in + kw + 2 * kLanes) : Floats{};
        const Floats x3 = V > 3 ? load(in + kw + 3 * kLanes) : Floats{};
        KILN_NARROW_ADD(wk[0], s00, s01, s02, s03);
        if (G > 1) KILN_NARROW_ADD(wk[1], s10, s11, s12, s13);
        if (G > 2) KILN_NARROW_ADD(wk[2], s20, s21, s22, s23);
        if (G > 3) KILN_NARROW_ADD(wk[3], s30, s31, s32, s33);
      }
    }
  }
  KILN_NARROW_PUT(0, s00, s01, s02, s03);
  if (G > 1) KILN_NARROW_PUT(1, s10, s11, s12, s13);
  if (G > 2) KILN_NARROW_PUT(2, s20, s21, s22, s23);
  if (G > 3) KILN_NARROW_PUT(3, s30, s31, s32, s33);
}

#undef KILN_NARROW_ADD
#undef KILN_NARROW_PUT

template <int G>
[[gnu::always_inline]] inline void tiles_of_row(const float* padded, const float* w,
                                                const Geometry& g, int64_t oh, int64_t o0,
                                                const float* bias, const Epilogue& e, float* row,
                                                int64_t row_stride) {
  const int64_t vectors = g.padded_w - (g.kernel_w - 1);  // whole vectors of the row, in floats
  const int64_t count = vectors / kLanes;
  int64_t v = 0;
  for (; v + kTileVectors <= count; v += kTileVectors) {
    tile<G, kTileVectors>(padded, w, g, oh, o0, v, bias, e, row, row_stride);
  }
  switch (count - v) {
    case 3:
      tile<G, 3>(padded, w, g, oh, o0, v, bias, e, row, row_stride);
      break;
    case 2:
      tile<G, 2>(padded, w, g, oh, o0, v, bias, e, row, row_stride);
      break;
    case 1:
      tile<G, 1>(padded, w, g, oh, o0, v, bias, e, row, row_stride);
      break;
    default:
      break;
  }
}

// Output rows [begin, end) of one image: every channel group, into `rows` (out_c rows of whole
// vectors), then the valid pixels into `y` ([O, OH, OW]).
KILN_VECTOR_CLONES void conv_rows(const float* padded, const float* w, const Geometry& g,
                                  int64_t begin, int64_t end, const float* bias, const Epilogue& e,
                                  float* rows, float* y) {
  const int64_t row_stride = g.padded_w - (g.kernel_w - 1);
  for (int64_t oh = begin; oh < end; ++oh) {
    for (int64_t o0 = 0; o0 < g.out_c; o0 += kTileChannels) {
      switch (std::min<int64_t>(kTileChannels, g.out_c - o0)) {
        case 4:
          tiles_of_row<4>(padded, w, g, oh, o0, bias, e, rows + o0 * row_stride, row_stride);
          break;
        case 3:
          tiles_of_row<3>(padded, w, g, oh, o0, bias, e, rows + o0 * row_stride, row_stride);
          break;
        case 2:
          tiles_of_row<2>(padded, w, g, oh, o0, bias, e, rows + o0 * row_stride, row_stride);
          break;
        default:
          tiles_of_row<1>(padded, w, g, oh, o0, bias, e, rows + o0 * row_stride, row_stride);
          break;
      }
    }
    for (int64_t o = 0; o < g.out_c; ++o) {
      std::memcpy(y + (o * g.out_h + oh) * g.out_w, rows + o * row_stride,
                  sizeof(float) * static_cast<size_t>(g.out_w));
    }
  }
}

class NarrowConvOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3));
    const std::vector<int64_t>& x = desc.inputs[0].sizes;
    const std::vector<int64_t>& ws = desc.inputs[1].sizes;
    if (desc.op != "Conv" || x.size() != 4 || ws.size() != 4 || ws[0] > kMaxChannels ||
        !all_float(desc) || !supported_post_ops(desc) || num_residuals(desc) != 0) {
      return error(desc, Error::NotSupported,
                   "not a 2-D f32 Conv of at most 8 output channels with the loops' post-ops");
    }
    const runtime::Tensor* w = input_constant(desc, 1);
    if (w == nullptr) return error(desc, Error::NotSupported, "W is not constant");
    memory_dims strides, dilations, pad_begin, pad_end;
    int64_t group = 1;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out,
                          conv_geometry(desc, strides, dilations, pad_begin, pad_end, group));
    auto ones = [](const memory_dims& d) {
      return std::all_of(d.begin(), d.end(), [](int64_t v) { return v == 1; });
    };
    auto zeros = [](const memory_dims& d) {
      return std::all_of(d.begin(), d.end(), [](int64_t v) { return v == 0; });
    };
    if (group != 1 || !ones(strides) || !zeros(dilations)) {
      return error(desc, Error::NotSupported, "groups, strides or dilations");
    }
    auto op = std::make_unique<NarrowConvOp>();
    Geometry& g = op->geometry_;
    g.channels = x[1], g.out_c = ws[0], g.kernel_h = ws[2], g.kernel_w = ws[3];
    g.out_h = out[2], g.out_w = out[3];
    const double macs = static_cast<double>(x[0]) * static_cast<double>(g.out_c * g.channels) *
                        static_cast<double>(g.kernel_h * g.kernel_w) *
                        static_cast<double>(g.out_h * g.out_w);
    if (macs < kMinMacs || g.out_h <= 0 || g.out_w <= 0) {
      return error(desc, Error::NotSupported, "less work than the narrow loops are for");
    }
    const int64_t whole = (g.out_w + kLanes - 1) / kLanes * kLanes;
    g.padded_h = g.out_h + g.kernel_h - 1;
    g.padded_w = whole + g.kernel_w - 1;
    if (static_cast<double>(g.channels * g.padded_h * g.padded_w) * sizeof(float) >
        kMaxPaddedBytes) {
      return error(desc, Error::NotSupported, "an image too large to pad a copy of");
    }
    op->batch_ = x[0];
    op->in_h_ = x[2], op->in_w_ = x[3];
    op->pad_h_ = pad_begin[0], op->pad_w_ = pad_begin[1];
    op->num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
    op->post_ops_ = desc.post_ops;
    op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
    KILN_ASSIGN_OR_RETURN(op->bias_, column_bias(desc, 2, g.out_c, 1.0f));
    // W [O, C, KH, KW] as [C, KH, KW, O]: one tap's weights of every channel side by side.
    const auto* source = static_cast<const float*>(w->data());
    const int64_t taps = g.channels * g.kernel_h * g.kernel_w;
    KILN_ASSIGN_OR_RETURN(
        op->weights_, pack_floats(
                          desc, 1, "kiln f32 W [C, KH, KW, O]", static_cast<size_t>(taps * g.out_c),
                          [&](float* to) {
                            for (int64_t o = 0; o < g.out_c; ++o) {
                              for (int64_t t = 0; t < taps; ++t) {
                                to[t * g.out_c + o] = source[o * taps + t];
                              }
                            }
                          },
                          op->own_weights_));
    op->padded_.assign(static_cast<size_t>(g.channels * g.padded_h * g.padded_w), 0.0f);
    op->rows_.assign(
        static_cast<size_t>(op->num_threads_ * g.out_c * (g.padded_w - (g.kernel_w - 1))), 0.0f);
    op->describe_ = "kiln narrow Conv (own loops: output pixels in vectors, " +
                    std::to_string(g.out_c) + " channel(s))";
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op 'Conv' (" + describe_ + "): expected input 0 and one output");
    }
    const Geometry& g = geometry_;
    const auto* x = static_cast<const float*>(inputs[0]->data());
    auto* y = static_cast<float*>(outputs[0]->mutable_data());
    const Epilogue e{nullptr, nullptr, post_ops_.data(), post_ops_.size()};
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    const int64_t row_floats = g.out_c * (g.padded_w - (g.kernel_w - 1));
    const int parts = static_cast<int>(std::min<int64_t>(num_threads_, g.out_h));
    for (int64_t n = 0; n < batch_; ++n) {
      pad(x + n * g.channels * in_h_ * in_w_);
      float* image = y + n * g.out_c * g.out_h * g.out_w;
      if (parts <= 1) {
        conv_rows(padded_.data(), weights_, g, 0, g.out_h, bias, e, rows_.data(), image);
        continue;
      }
#pragma omp parallel for num_threads(parts) schedule(static)
      for (int t = 0; t < parts; ++t) {
        conv_rows(padded_.data(), weights_, g, g.out_h * t / parts, g.out_h * (t + 1) / parts, bias,
                  e, rows_.data() + t * row_floats, image);
      }
    }
    return Status();
  }

 private:
  using memory_dims = dnnl::memory::dims;

  // Copies one image into the padded planes, whose borders stay zero.
  void pad(const float* image) {
    const Geometry& g = geometry_;
    for (int64_t c = 0; c < g.channels; ++c) {
      for (int64_t ih = 0; ih < in_h_; ++ih) {
        const int64_t ph = ih + pad_h_;
        if (ph < 0 || ph >= g.padded_h) continue;  // rows the Conv never reads (negative pads)
        const int64_t lo = std::max<int64_t>(0, -pad_w_);
        const int64_t hi = std::min<int64_t>(in_w_, g.padded_w - pad_w_);
        if (hi <= lo) continue;
        std::memcpy(padded_.data() + (c * g.padded_h + ph) * g.padded_w + lo + pad_w_,
                    image + (c * in_h_ + ih) * in_w_ + lo,
                    sizeof(float) * static_cast<size_t>(hi - lo));
      }
    }
  }

  Geometry geometry_{};
  int64_t batch_ = 0, in_h_ = 0, in_w_ = 0, pad_h_ = 0, pad_w_ = 0;
  int num_threads_ = 1;
  std::string describe_;
  std::vector<TensorDesc> outputs_;
  std::vector<PostOp> post_ops_;
  const float* weights_ = nullptr;
  std::vector<float> own_weights_, bias_, padded_, rows_;
};

}  // namespace

Result<std::unique_ptr<CpuOp>> create_narrow_conv(const OpDesc& desc) {
  return NarrowConvOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
