// Depthwise Convs (a group per channel, one output channel each) among blocked Convs, on loops of
// kiln's own compiled ahead of time. oneDNN's depthwise kernel is generated for each shape when
// its primitive is created; MobileNet-V2 has 17 such Convs, and a shape-generic plan meets each
// at every new image size. These loops read and write nChw16c, as that kernel does among blocked
// Convs: a block of 16 channels is 16 independent Convs side by side, each output vector the 16
// channels of one pixel. A tile is up to kTile pixels of one output row: for each tap, the
// block's 16 weights are loaded once and multiplied with each pixel's input vector. Columns
// whose taps reach past the input's edges are done one at a time over the taps that are there.
// Biases, the loops' post-ops and one residual (in the output's layout) are applied before the
// store; the last block's padding lanes are written zero.

#include <kiln/engine/cpu/blocked_loops_op.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/vector_math.h>

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;
using namespace vec;  // NOLINT: the vector helpers of the loops below

constexpr int kTile = 8;
// Output rows narrower than this go to oneDNN's kernel unless generated code is to be avoided
// (OpDesc::avoid_generated_code): most of their columns are edges, done one at a time, and
// MobileNet-V2's 7 x 7 maps took 15.6 us on these loops against 12.8 (960 channels; 9.7
// against 9.0 for 576 at stride 2); from 14 x 14 up these loops ran 0.7-0.95 x oneDNN's time
// (`kiln_blocked_conv_bench`, 1 thread).
constexpr int64_t kMinOutputWidth = 10;

// One run's work, in plain values.
struct DwJob {
  const float* x = nullptr;         // [N][C16 / 16][H][W][16]
  const float* w = nullptr;         // [C16 / 16][KH][KW][16]
  const float* bias = nullptr;      // [C16], or null
  const float* residual = nullptr;  // the output's layout, or null
  float* y = nullptr;               // [N][C16 / 16][OH][OW][16]
  int64_t blocks = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
  Epilogue epilogue;                  // the post-ops (biases apart)
  const float* last_lanes = nullptr;  // 1 for the last block's channels, 0 for its padding
};

// The sums of kT pixels kS input columns apart, the first's taps from input row `ih` and column
// `iw` of the block plane `plane`: kernel rows [kh0, kh1), columns [kw0, kw1) (kK != 0: the
// kernel's width, its columns unrolled). Offsets, not pointers, reach before the row: only taps
// inside are read.
template <int kT, int kS, int kK>
[[gnu::always_inline]] inline void dw_sums(const DwJob& j, const float* plane, const float* w,
                                           int64_t ih, int64_t iw, int64_t kh0, int64_t kh1,
                                           int64_t kw0, int64_t kw1, Floats start,
                                           Floats (&sums)[kT]) {
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) sums[t] = start;
  for (int64_t kh = kh0; kh < kh1; ++kh) {
    const int64_t row = ((ih + kh) * j.in_w + iw) * kLanes;
    const float* wr = w + kh * j.kernel_w * kLanes;
    if constexpr (kK != 0) {
#pragma GCC unroll 8
      for (int64_t kw = 0; kw < kK; ++kw) {
        if (kw < kw0 || kw >= kw1) continue;  // (an edge column's taps outside)
        const Floats wv = load(wr + kw * kLanes);
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) sums[t] += wv * load(plane + (row + (t * kS + kw) * kLanes));
      }
    } else {
      for (int64_t kw = kw0; kw < kw1; ++kw) {
        const Floats wv = load(wr + kw * kLanes);
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) sums[t] += wv * load(plane + (row + (t * kS + kw) * kLanes));
      }
    }
  }
}

// Finishes and stores kT output vectors from `at` (an offset into the output): each post-op
// over the whole tile (one choice of op per tile, not per vector), then the padding lanes.
template <int kT>
[[gnu::always_inline]] inline void dw_store(const DwJob& j, Floats (&s)[kT], int64_t at,
                                            bool last_block) {
  for (size_t i = 0; i < j.epilogue.num_ops; ++i) {
    const PostOp& op = j.epilogue.ops[i];
    switch (op.kind) {
      case PostOpKind::Relu:
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) s[t] = s[t] < Floats{} ? Floats{} : s[t];
        break;
      case PostOpKind::Clip: {
        const Floats lo = splat(op.alpha), hi = splat(op.beta);
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) {
          s[t] = s[t] < lo ? lo : s[t];
          s[t] = s[t] > hi ? hi : s[t];
        }
        break;
      }
      case PostOpKind::AddResidual:
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) s[t] += load(j.residual + at + t * kLanes);
        break;
      default: {  // Sigmoid, Tanh, Linear, Swish (Gelu is declined at creation)
        const Epilogue one{.ops = &op, .num_ops = 1};
#pragma GCC unroll 16
        for (int t = 0; t < kT; ++t) s[t] = post_process(s[t], one, Floats{});
        break;
      }
    }
  }
  if (last_block) {
    const Floats keep = load(j.last_lanes);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) s[t] = keep > Floats{} ? s[t] : Floats{};
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) store(j.y + at + t * kLanes, s[t]);
}

