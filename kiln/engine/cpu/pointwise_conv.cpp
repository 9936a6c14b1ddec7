// 1x1 Convs (no pads, one group) among blocked Convs on loops of kiln's own, compiled
// ahead of time. oneDNN generates the code of each of its 1x1 kernels when the primitive is
// created, 0.1-0.5 ms apiece: MobileNet-V2's 34 pointwise Convs took 3.9 ms of a warm load of
// about 10, SqueezeNet's 3.7 of 8-10, more than everything else in the load together. These
// loops read and write nChw16c, as oneDNN's kernel does there, so their neighbours hand values
// over unconverted: each output vector is 16 output channels of one pixel, a tile is up to
// kTilePixels pixels by two such vectors, and each input channel's value of a pixel is
// broadcast against the weights of those 32 output channels. Biases, the loops' post-ops and
// one residual (in the output's layout) are applied before the store. A strided Conv's input
// pixels are first copied one after another (a ResNet's downsampling projections).

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

constexpr int kTilePixels = 12;
// Larger outputs go to oneDNN's kernel, which writes them faster: MobileNet-V2's 16 -> 96 at
// 112 x 112 (4.8 MB) took 0.37 ms on these loops against 0.22 (`kiln bench --profile`).
constexpr double kMaxOutputBytes = 2 << 20;

// One run's work, in plain values.
struct Job {
  const float* x = nullptr;         // [N][C16 / 16][HW][16]
  const float* w = nullptr;         // [OB][C16][16]: one input channel's 16 weights together
  const float* bias = nullptr;      // [OB x 16], or null
  const float* residual = nullptr;  // the output's layout, or null
  float* y = nullptr;               // [N][OB][HW][16]
  int64_t channels = 0, c16 = 0, blocks_out = 0, pixels = 0;
  const PostOp* ops = nullptr;
  size_t num_ops = 0;
  // 1 for each lane of the last output block that is a channel, 0 for its padding (which the
  // loops write zero, whatever the post-ops make of a zero sum).
  const float* last_lanes = nullptr;
};

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
#define KILN_PW_EACH(...)                                                              \
  KILN_PW_ON(0, __VA_ARGS__)                                                           \
  KILN_PW_ON(1, __VA_ARGS__)                                                           \
  KILN_PW_ON(2, __VA_ARGS__)                                                           \
  KILN_PW_ON(3, __VA_ARGS__)                                                           \
  KILN_PW_ON(4, __VA_ARGS__) KILN_PW_ON(5, __VA_ARGS__) KILN_PW_ON(6, __VA_ARGS__)     \
      KILN_PW_ON(7, __VA_ARGS__) KILN_PW_ON(8, __VA_ARGS__) KILN_PW_ON(9, __VA_ARGS__) \
          KILN_PW_ON(10, __VA_ARGS__) KILN_PW_ON(11, __VA_ARGS__)

