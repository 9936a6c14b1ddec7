// Convs, MatMuls and Gemms of little work on loops of kiln's own, compiled ahead of time.
// oneDNN generates code for each primitive when it is created (0.2-1 ms apiece, and about 1 ms
// of setup at a process's first primitive), which for a model of microseconds of work (a
// voice-activity detector, an 8x8 digit classifier) is most of its load or first run, while the
// work itself takes microseconds on either. Both compute C = A x B over panels of B: 16
// columns of it stored together, row after row (ceil(N / 16) panels of K x 16 floats, the
// last one zero-padded). MatMul and Gemm pack their constant B into panels once; Conv gathers
// its input windows into panels at each run (an im2col of at most kMaxPanelBytes) and takes its
// weight, [O, C x KH x KW] in ONNX's own layout, as A. A MatMul of a few rows by a constant B
// (a decoder's token) takes the same loops at any size: it streams B once from memory, which
// the panels do at the memory's full rate, split by columns over the op's threads.

#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/cpu/vector_math.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;
using namespace vec;  // NOLINT: the vector helpers of every loop below

// Bounds of "little work": multiply-adds per run, and the panels a Conv gathers per image.
constexpr double kMaxMacs = 1 << 18;
constexpr int64_t kMaxPanelBytes = int64_t{1} << 20;
// A MatMul of at most kStreamingRows rows (a decoder's token) by a B of more than
// kStreamingBytes (more than a core's L2 cache holds) is bound by reading B from memory, which
// the panels do at the memory's full rate (see gemv_panels; oneDNN's kernels took a third longer
// for GPT-large decode's 512 x 8192 head): it takes the loops at any size, on all its threads,
// with Gelu and a residual too. Below that size, oneDNN's kernels are the faster ones for those
// post-ops.
constexpr int64_t kStreamingRows = 4;
constexpr double kStreamingBytes = 1 << 20;

// One row of A by the panels, one panel after another with K in eights: eight independent
// chains of sums (as many as two FMA units with 4-cycle latency keep busy) and a single
// sequential read of B, which the hardware prefetchers follow at the memory's full rate (four
// panels read side by side, as the rows below do, reach about two thirds of it: GPT-large
// decode's 512 x 8192 head, 0.64 against 0.42 ms).
[[gnu::always_inline]] inline void gemv_panels(const float* a, int64_t k_count, const float* panels,
                                               int64_t n_count, float* c, int64_t ldc,
                                               const Epilogue& e) {
  const int64_t panel_floats = k_count * kLanes;
  for (int64_t n0 = 0; n0 < n_count; n0 += kLanes) {
    const float* p = panels + (n0 / kLanes) * panel_floats;
    // Named sums, not an array: GCC at -O2 keeps an array of vectors in memory.
    Floats s0{}, s1{}, s2{}, s3{}, s4{}, s5{}, s6{}, s7{};
    int64_t k = 0;
    for (; k + 7 < k_count; k += 8) {
      const float* q = p + k * kLanes;
      s0 += a[k] * load(q);
      s1 += a[k + 1] * load(q + kLanes);
      s2 += a[k + 2] * load(q + 2 * kLanes);
      s3 += a[k + 3] * load(q + 3 * kLanes);
      s4 += a[k + 4] * load(q + 4 * kLanes);
      s5 += a[k + 5] * load(q + 5 * kLanes);
      s6 += a[k + 6] * load(q + 6 * kLanes);
      s7 += a[k + 7] * load(q + 7 * kLanes);
    }
    for (; k < k_count; ++k) s0 += a[k] * load(p + k * kLanes);
    const Floats sum[1] = {((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))};
    write_sums(sum, 1, 0, n0, n_count, c, ldc, e);
  }
}