template <int kT, int kS, int kK>
[[gnu::always_inline]] inline void dw_tile(const DwJob& j, const float* plane, const float* w,
                                           int64_t ih, int64_t kh0, int64_t kh1, int64_t ow,
                                           Floats bias, int64_t at, bool last_block) {
  Floats sums[kT];
  dw_sums<kT, kS, kK>(j, plane, w, ih, ow * kS - j.pad_left, kh0, kh1, 0, j.kernel_w, bias, sums);
  dw_store<kT>(j, sums, at + ow * kLanes, last_block);
}

// Output column `ow`, whose taps reach past the input's edges: over the taps that are there.
// (Not a lambda: it would be compiled for the baseline target, outside the clones.)
template <int kS, int kK>
[[gnu::always_inline]] inline void dw_edge(const DwJob& j, const float* plane, const float* w,
                                           int64_t ih, int64_t kh0, int64_t kh1, int64_t ow,
                                           Floats bias, int64_t at, bool last_block) {
  const int64_t iw = ow * kS - j.pad_left;
  const int64_t kw0 = std::max<int64_t>(0, -iw);
  const int64_t kw1 = std::max(kw0, std::min(j.kernel_w, j.in_w - iw));
  Floats sums[1];
  dw_sums<1, kS, kK>(j, plane, w, ih, iw, kh0, kh1, kw0, kw1, bias, sums);
  dw_store<1>(j, sums, at + ow * kLanes, last_block);
}

// One output row `oh` of channel block `plane` (image and block together). kOnePixel: every
// column one at a time (the baseline build's small code; see depthwise_range).
template <int kS, int kK, bool kOnePixel>
[[gnu::always_inline]] inline void dw_row(const DwJob& j, int64_t plane, int64_t oh) {
  const int64_t block = plane % j.blocks;
  const float* w = j.w + block * j.kernel_h * j.kernel_w * kLanes;
  const Floats bias = j.bias != nullptr ? load(j.bias + block * kLanes) : Floats{};
  const bool last_block = j.last_lanes != nullptr && block == j.blocks - 1;
  const int64_t ih = oh * j.stride_h - j.pad_top;
  int64_t kh0 = std::max<int64_t>(0, -ih), kh1 = std::min(j.kernel_h, j.in_h - ih);
  if (kh0 >= kh1) kh0 = kh1 = 0;  // (no row of taps inside: the biases alone)
  const float* x = j.x + plane * j.in_h * j.in_w * kLanes;
  const int64_t at = (plane * j.out_h + oh) * j.out_w * kLanes;
  // The columns whose taps are all inside the input: [ow_lo, ow_hi).
  const int64_t ow_lo = std::min(j.out_w, (j.pad_left + kS - 1) / kS);
  const int64_t last = j.in_w - j.kernel_w + j.pad_left;  // the last tap start inside
  const int64_t ow_hi = last < 0 ? ow_lo : std::clamp(last / kS + 1, ow_lo, j.out_w);
  if constexpr (kOnePixel) {
    for (int64_t ow = 0; ow < j.out_w; ++ow) {
      dw_edge<kS, kK>(j, x, w, ih, kh0, kh1, ow, bias, at, last_block);
    }
    return;
  }
  for (int64_t ow = 0; ow < ow_lo; ++ow) {
    dw_edge<kS, kK>(j, x, w, ih, kh0, kh1, ow, bias, at, last_block);
  }
  int64_t ow = ow_lo;
  for (; ow + kTile <= ow_hi; ow += kTile) {
    dw_tile<kTile, kS, kK>(j, x, w, ih, kh0, kh1, ow, bias, at, last_block);
  }
  switch (ow_hi - ow) {
#define KILN_DW_COUNT(c)                                                 \
  case c:                                                                \
    dw_tile<c, kS, kK>(j, x, w, ih, kh0, kh1, ow, bias, at, last_block); \
    break;
    KILN_DW_COUNT(1)
    KILN_DW_COUNT(2)
    KILN_DW_COUNT(3)
    KILN_DW_COUNT(4)
    KILN_DW_COUNT(5)
    KILN_DW_COUNT(6)
    KILN_DW_COUNT(7)
#undef KILN_DW_COUNT
    default:
      break;
  }
  for (ow = std::max(ow_lo, ow_hi); ow < j.out_w; ++ow) {
    dw_edge<kS, kK>(j, x, w, ih, kh0, kh1, ow, bias, at, last_block);
  }
}