// Output blocks [ob, ob + kBlocks) of pixels [p0, p0 + kP) of image n.
template <int kP, int kBlocks>
[[gnu::always_inline]] inline void pointwise_tile(const Job& j, int64_t n, int64_t ob, int64_t p0) {
  static_assert(kP <= kTilePixels && kBlocks >= 1 && kBlocks <= 2);
#define KILN_PW_DECLARE(p) Floats a##p = {}, b##p = {};
  KILN_PW_PIXELS(KILN_PW_DECLARE)
#undef KILN_PW_DECLARE
  const int64_t in_blocks = j.c16 / kLanes;
  const float* image = j.x + n * in_blocks * j.pixels * kLanes + p0 * kLanes;
  const float* w0 = j.w + ob * j.c16 * kLanes;
  const float* w1 = w0 + j.c16 * kLanes;
  // The input channels that are there: the last block's padding lanes are skipped.
  for (int64_t ib = 0; ib < in_blocks; ++ib) {
    const float* xb = image + ib * j.pixels * kLanes;
    const float* wb0 = w0 + ib * kLanes * kLanes;
    const float* wb1 = w1 + ib * kLanes * kLanes;
    const int64_t lanes = std::min<int64_t>(kLanes, j.channels - ib * kLanes);
    for (int64_t l = 0; l < lanes; ++l) {
      const Floats v0 = load(wb0 + l * kLanes);
      Floats v1{};
      if constexpr (kBlocks > 1) v1 = load(wb1 + l * kLanes);
        // (A scalar times a vector: the compiler broadcasts it from memory for both FMAs.)
#define KILN_PW_FMA(p)                         \
  if constexpr (kP > (p)) {                    \
    const float s = xb[(p)*kLanes + l];        \
    a##p += v0 * s;                            \
    if constexpr (kBlocks > 1) b##p += v1 * s; \
  }
      KILN_PW_PIXELS(KILN_PW_FMA)
#undef KILN_PW_FMA
    }
  }
  // Biases, then the post-ops in order, each over the whole tile.
  const int64_t at0 = ((n * j.blocks_out + ob) * j.pixels + p0) * kLanes;
  const int64_t block_floats = j.pixels * kLanes;
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

// The tile of `count` (1 to kTilePixels) pixels from p of blocks [ob, ob + kBlocks).
template <int kBlocks>
[[gnu::always_inline]] inline void pointwise_tiles(const Job& j, int64_t n, int64_t ob, int64_t p,
                                                   int64_t count) {
  switch (count) {
#define KILN_PW_COUNT(c)                     \
  case c:                                    \
    pointwise_tile<c, kBlocks>(j, n, ob, p); \
    break;
    KILN_PW_COUNT(1)
    KILN_PW_COUNT(2)
    KILN_PW_COUNT(3)
    KILN_PW_COUNT(4)
    KILN_PW_COUNT(5) KILN_PW_COUNT(6) KILN_PW_COUNT(7) KILN_PW_COUNT(8) KILN_PW_COUNT(9)
        KILN_PW_COUNT(10) KILN_PW_COUNT(11) KILN_PW_COUNT(12)
#undef KILN_PW_COUNT
            default : break;
  }
}

// Weights of this many bytes are taken together over the pixels (so each pixel tile, read
// once into L1, meets all of them while they stay in L1 or L2).
constexpr int64_t kChunkWeightBytes = 32 << 10;

// Output blocks [ob_begin, ob_end) of pixels [p_begin, p_end) of image n: chunks of output
// blocks whose weights fit kChunkWeightBytes, and in each, every pixel tile against every
// pair of its blocks.
KILN_VECTOR_CLONES void pointwise_range(const Job& j, int64_t n, int64_t ob_begin, int64_t ob_end,
                                        int64_t p_begin, int64_t p_end) {
  const int64_t block_bytes = j.c16 * kLanes * static_cast<int64_t>(sizeof(float));
  const int64_t chunk = std::max<int64_t>(2, kChunkWeightBytes / block_bytes / 2 * 2);
  for (int64_t c0 = ob_begin; c0 < ob_end; c0 += chunk) {
    const int64_t c1 = std::min(ob_end, c0 + chunk);
    for (int64_t p = p_begin; p < p_end; p += kTilePixels) {
      const int64_t count = std::min<int64_t>(kTilePixels, p_end - p);
      int64_t ob = c0;
      for (; ob + 2 <= c1; ob += 2) pointwise_tiles<2>(j, n, ob, p, count);
      if (ob < c1) pointwise_tiles<1>(j, n, ob, p, count);
    }
  }
}

// nChw16c from plain NCHW ([n][c][hw] to [n][c / 16][hw][16], padding zero) and back.
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

class PointwiseConvOp final : public CpuOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }

  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index == 0) return native_layout(blocked_md(in_sizes_));
    if (has_residual_ && index == residual_index_) {
      return native_layout(blocked_md(outputs_[0].sizes));
    }
    return std::nullopt;
  }
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index != 0) return std::nullopt;
    return native_layout(blocked_md(outputs_[0].sizes));
  }
  Status use_native_input(size_t index) override {
    if (index == 0) {
      native_in_ = true;
      return Status();
    }
    if (has_residual_ && index == residual_index_) {
      native_residual_ = true;
      return Status();
    }
    return CpuOp::use_native_input(index);
  }
  Status use_native_output(size_t index) override {
    if (index != 0) return CpuOp::use_native_output(index);
    native_out_ = true;
    return Status();
  }

  Status finish() override {
    // Blocked copies of what is given (or wanted) plain.
    const int64_t n = in_sizes_[0];
    const int64_t out_floats = n * blocks_out_ * kLanes * pixels_;
    if (!native_in_)
      x_blocked_.assign(static_cast<size_t>(n * c16_ * in_sizes_[2] * in_sizes_[3]), 0.0f);
    if (strided()) x_stage_.assign(static_cast<size_t>(n * c16_ * pixels_), 0.0f);
    if (!native_out_) y_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    if (has_residual_ && !native_residual_) r_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    finished_ = true;
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr ||
        (has_residual_ &&
         (inputs.size() <= residual_index_ || inputs[residual_index_] == nullptr))) {
      return Status(Error::InvalidArgument, "run op 'Conv' (" + describe_ + "): expected input 0" +
                                                (has_residual_ ? ", the residual" : "") +
                                                " and one output");
    }
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    const int64_t n = in_sizes_[0], c = in_sizes_[1], o = outputs_[0].sizes[1];
    Job j;
    j.x = static_cast<const float*>(inputs[0]->data());
    if (!native_in_) {
      to_blocked(j.x, x_blocked_.data(), n, c, in_sizes_[2] * in_sizes_[3]);
      j.x = x_blocked_.data();
    }
    if (strided()) {
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
    j.ops = post_ops_.data();
    j.num_ops = post_ops_.size();
    j.last_lanes = last_lanes_.empty() ? nullptr : last_lanes_.data();
    // Threads split the pairs of output blocks when they divide evenly, else the pixels (in
    // whole tiles where there are enough).
    const int64_t pairs = (blocks_out_ + 1) / 2;
    const int parts = std::max(1, num_threads_);
    const bool by_blocks = pairs % parts == 0 || pairs >= 4 * parts;
    const int64_t tiles = (pixels_ + kTilePixels - 1) / kTilePixels;
    auto pixel_at = [&](int64_t t) {
      return tiles >= 2 * parts ? std::min(pixels_, tiles * t / parts * kTilePixels)
                                : pixels_ * t / parts;
    };
    for (int64_t i = 0; i < n; ++i) {
      if (parts == 1) {
        pointwise_range(j, i, 0, blocks_out_, 0, pixels_);
        continue;
      }
#pragma omp parallel for num_threads(parts) schedule(static)
      for (int t = 0; t < parts; ++t) {
        if (by_blocks) {
          pointwise_range(j, i, std::min(blocks_out_, 2 * (pairs * t / parts)),
                          std::min(blocks_out_, 2 * (pairs * (t + 1) / parts)), 0, pixels_);
        } else {
          pointwise_range(j, i, 0, blocks_out_, pixel_at(t), pixel_at(t + 1));
        }
      }
    }
    if (!native_out_) from_blocked(y_stage_.data(), y, n, o, pixels_);
    return Status();
  }

 private:
  bool strided() const { return stride_h_ != 1 || stride_w_ != 1; }

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

  static memory::desc blocked_md(const std::vector<int64_t>& sizes) {
    return memory::desc(to_dims(sizes), memory::data_type::f32, memory::format_tag::aBcd16b);
  }

  std::string describe_;
  std::vector<int64_t> in_sizes_;
  std::vector<TensorDesc> outputs_;
  std::vector<PostOp> post_ops_;
  int64_t c16_ = 0, blocks_out_ = 0, pixels_ = 0;  // pixels_: the output's
  int64_t stride_h_ = 1, stride_w_ = 1;
  int num_threads_ = 1;
  bool has_residual_ = false;
  size_t residual_index_ = 0;
  bool native_in_ = false, native_out_ = false, native_residual_ = false, finished_ = false;
  const float* weights_ = nullptr;
  // Staging: the input in nChw16c (given plain), its strided pixels compacted, the output
  // and the residual in nChw16c (wanted or given plain).
  std::vector<float> x_blocked_, x_stage_, y_stage_, r_stage_;
  std::vector<float> own_weights_, bias_, last_lanes_;
};

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
      ws.size() != 4 || ws[2] != 1 || ws[3] != 1 || x[1] < kLanes || !all_float(desc) ||
      !post_ops_ok || residuals > 1) {
    return error(desc, Error::NotSupported,
                 "not a blocked 2-D f32 1x1 Conv of 16 or more input channels with the loops' "
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
  if (group != 1 || !all(dilations, 0) || !all(pad_begin, 0) || !no_end_pads) {
    return error(desc, Error::NotSupported, "groups, dilations or pads");
  }
  const int64_t c = x[1], o = ws[0];
  if (static_cast<double>(out[0]) * static_cast<double>(o) * static_cast<double>(out[2] * out[3]) *
          sizeof(float) >
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
  // W [O, C, 1, 1] as [OB][C16][16]: for each block of 16 output channels, the 16 weights of
  // each input channel side by side (padding zero).
  const auto* source = static_cast<const float*>(w->data());
  const int64_t c16 = op->c16_, blocks = op->blocks_out_;
  KILN_ASSIGN_OR_RETURN(
      op->weights_,
      pack_floats(
          desc, 1, "kiln f32 W 1x1 [O/16][C16][16]", static_cast<size_t>(blocks * c16 * kLanes),
          [&](float* to) {
            std::fill(to, to + blocks * c16 * kLanes, 0.0f);
            for (int64_t oc = 0; oc < o; ++oc) {
              for (int64_t ic = 0; ic < c; ++ic) {
                to[((oc / kLanes) * c16 + ic) * kLanes + oc % kLanes] = source[oc * c + ic];
              }
            }
          },
          op->own_weights_));
  op->describe_ = "kiln pointwise Conv (own loops: nChw16c, " + std::to_string(kTilePixels) +
                  " pixels x 32 channels a tile)";
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_pointwise_conv(const OpDesc& desc) {
  return PointwiseConvOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