// C [M, N] (row stride ldc) = post-ops(A [M, K] (row stride lda) x B + biases), B as panels.
// Four rows of A meet two panels at a time: eight vectors of sums in registers over K (as many
// independent chains as two FMA units with 4-cycle latency keep busy); a last odd panel, one.
KILN_VECTOR_CLONES void gemm_panels(const float* a, int64_t lda, int64_t m_count, int64_t k_count,
                                    const float* panels, int64_t n_count, float* c, int64_t ldc,
                                    const Epilogue& e) {
  if (m_count == 1) {
    gemv_panels(a, k_count, panels, n_count, c, ldc, e);
    return;
  }
  const int64_t panel_floats = k_count * kLanes;
  for (int64_t n0 = 0; n0 < n_count; n0 += 2 * kLanes) {
    const float* p0 = panels + (n0 / kLanes) * panel_floats;
    const bool two = n0 + kLanes < n_count;
    const float* p1 = two ? p0 + panel_floats : p0;
    for (int64_t m = 0; m < m_count; m += 4) {
      const int64_t rows = std::min<int64_t>(4, m_count - m);
      // Rows past the end repeat the last one (their sums are dropped).
      const float* a0 = a + m * lda;
      const float* a1 = a + (m + std::min<int64_t>(1, rows - 1)) * lda;
      const float* a2 = a + (m + std::min<int64_t>(2, rows - 1)) * lda;
      const float* a3 = a + (m + std::min<int64_t>(3, rows - 1)) * lda;
      Floats s0{}, s1{}, s2{}, s3{}, t0{}, t1{}, t2{}, t3{};
      if (two) {
        for (int64_t k = 0; k < k_count; ++k) {
          const Floats b = load(p0 + k * kLanes), d = load(p1 + k * kLanes);
          const float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
          s0 += x0 * b, t0 += x0 * d;
          s1 += x1 * b, t1 += x1 * d;
          s2 += x2 * b, t2 += x2 * d;
          s3 += x3 * b, t3 += x3 * d;
        }
      } else {
        for (int64_t k = 0; k < k_count; ++k) {
          const Floats b = load(p0 + k * kLanes);
          s0 += a0[k] * b;
          s1 += a1[k] * b;
          s2 += a2[k] * b;
          s3 += a3[k] * b;
        }
      }
      const Floats first[4] = {s0, s1, s2, s3};
      write_sums(first, rows, m, n0, n_count, c, ldc, e);
      if (two) {
        const Floats second[4] = {t0, t1, t2, t3};
        write_sums(second, rows, m, n0 + kLanes, n_count, c, ldc, e);
      }
    }
  }
}

// Column panels [n_begin, n_end) of gemm_panels, n_begin a multiple of 32: the same sums.
void gemm_columns(const float* a, int64_t lda, int64_t m_count, int64_t k_count,
                  const float* panels, int64_t n_begin, int64_t n_end, float* c, int64_t ldc,
                  Epilogue e) {
  if (e.col_bias != nullptr) e.col_bias += n_begin;
  if (e.residual != nullptr) e.residual += n_begin;
  gemm_panels(a, lda, m_count, k_count, panels + n_begin / kLanes * k_count * kLanes,
              n_end - n_begin, c + n_begin, ldc, e);
}

// gemm_panels with the column panel pairs split over `threads` threads.
void gemm_panels_parallel(const float* a, int64_t lda, int64_t m_count, int64_t k_count,
                          const float* panels, int64_t n_count, float* c, int64_t ldc,
                          const Epilogue& e, int threads) {
  const int64_t pairs = (n_count + 2 * kLanes - 1) / (2 * kLanes);
  if (threads <= 1 || pairs < 2) {
    gemm_panels(a, lda, m_count, k_count, panels, n_count, c, ldc, e);
    return;
  }
  const int parts = static_cast<int>(std::min<int64_t>(threads, pairs));
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int64_t t = 0; t < parts; ++t) {
    const int64_t begin = pairs * t / parts * 2 * kLanes;
    const int64_t end = std::min(n_count, pairs * (t + 1) / parts * 2 * kLanes);
    gemm_columns(a, lda, m_count, k_count, panels, begin, end, c, ldc, e);
  }
}

// `streaming`: Gelu and AddResidual too (a streaming MatMul's).

class SmallOp : public CpuOp {
 public:
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override { return describe_; }
  std::string provider() const override { return "kiln"; }

 protected:
  Status check_run(runtime::Span<const runtime::Tensor*> inputs,
                   runtime::Span<runtime::Tensor*> outputs) const {
    if (inputs.size() < 1 || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (" + describe_ + "): expected input 0 and one output");
    }
    return Status();
  }