template <int kS, int kK, bool kOnePixel>
[[gnu::always_inline]] inline void dw_rows(const DwJob& j, int64_t begin, int64_t end) {
  for (int64_t u = begin; u < end; ++u) dw_row<kS, kK, kOnePixel>(j, u / j.out_h, u % j.out_h);
}

[[gnu::target("avx512f")]] void depthwise_range_avx512(const DwJob& j, int64_t begin, int64_t end) {
  const bool three = j.kernel_w == 3;
  if (j.stride_w == 2) {
    three ? dw_rows<2, 3, false>(j, begin, end) : dw_rows<2, 0, false>(j, begin, end);
  } else {
    three ? dw_rows<1, 3, false>(j, begin, end) : dw_rows<1, 0, false>(j, begin, end);
  }
}

// Output rows [begin, end) of every image's blocks in turn (row u: plane u / OH, row u % OH).
// The tiles are built for AVX-512 only, the CPUs kernel selection gives these loops
// (own_vector_loops); elsewhere (a test's direct call) one pixel at a time, in little code.
void depthwise_range(const DwJob& j, int64_t begin, int64_t end) {
  if (__builtin_cpu_supports("avx512f")) {
    depthwise_range_avx512(j, begin, end);
  } else if (j.stride_w == 2) {
    dw_rows<2, 0, true>(j, begin, end);
  } else {
    dw_rows<1, 0, true>(j, begin, end);
  }
}

class DepthwiseConvOp final : public BlockedLoopsOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

  Status finish() override {
    const int64_t in_floats = in_sizes_[0] * job_.blocks * kLanes * in_sizes_[2] * in_sizes_[3];
    const int64_t out_floats = in_sizes_[0] * job_.blocks * kLanes * job_.out_h * job_.out_w;
    if (!native_in_) x_stage_.assign(static_cast<size_t>(in_floats), 0.0f);
    if (!native_out_) y_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    if (has_residual_ && !native_residual_) r_stage_.assign(static_cast<size_t>(out_floats), 0.0f);
    finished_ = true;
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run(inputs, outputs));
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    const int64_t n = in_sizes_[0], c = in_sizes_[1];
    const int64_t out_pixels = job_.out_h * job_.out_w;
    DwJob j = job_;
    j.x = static_cast<const float*>(inputs[0]->data());
    if (!native_in_) {
      to_blocked(j.x, x_stage_.data(), n, c, in_sizes_[2] * in_sizes_[3]);
      j.x = x_stage_.data();
    }
    if (has_residual_) {
      j.residual = static_cast<const float*>(inputs[residual_index_]->data());
      if (!native_residual_) {
        to_blocked(j.residual, r_stage_.data(), n, c, out_pixels);
        j.residual = r_stage_.data();
      }
      j.epilogue.residual = j.residual;
    }
    float* y = static_cast<float*>(outputs[0]->mutable_data());
    j.y = native_out_ ? y : y_stage_.data();
    // Threads share the output rows of every image and block.
    const int64_t rows = n * j.blocks * j.out_h;
    const int parts = static_cast<int>(std::min<int64_t>(num_threads_, rows));
    if (parts <= 1) {
      depthwise_range(j, 0, rows);
    } else {
#pragma omp parallel for num_threads(parts) schedule(static)
      for (int t = 0; t < parts; ++t) depthwise_range(j, rows * t / parts, rows * (t + 1) / parts);
    }
    if (!native_out_) from_blocked(y_stage_.data(), y, n, c, out_pixels);
    return Status();
  }

 private:
  DwJob job_;  // the geometry, weights, biases and post-ops; the tensors are set per run
  int num_threads_ = 1;
  bool finished_ = false;
  std::vector<PostOp> post_ops_;
  std::vector<float> own_weights_, bias_, last_lanes_;
  // Staging: the input, the output and the residual in nChw16c, given or wanted plain.
  std::vector<float> x_stage_, y_stage_, r_stage_;
};

// Why the loops do not take a Conv of `c` input channels by W of sizes `ws` (in `group`s, with
// oneDNN's dilations, strides and the output's sizes `out`), or "" when they do.
std::string refusal(const OpDesc& desc, int64_t c, const std::vector<int64_t>& ws, int64_t group,
                    const memory::dims& dilations, const memory::dims& strides,
                    const std::vector<int64_t>& out) {
  if (group != c || ws[0] != c || ws[1] != 1) {
    return "not depthwise (a group per channel, one output channel each)";
  }
  if (dilations[0] != 0 || dilations[1] != 0) return "dilations";
  if (strides[1] != 1 && strides[1] != 2) {
    return "a horizontal stride of " + std::to_string(strides[1]) + " (the loops take 1 or 2)";
  }
  if (out[3] < kMinOutputWidth && !desc.avoid_generated_code) {
    return "output rows of " + std::to_string(out[3]) + " pixels (under " +
           std::to_string(kMinOutputWidth) + ", oneDNN's kernel runs them faster)";
  }
  return "";
}