  std::string op_, describe_;
  std::vector<TensorDesc> outputs_;
  std::vector<PostOp> post_ops_;
  Epilogue epilogue() const {
    return Epilogue{nullptr, nullptr, post_ops_.data(), post_ops_.size()};
  }
};

// Which loops a SmallMatMulOp runs: the small ones (little work, or a few rows streaming B), or
// tiles at any size with every post-op and one residual on the op's threads: avx2_gemm over
// B's panels, or on AVX-512 avx512_gemm_blocked over B in oneDNN's blocked layout.
enum class MatMulLoops { Small, Avx2Tiles, Avx512Blocked };

// MatMul by a constant 2-D B, or Gemm (transA 0): Y [M, N] = alpha A B' + beta C.
class SmallMatMulOp final : public SmallOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc, MatMulLoops loops) {
    const bool blocked = loops != MatMulLoops::Small;
    const bool gemm = desc.op == "Gemm";
    const int residuals = num_residuals(desc);
    KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3 + static_cast<size_t>(std::max(residuals, 0))));
    if (!all_float(desc) || residuals > 1 || (gemm && residuals != 0)) {
      return error(desc, Error::NotSupported, "not float32, or a residual the loops lack");
    }
    const runtime::Tensor* b = input_constant(desc, 1);
    const std::vector<int64_t>& a_sizes = desc.inputs[0].sizes;
    const std::vector<int64_t>& b_sizes = desc.inputs[1].sizes;
    if (b == nullptr || b_sizes.size() != 2 || a_sizes.size() < 2) {
      return error(desc, Error::NotSupported, "B is not a constant matrix, or A is a vector");
    }
    Attrs attrs(desc);
    KILN_ASSIGN_OR_RETURN(int64_t trans_a, attrs.get_int("transA", 0));
    KILN_ASSIGN_OR_RETURN(int64_t trans_b, attrs.get_int("transB", 0));
    KILN_ASSIGN_OR_RETURN(double alpha, attrs.get_float("alpha", 1.0));
    KILN_ASSIGN_OR_RETURN(double beta, attrs.get_float("beta", 1.0));
    if (!gemm) trans_a = trans_b = 0, alpha = beta = 1.0;
    if (trans_a != 0 || (gemm && a_sizes.size() != 2)) {
      return error(desc, Error::NotSupported, "transA, or a Gemm A of rank other than 2");
    }
    const int64_t k = a_sizes.back();
    const int64_t n = trans_b != 0 ? b_sizes[0] : b_sizes[1];
    if ((trans_b != 0 ? b_sizes[1] : b_sizes[0]) != k) {
      return error(desc, Error::InvalidArgument,
                   "A's columns (" + std::to_string(k) + ") differ from B's rows");
    }
    int64_t m = 1;
    for (size_t i = 0; i + 1 < a_sizes.size(); ++i) m *= a_sizes[i];
    const double b_bytes = sizeof(float) * static_cast<double>(n) * static_cast<double>(k);
    // A few rows by a B in oneDNN's blocked layout (AVX-512) take the streaming loops at any
    // size of B: the packing a MatMul of many rows by the same weight (a prefill of the same
    // model, a shape-generic plan) reads too, so the model holds one copy.
    const bool shares_blocked = streaming_b_blocked() && alpha == 1.0 && k > 0 && n > 0;
    const bool streaming =
        !blocked && m <= kStreamingRows && (b_bytes > kStreamingBytes || shares_blocked);
    if (blocked && k == 0) return error(desc, Error::NotSupported, "B is empty");
    if (loops == MatMulLoops::Avx512Blocked && (!shares_blocked || !cpu_has_avx512f())) {
      return error(desc, Error::NotSupported, "alpha other than 1, or no AVX-512F");
    }
    if (!blocked && !streaming && static_cast<double>(m) * b_bytes / sizeof(float) > kMaxMacs) {
      return error(desc, Error::NotSupported, "more work than the small loops take");
    }
    if (!supported_post_ops(desc, streaming || blocked)) {
      return error(desc, Error::NotSupported, "a post-op the loops lack");
    }
    auto op = std::make_unique<SmallMatMulOp>();
    op->op_ = desc.op;
    op->describe_ =
        loops == MatMulLoops::Avx2Tiles
            ? std::string("kiln AVX2 MatMul (6 x 16 tiles over B's panels, packed once)")
        : loops == MatMulLoops::Avx512Blocked
            ? std::string("kiln AVX-512 MatMul (6 x 64 tiles, no generated code; up to ") +
                  std::to_string(kStreamingRows) + " rows: blocked GEMV)"
            : "kiln small MatMul (own loops, no generated code" +
                  (streaming ? "; B streamed for " + std::to_string(m) + " row(s))" : ")");
    op->post_ops_ = desc.post_ops;
    op->m_ = m, op->n_ = n, op->k_ = k;
    op->loops_ = loops;
    op->threads_ = streaming ? std::max(desc.num_threads, 1) : 1;
    if (blocked) op->threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
    op->residual_ = residuals == 1;
    std::vector<int64_t> out(a_sizes.begin(), a_sizes.end() - 1);
    out.push_back(n);
    if (op->residual_ && desc.inputs.back().sizes != out) {
      return error(desc, Error::InvalidArgument,
                   "residual has shape " + runtime::shape_to_string(desc.inputs.back().sizes) +
                       " (expected the output's " + runtime::shape_to_string(out) + ")");
    }
    op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
    if (desc.inputs.size() - static_cast<size_t>(residuals) == 3) {
      KILN_ASSIGN_OR_RETURN(op->bias_,
                            column_bias(desc, 2, n, static_cast<float>(gemm ? beta : 1.0)));
    }
    if ((streaming && alpha == 1.0 && streaming_b_blocked()) ||
        loops == MatMulLoops::Avx512Blocked) {
      // B's bytes as oneDNN's matmul (dnnl_matmul.cpp) describes them, so that the packing's
      // key is the one a blocked oneDNN MatMul of this weight makes.
      const memory::desc source =
          gemm ? memory::desc({k, n}, memory::data_type::f32,
                              trans_b != 0 ? memory::dims{1, k} : memory::dims{n, 1})
               : plain_md(b_sizes);
      const memory::desc target = blocked_b_md(k, n);
      KILN_ASSIGN_OR_RETURN(op->blocked_b_, pack_constant(desc, 1, source, b->data(), target));
      op->panels_ = static_cast<const float*>(op->blocked_b_.get_data_handle());
      op->describe_ += " from oneDNN's blocked B (" + format_of(target) + ")";
      return std::unique_ptr<CpuOp>(std::move(op));
    }
    KILN_ASSIGN_OR_RETURN(op->panels_,
                          pack_matmul_panels(desc, 1, k, n, trans_b != 0, alpha, op->own_panels_));
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run(inputs, outputs));
    Epilogue e = epilogue();
    e.col_bias = bias_.empty() ? nullptr : bias_.data();
    if (residual_) {
      const runtime::Tensor* residual = inputs.back();
      if (inputs.size() < 3 || residual == nullptr || residual->numel() != m_ * n_) {
        return Status(Error::InvalidArgument, "run op '" + op_ + "' (" + describe_ +
                                                  "): expected a residual of " +
                                                  std::to_string(m_ * n_) + " values");
      }
      e.residual = static_cast<const float*>(residual->data());
    }
    const auto* a = static_cast<const float*>(inputs[0]->data());
    auto* c = static_cast<float*>(outputs[0]->mutable_data());
    if (loops_ == MatMulLoops::Avx2Tiles) {
      avx2_gemm(a, k_, m_, k_, panels_, n_, c, n_, e, threads_);
    } else if (loops_ == MatMulLoops::Avx512Blocked && m_ > kStreamingRows) {
      avx512_gemm_blocked(a, k_, m_, k_, panels_, n_, c, n_, e, threads_);
    } else if (blocked_b_) {
      gemv_blocked(a, k_, m_, k_, panels_, n_, c, n_, e, threads_);
    } else {
      gemm_panels_parallel(a, k_, m_, k_, panels_, n_, c, n_, e, threads_);
    }
    return Status();
  }

 private:
  int64_t m_ = 0, n_ = 0, k_ = 0;
  int threads_ = 1;
  bool residual_ = false;
  MatMulLoops loops_ = MatMulLoops::Small;
  const float* panels_ = nullptr;
  std::vector<float> own_panels_, bias_;
  memory blocked_b_;  ///< B in oneDNN's blocked layout (`streaming_b_blocked`), else empty.
};

// Conv of one group, 1-D or 2-D, constant W and B, per image in one of two orientations,
// whichever fills more of the panels' 16 lanes:
// - by pixels: the windows gathered into panels of 16 output pixels, then
//   Y [O, P] = W [O, C KH KW] x windows;
// - by channels (few pixels, e.g. the VAD's 9, 5 and 3): W^T packed into panels of 16 output
//   channels once, the windows gathered as rows [P, C KH KW], then Y^T [P, O] = windows x W^T,
//   transposed into Y.
class SmallConvOp final : public SmallOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc) {
    KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3));
    if (!all_float(desc) || !supported_post_ops(desc) || num_residuals(desc) != 0) {
      return error(desc, Error::NotSupported, "not float32, or a post-op the loops lack");
    }
    const runtime::Tensor* w = input_constant(desc, 1);
    if (w == nullptr) return error(desc, Error::NotSupported, "W is not constant");
    memory::dims strides, dilations, pad_begin, pad_end;
    int64_t group = 1;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out,
                          conv_geometry(desc, strides, dilations, pad_begin, pad_end, group));
    const std::vector<int64_t>& x = desc.inputs[0].sizes;
    const std::vector<int64_t>& ws = desc.inputs[1].sizes;
    if (group != 1 || x.size() > 4) {
      return error(desc, Error::NotSupported, "groups, or a 3-D Conv");
    }
    auto op = std::make_unique<SmallConvOp>();
    const bool one_d = x.size() == 3;
    op->batch_ = x[0], op->channels_ = x[1];
    op->in_h_ = one_d ? 1 : x[2], op->in_w_ = x.back();
    op->out_c_ = ws[0];
    op->kernel_h_ = one_d ? 1 : ws[2], op->kernel_w_ = ws.back();
    op->out_h_ = one_d ? 1 : out[2], op->out_w_ = out.back();
    op->stride_h_ = one_d ? 1 : strides[0], op->stride_w_ = strides.back();
    op->dilation_h_ = one_d ? 1 : dilations[0] + 1, op->dilation_w_ = dilations.back() + 1;
    op->pad_h_ = one_d ? 0 : pad_begin[0], op->pad_w_ = pad_begin.back();
    const int64_t taps = op->channels_ * op->kernel_h_ * op->kernel_w_;
    const int64_t pixels = op->out_h_ * op->out_w_;
    auto filled = [](int64_t n) {  // the share of a panel's lanes n values fill
      return static_cast<double>(n) / static_cast<double>((n + kLanes - 1) / kLanes * kLanes);
    };
    op->by_channels_ = filled(op->out_c_) > filled(pixels);
    const int64_t buffer_floats = op->by_channels_
                                      ? pixels * taps + pixels * op->out_c_  // rows, Y^T
                                      : (pixels + kLanes - 1) / kLanes * taps * kLanes;
    const double macs = static_cast<double>(op->batch_) * static_cast<double>(op->out_c_) *
                        static_cast<double>(taps) * static_cast<double>(pixels);
    if (macs > kMaxMacs || buffer_floats * 4 > kMaxPanelBytes) {
      return error(desc, Error::NotSupported, "more work than the small loops take");
    }
    op->op_ = desc.op;
    op->describe_ = std::string("kiln small Conv (own loops, no generated code) by ") +
                    (op->by_channels_ ? "channels" : "pixels");
    op->post_ops_ = desc.post_ops;
    op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};
    KILN_ASSIGN_OR_RETURN(op->bias_, column_bias(desc, 2, op->out_c_, 1.0f));
    const auto* source = static_cast<const float*>(w->data());
    const size_t count = static_cast<size_t>(op->out_c_ * taps);
    if (op->by_channels_) {
      // W [O, C KH KW] read as B [C KH KW, O].
      const int64_t out_c = op->out_c_;
      KILN_ASSIGN_OR_RETURN(
          op->weights_,
          pack_floats(
              desc, 1, "kiln panels16 f32 W^T [C KH KW, O]", panel_floats(taps, out_c),
              [&](float* to) { pack_panels(source, 1, taps, taps, out_c, 1.0f, to); },
              op->own_weights_));
    } else {
      KILN_ASSIGN_OR_RETURN(op->weights_,
                            pack_floats(
                                desc, 1, "kiln rows f32 [O, C KH KW]", count,
                                [&](float* to) { std::memcpy(to, source, count * sizeof(float)); },
                                op->own_weights_));
    }
    op->panels_.assign(static_cast<size_t>(buffer_floats), 0.0f);
    // By pixels: the rows and columns the windows read, from -pad, as a zero-padded copy, so
    // that the gather copies whole window rows with no bounds to find.
    op->padded_h_ = (op->out_h_ - 1) * op->stride_h_ + (op->kernel_h_ - 1) * op->dilation_h_ + 1;
    op->padded_w_ = (op->out_w_ - 1) * op->stride_w_ + (op->kernel_w_ - 1) * op->dilation_w_ + 1;
    const int64_t padded_floats = op->channels_ * op->padded_h_ * op->padded_w_;
    if (!op->by_channels_) {
      if (padded_floats * 4 > kMaxPanelBytes) {
        return error(desc, Error::NotSupported, "an image too large to pad a copy of");
      }
      op->padded_.assign(static_cast<size_t>(padded_floats), 0.0f);
    }
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run(inputs, outputs));
    const auto* x = static_cast<const float*>(inputs[0]->data());
    auto* y = static_cast<float*>(outputs[0]->mutable_data());
    const int64_t pixels = out_h_ * out_w_;
    const int64_t taps = channels_ * kernel_h_ * kernel_w_;
    Epilogue e = epilogue();
    const float* bias = bias_.empty() ? nullptr : bias_.data();
    for (int64_t n = 0; n < batch_; ++n) {
      const float* image = x + n * channels_ * in_h_ * in_w_;
      float* result = y + n * out_c_ * pixels;
      if (by_channels_) {
        gather_rows(image);
        float* transposed = panels_.data() + pixels * taps;
        e.col_bias = bias;
        gemm_panels(panels_.data(), taps, pixels, taps, weights_, out_c_, transposed, out_c_, e);
        for (int64_t p = 0; p < pixels; ++p) {
          for (int64_t o = 0; o < out_c_; ++o) result[o * pixels + p] = transposed[p * out_c_ + o];
        }
      } else {
        pad(image);
        gather_pixels();
        e.row_bias = bias;
        gemm_panels(weights_, taps, out_c_, taps, panels_.data(), pixels, result, pixels, e);
      }
    }
    return Status();
  }

 private:
  // Copies the image into padded_ at (pad_h_, pad_w_): what the windows read of it. The rest
  // of padded_ stays zero.
  void pad(const float* image) {
    for (int64_t c = 0; c < channels_; ++c) {
      for (int64_t ih = 0; ih < in_h_; ++ih) {
        const int64_t ph = ih + pad_h_;
        const int64_t lo = std::max<int64_t>(0, -pad_w_);
        const int64_t hi = std::min<int64_t>(in_w_, padded_w_ - pad_w_);
        if (ph < 0 || ph >= padded_h_ || hi <= lo) continue;
        std::memcpy(padded_.data() + (c * padded_h_ + ph) * padded_w_ + lo + pad_w_,
                    image + (c * in_h_ + ih) * in_w_ + lo,
                    sizeof(float) * static_cast<size_t>(hi - lo));
      }
    }
  }

  // By pixels: panels_[(p / 16) * taps * 16 + tap * 16 + p % 16] = the input under tap `tap`
  // of output pixel p, from the padded copy: each output row of a tap is one strided run of a
  // padded row, split only where it crosses a panel.
  void gather_pixels() {
    const int64_t taps = channels_ * kernel_h_ * kernel_w_;
    for (int64_t c = 0; c < channels_; ++c) {
      const float* plane = padded_.data() + c * padded_h_ * padded_w_;
      for (int64_t kh = 0; kh < kernel_h_; ++kh) {
        for (int64_t kw = 0; kw < kernel_w_; ++kw) {
          float* tap_lanes = panels_.data() + ((c * kernel_h_ + kh) * kernel_w_ + kw) * kLanes;
          for (int64_t oh = 0; oh < out_h_; ++oh) {
            const float* row =
                plane + (oh * stride_h_ + kh * dilation_h_) * padded_w_ + kw * dilation_w_;
            for (int64_t ow = 0, p = oh * out_w_; ow < out_w_;) {
              const int64_t lane = p % kLanes;
              const int64_t n = std::min(out_w_ - ow, kLanes - lane);
              float* to = tap_lanes + (p / kLanes) * taps * kLanes + lane;
              const float* from = row + ow * stride_w_;
              if (stride_w_ == 1) {
                int64_t i = 0;
                for (; i + 8 <= n; i += 8) std::memcpy(to + i, from + i, 8 * sizeof(float));
                for (; i < n; ++i) to[i] = from[i];
              } else {
                for (int64_t i = 0; i < n; ++i) to[i] = from[i * stride_w_];
              }
              ow += n;
              p += n;
            }
          }
        }
      }
    }
  }

  // By channels: panels_[p * taps + tap] = the input under tap `tap` of output pixel p (0 in
  // padding), rows of pixels. Per pixel, the kernel positions inside the image are found once;
  // each kernel row then copies them.
  void gather_rows(const float* image) {
    const int64_t pixels = out_h_ * out_w_;
    const int64_t taps = channels_ * kernel_h_ * kernel_w_;
    for (int64_t p = 0; p < pixels; ++p) {
      const int64_t oh = p / out_w_, ow = p % out_w_;
      const int64_t iw0 = ow * stride_w_ - pad_w_;
      // Kernel columns [lo, hi) read inside the row: 0 <= iw0 + kw * dilation < in_w.
      const int64_t lo = iw0 >= 0 ? 0 : (-iw0 + dilation_w_ - 1) / dilation_w_;
      const int64_t hi =
          iw0 >= in_w_ ? 0 : std::min(kernel_w_, (in_w_ - iw0 + dilation_w_ - 1) / dilation_w_);
      float* column = panels_.data() + p * taps;
      for (int64_t c = 0; c < channels_; ++c) {
        const float* plane = image + c * in_h_ * in_w_;
        for (int64_t kh = 0; kh < kernel_h_; ++kh) {
          float* to = column + (c * kernel_h_ + kh) * kernel_w_;
          const int64_t ih = oh * stride_h_ - pad_h_ + kh * dilation_h_;
          if (ih < 0 || ih >= in_h_ || lo >= hi) {
            std::fill(to, to + kernel_w_, 0.0f);
            continue;
          }
          const float* row = plane + ih * in_w_ + iw0;
          std::fill(to, to + lo, 0.0f);
          if (dilation_w_ == 1) {
            std::memcpy(to + lo, row + lo, sizeof(float) * static_cast<size_t>(hi - lo));
          } else {
            for (int64_t kw = lo; kw < hi; ++kw) to[kw] = row[kw * dilation_w_];
          }
          std::fill(to + hi, to + kernel_w_, 0.0f);
        }
      }
    }
  }

  int64_t batch_ = 0, channels_ = 0, in_h_ = 0, in_w_ = 0, out_c_ = 0;
  int64_t kernel_h_ = 0, kernel_w_ = 0, out_h_ = 0, out_w_ = 0;
  int64_t stride_h_ = 1, stride_w_ = 1, dilation_h_ = 1, dilation_w_ = 1, pad_h_ = 0, pad_w_ = 0;
  int64_t padded_h_ = 0, padded_w_ = 0;
  std::vector<float> padded_;       ///< By pixels: the zero-padded image.
  bool by_channels_ = false;        ///< The orientation (see the class comment).
  const float* weights_ = nullptr;  ///< W [O, C KH KW], or (by channels) W^T as panels.
  std::vector<float> own_weights_, bias_;
  std::vector<float> panels_;  ///< The gathered windows (and, by channels, Y^T after them).
};

}  // namespace