// W [C, 1, KH, KW] (`taps` = KH x KW) as [C16 / 16][KH][KW][16] into `to`: each block's 16
// weights of a tap side by side (padding zero).
void pack_depthwise(const float* source, int64_t c, int64_t taps, float* to) {
  const int64_t blocks = (c + kLanes - 1) / kLanes;
  std::fill(to, to + blocks * taps * kLanes, 0.0f);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t t = 0; t < taps; ++t) {
      to[((ch / kLanes) * taps + t) * kLanes + ch % kLanes] = source[ch * taps + t];
    }
  }
}

Result<std::unique_ptr<CpuOp>> DepthwiseConvOp::create(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 4));
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& ws = desc.inputs[1].sizes;
  const int residuals = num_residuals(desc);
  const bool post_ops_ok = std::all_of(desc.post_ops.begin(), desc.post_ops.end(),
                                       [](const PostOp& p) { return p.kind != PostOpKind::Gelu; });
  if (desc.op != "Conv" || desc.activation_layout != ActivationLayout::Blocked || x.size() != 4 ||
      ws.size() != 4 || !all_float(desc) || !post_ops_ok || residuals > 1) {
    return error(desc, Error::NotSupported, "not a blocked 2-D f32 Conv with the loops' post-ops");
  }
  const runtime::Tensor* w = input_constant(desc, 1);
  if (w == nullptr) return error(desc, Error::NotSupported, "W is not constant");
  memory::dims strides, dilations, pad_begin, pad_end;
  int64_t group = 1;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out,
                        conv_geometry(desc, strides, dilations, pad_begin, pad_end, group));
  const int64_t c = x[1];
  const std::string refused = refusal(desc, c, ws, group, dilations, strides, out);
  if (!refused.empty()) return error(desc, Error::NotSupported, refused);
  auto op = std::make_unique<DepthwiseConvOp>();
  op->in_sizes_ = x;
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
  op->num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  op->post_ops_ = desc.post_ops;
  op->has_residual_ = residuals == 1;
  op->residual_index_ = desc.inputs.size() - 1;
  if (op->has_residual_ && desc.inputs.back().sizes != out) {
    return error(desc, Error::InvalidArgument,
                 "residual has shape " + runtime::shape_to_string(desc.inputs.back().sizes) +
                     " (expected the output's " + runtime::shape_to_string(out) + ")");
  }
  const int64_t blocks = (c + kLanes - 1) / kLanes;
  if (c % kLanes != 0) {
    op->last_lanes_.assign(kLanes, 0.0f);
    std::fill(op->last_lanes_.begin(), op->last_lanes_.begin() + c % kLanes, 1.0f);
  }
  const bool has_bias =
      desc.inputs.size() - static_cast<size_t>(residuals) == 3 && input_present(desc, 2);
  if (has_bias) {
    KILN_ASSIGN_OR_RETURN(std::vector<float> bias, column_bias(desc, 2, c, 1.0f));
    bias.resize(static_cast<size_t>(blocks * kLanes), 0.0f);
    op->bias_ = std::move(bias);
  }
  const auto* source = static_cast<const float*>(w->data());
  const int64_t taps = ws[2] * ws[3];
  KILN_ASSIGN_OR_RETURN(
      const float* packed,
      pack_floats(
          desc, 1, "kiln f32 W depthwise [C16/16][KH][KW][16]",
          static_cast<size_t>(blocks * taps * kLanes),
          [&](float* to) { pack_depthwise(source, c, taps, to); }, op->own_weights_));
  DwJob& j = op->job_;
  j.w = packed;
  j.bias = op->bias_.empty() ? nullptr : op->bias_.data();
  j.blocks = blocks;
  j.in_h = x[2], j.in_w = x[3], j.out_h = out[2], j.out_w = out[3];
  j.kernel_h = ws[2], j.kernel_w = ws[3];
  j.stride_h = strides[0], j.stride_w = strides[1];
  j.pad_top = pad_begin[0], j.pad_left = pad_begin[1];
  j.epilogue.ops = op->post_ops_.data();
  j.epilogue.num_ops = op->post_ops_.size();
  j.last_lanes = op->last_lanes_.empty() ? nullptr : op->last_lanes_.data();
  op->describe_ = "kiln depthwise Conv " + std::to_string(ws[2]) + "x" + std::to_string(ws[3]) +
                  " (own loops: nChw16c, " + std::to_string(kTile) + " pixels of a row a tile)";
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_depthwise_conv(const OpDesc& desc) {
  return DepthwiseConvOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