Result<std::vector<float>> column_bias(const OpDesc& desc, size_t index, int64_t n, float scale) {
  bool present =
      index < desc.inputs.size() && (desc.inputs_present.empty() || desc.inputs_present[index]);
  if (!present) return std::vector<float>();
  const runtime::Tensor* c = input_constant(desc, index);
  if (c == nullptr) return error(desc, Error::NotSupported, "bias is not constant");
  int64_t numel = c->numel();
  const std::vector<int64_t>& sizes = desc.inputs[index].sizes;
  bool row_vector = numel == n && (sizes.empty() || sizes.back() == n);
  if (!row_vector && numel != 1) {
    return error(desc, Error::NotSupported, "bias is not one value per output column");
  }
  if (desc.verify_constant) {
    KILN_RETURN_IF_ERROR(desc.verify_constant(index).with_context("create op '" + desc.op + "'"));
  }
  const auto* v = static_cast<const float*>(c->data());
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) out[static_cast<size_t>(j)] = scale * v[numel == 1 ? 0 : j];
  return out;
}

Result<const float*> pack_floats(const OpDesc& desc, size_t input, const std::string& layout,
                                 size_t count, const std::function<void(float*)>& fill,
                                 std::vector<float>& own) {
  auto packing = [&](uint8_t* data) -> Status {
    if (desc.verify_constant) {
      Status verified = desc.verify_constant(input);
      if (!verified.ok()) return verified.with_context("create op '" + desc.op + "'");
    }
    fill(reinterpret_cast<float*>(data));
    return Status();
  };
  if (desc.packed == nullptr) {
    own.assign(count, 0.0f);
    KILN_RETURN_IF_ERROR(packing(reinterpret_cast<uint8_t*>(own.data())));
    return own.data();
  }
  PackKey key;
  uint64_t known = input < desc.constant_hashes.size() ? desc.constant_hashes[input] : 0;
  const runtime::Tensor& t = *desc.constants[input];
  key.source_hash = known != 0 ? known : hash_source(t.data(), t.nbytes());
  key.layouts = (known != 0 ? "c" : "b") + layout;
  KILN_ASSIGN_OR_RETURN(const uint8_t* bytes,
                        desc.packed->get(key, count * sizeof(float), [&](uint8_t* data) {
                          std::memset(data, 0, count * sizeof(float));
                          return packing(data);
                        }));
  return reinterpret_cast<const float*>(bytes);
}

Result<const float*> pack_matmul_panels(const OpDesc& desc, size_t input, int64_t k, int64_t n,
                                        bool trans_b, double alpha, std::vector<float>& own) {
  const auto* source = static_cast<const float*>(desc.constants[input]->data());
  const float scale = static_cast<float>(alpha);
  const std::string layout =
      "kiln panels16 f32 K=" + std::to_string(k) + " N=" + std::to_string(n) +
      " transB=" + std::to_string(trans_b ? 1 : 0) + " alpha=" + std::to_string(alpha);
  return pack_floats(
      desc, input, layout, panel_floats(k, n),
      [&](float* to) {
        // B [K, N], or (transB) stored as [N, K].
        pack_panels(source, trans_b ? 1 : n, trans_b ? k : 1, k, n, scale, to);
      },
      own);
}

void small_gemm(const float* a, int64_t lda, int64_t m, int64_t k, const float* panels, int64_t n,
                float* c, int64_t ldc, const float* col_bias) {
  Epilogue e;
  e.col_bias = col_bias;
  gemm_panels(a, lda, m, k, panels, n, c, ldc, e);
}

Result<std::unique_ptr<CpuOp>> create_small_matmul(const OpDesc& desc) {
  return SmallMatMulOp::create(desc, MatMulLoops::Small);
}

Result<std::unique_ptr<CpuOp>> create_avx2_matmul(const OpDesc& desc) {
  if (!cpu_has_avx2_fma()) return error(desc, Error::NotSupported, "the CPU lacks AVX2 or FMA");
  return SmallMatMulOp::create(desc, MatMulLoops::Avx2Tiles);
}

Result<std::unique_ptr<CpuOp>> create_avx512_matmul(const OpDesc& desc) {
  return SmallMatMulOp::create(desc, MatMulLoops::Avx512Blocked);
}

Result<std::unique_ptr<CpuOp>> create_small_conv(const OpDesc& desc) {
  return SmallConvOp::create(desc);
}

}  // namespace kiln::engine::cpu::dnnl_impl
