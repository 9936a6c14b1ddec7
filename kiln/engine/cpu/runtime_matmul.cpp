// RuntimeMatMul: MatMuls on oneDNN matmul primitives whose dims are DNNL_RUNTIME_DIM_VAL, so
// every shape runs on the same primitive (shape-generic plans). A constant B runs on kiln's
// loops instead (avx2_gemm.cpp's AVX2 tiles; on AVX-512, blocked_gemm.cpp's tiles over oneDNN's
// blocked layout, the packing the per-shape plans of the model read too), which take
// any number of rows as they come: oneDNN's run-time-dimension matmul is its gemm:jit, which
// repacks B at every call and generates its kernel set at a process's first call (30-50 ms).
// A B computed at run time (attention's products) takes the same loops, each batch's B packed
// at the call (on AVX-512 from 64 columns into the blocked layout, else into panels), so that a
// shape-generic plan calls no gemm:jit at all.

#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/blocked_gemv.h>
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/loop_epilogue.h>
#include <kiln/engine/cpu/runtime_matmul.h>
#include <kiln/kernels/kernels.h>

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

namespace kiln::engine::cpu {

using dnnl::memory;
using runtime::Error;
using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

// Below this many multiply-adds a product runs on one thread (as `op_threads` decides for
// static ops: about 10 us of single-thread work at 100 GFLOP/s).
constexpr double kMinParallelMacs = 1e6;
// A constant B of at least this many floats is read on every thread asked even for a few rows
// (a decoder's token, bound by reading B from memory), as `op_threads` counts the elements an op
// touches: 2 x 10^5 floats take about 20 us at 10 per ns.
constexpr double kMinParallelBFloats = 2e5;
// At most this many rows of a constant B in oneDNN's blocked layout run on `gemv_blocked`, which
// reads each block of B once for all of them (the per-shape plans' streaming MatMuls).
constexpr int64_t kGemvRows = 4;

const char* const kRunContext = "run op 'MatMul' (oneDNN, run-time shapes)";

// A plain row-major descriptor of `rank` run-time dims.
memory::desc runtime_md(size_t rank) {
  memory::dims dims(rank, DNNL_RUNTIME_DIM_VAL);
  memory::format_tag tag = rank == 2   ? memory::format_tag::ab
                           : rank == 3 ? memory::format_tag::abc
                           : rank == 4 ? memory::format_tag::abcd
                                       : memory::format_tag::abcde;
  return memory::desc(dims, memory::data_type::f32, tag);
}

}  // namespace

class RuntimeMatMulImpl {
 public:
  static constexpr size_t kMaxRank = 5;
  bool constant_b = true;
  int64_t k = 0, n = 0;  ///< Constant B only.
  int num_threads = 0;
  /// Constant B: what its primitives are made from; their weights are held as `weights_md`.
  std::optional<dnnl::matmul::desc> op_desc;
  dnnl::primitive_attr attr;
  memory::desc weights_md;
  /// The primitives, made on first use: [rank][0] runs on one thread, [rank][1] on
  /// `num_threads` (oneDNN fixes a primitive's thread count when it is made). A constant B's
  /// are at rank 2; a B at run time has one per rank (2 to kMaxRank) of the calls (ranks of
  /// computed values are often unknown until then).
  std::array<std::array<std::optional<dnnl::matmul>, 2>, kMaxRank + 1> primitives;
  memory weights;
  memory bias;  ///< Empty when there is none.
  std::string describe;
  /// Constant B on kiln's AVX2 loops (`cpu::avx2_own_gemm`): B's panels, the bias (empty:
  /// none) and the post-ops; no primitives then. On AVX-512 (`wide`), `panels` is B in
  /// oneDNN's blocked layout (`blocked_b_md`), held in `weights`: the packing the model's
  /// per-shape plans read (oneDNN's blocked matmul, `gemv_blocked`), so that one copy serves all.
  const float* panels = nullptr;
  std::vector<float> own_panels, bias_values;
  std::vector<PostOp> post_ops;
  bool wide = false;  ///< On `avx512_gemm` (`avx512_own_runtime_gemm`), else `avx2_gemm`.
  /// B at run time on kiln's loops (`wide` as above): one buffer of panels per thread, grown
  /// to the largest B seen (a shape seen before allocates nothing).
  bool own_batched = false;
  std::vector<std::vector<float>> b_panels;
  /// B at run time given transposed (its last two axes swapped, `OpDesc::b_transposed`): the
  /// rank the Transpose read as B's was declared for (its perm's length).
  bool b_transposed = false;
  size_t b_rank = 0;
  /// B at run time: the product's scale (a fused Linear post-op of beta 0, attention's
  /// 1 / sqrt(d)), applied to B as it is packed, else to the result.
  float scale = 1.0f;
};

RuntimeMatMul::RuntimeMatMul(std::unique_ptr<RuntimeMatMulImpl> impl) : impl_(std::move(impl)) {}
RuntimeMatMul::~RuntimeMatMul() = default;
bool RuntimeMatMul::constant_b() const { return impl_->constant_b; }

namespace {

Status create_constant_b(const OpDesc& desc, const Tensor& b, RuntimeMatMulImpl& impl) {
  using namespace dnnl_impl;  // NOLINT(google-build-using-namespace): the provider's helpers
  if (b.dim() != 2 || b.size(0) == 0 || b.size(1) == 0) {
    return error(desc, Error::NotSupported,
                 "a run-time-shape MatMul needs a non-empty 2-D constant B (got B of shape " +
                     runtime::shape_to_string(b.sizes()) + ")");
  }
  for (const PostOp& post_op : desc.post_ops) {
    if (post_op.kind == PostOpKind::AddResidual) {
      return error(desc, Error::NotSupported,
                   "a run-time-shape MatMul takes no residual post-op (expected element-wise "
                   "ones only)");
    }
  }
  impl.k = b.size(0);
  impl.n = b.size(1);
  const bool has_bias = desc.inputs.size() > 2 && input_present(desc, 2);
  const Tensor* constant_bias = has_bias ? input_constant(desc, 2) : nullptr;
  // (A bias that is not N constant values gets its error below.)
  const bool wide = avx512_own_runtime_gemm();
  if ((avx2_own_gemm() || wide) && all_float(desc) && supported_post_ops(desc, true) &&
      (!has_bias || (constant_bias != nullptr && constant_bias->numel() == impl.n))) {
    if (has_bias) {
      KILN_ASSIGN_OR_RETURN(impl.bias_values, column_bias(desc, 2, impl.n, 1.0f));
    }
    if (wide) {
      // B's bytes described as oneDNN's MatMul of a per-shape plan describes them
      // (dnnl_matmul.cpp), so that the packing's key is the one it makes.
      KILN_ASSIGN_OR_RETURN(impl.weights, pack_constant(desc, 1, plain_md(b.sizes()), b.data(),
                                                        blocked_b_md(impl.k, impl.n)));
      impl.panels = static_cast<const float*>(impl.weights.get_data_handle());
    } else {
      KILN_ASSIGN_OR_RETURN(
          impl.panels, pack_matmul_panels(desc, 1, impl.k, impl.n, false, 1.0, impl.own_panels));
    }
    impl.post_ops = desc.post_ops;
    impl.wide = wide;
    impl.describe = wide ? "kiln AVX-512 MatMul (run-time rows; 6 x 64 tiles over oneDNN's "
                           "blocked B (BA16a64b), packed once; up to 4 rows: blocked GEMV)"
                         : "kiln AVX2 MatMul (run-time rows; 6 x 16 tiles over B's panels, "
                           "packed once)";
    return Status();
  }
  const memory::dim rows = DNNL_RUNTIME_DIM_VAL;
  memory::desc src_md({rows, impl.k}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc dst_md({rows, impl.n}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b_md = plain_md(b.sizes());
  memory::desc b_any({impl.k, impl.n}, memory::data_type::f32, memory::format_tag::any);
  std::optional<memory::desc> bias_md;
  const Tensor* bias = nullptr;
  if (desc.inputs.size() > 2 && input_present(desc, 2)) {
    bias = input_constant(desc, 2);
    if (bias == nullptr) {
      return error(desc, Error::NotSupported, "a run-time-shape MatMul needs a constant bias");
    }
    if (bias->numel() != impl.n) {
      return error(desc, Error::InvalidArgument,
                   "bias (input 2) has " + std::to_string(bias->numel()) +
                       " elements (expected N = " + std::to_string(impl.n) + ")");
    }
    bias_md = plain_md(std::vector<int64_t>{1, impl.n});
  }
  dnnl::post_ops ops;
  KILN_ASSIGN_OR_RETURN(std::vector<int> binary, append_post_ops(desc, dst_md, false, ops));
  (void)binary;               // none: residuals are refused above
  dnnl::primitive_attr attr;  // library-managed scratchpad: its size depends on the rows
  attr.set_post_ops(ops);
  auto op_desc = bias_md ? dnnl::matmul::desc(src_md, b_any, *bias_md, dst_md)
                         : dnnl::matmul::desc(src_md, b_any, dst_md);
  dnnl::matmul::primitive_desc pd(op_desc, attr, cpu_engine());
  // Made under ThreadScope(desc.num_threads) (create): the primitive of that thread count.
  impl.primitives[2][desc.num_threads == 1 ? 0 : 1] = dnnl::matmul(pd);
  impl.op_desc = op_desc;
  impl.attr = attr;
  impl.weights_md = pd.weights_desc();
  impl.describe = describe_pd(pd) + " (run-time rows) wei:" + format_of(pd.weights_desc());
  if (pd.weights_desc() == b_md) {
    // Taken plain: read in place, after the check a packing would have made.
    if (desc.verify_constant) {
      KILN_RETURN_IF_ERROR(desc.verify_constant(1).with_context("create op 'MatMul'"));
    }
    impl.weights = wrap(b_md, b.data());
  } else {
    KILN_ASSIGN_OR_RETURN(impl.weights, pack_constant(desc, 1, b_md, b.data(), pd.weights_desc()));
  }
  if (bias_md) {
    impl.bias = memory(*bias_md, cpu_engine());
    std::memcpy(impl.bias.get_data_handle(), bias->data(), bias->nbytes());
  }
  return Status();
}

Status create_runtime_b(const OpDesc& desc, RuntimeMatMulImpl& impl) {
  using namespace dnnl_impl;  // NOLINT(google-build-using-namespace): the provider's helpers
  const bool scaled = desc.post_ops.size() == 1 && desc.post_ops[0].kind == PostOpKind::Linear &&
                      desc.post_ops[0].beta == 0.0f;
  if (desc.inputs.size() != 2 || (!desc.post_ops.empty() && !scaled)) {
    return error(desc, Error::NotSupported,
                 "a run-time-shape MatMul of two computed inputs takes no bias, and no post-op "
                 "but a scale (Linear of beta 0)");
  }
  if (scaled) impl.scale = desc.post_ops[0].alpha;
  impl.constant_b = false;
  impl.wide = avx512_own_runtime_gemm();
  if (desc.b_transposed) {
    if (!impl.wide && !avx2_own_gemm()) {
      return error(desc, Error::NotSupported,
                   "B read transposed (kiln's loops only, and this CPU runs oneDNN's)");
    }
    if (desc.inputs[1].sizes.size() < 2 ||
        desc.inputs[1].sizes.size() > RuntimeMatMulImpl::kMaxRank) {
      return error(desc, Error::NotSupported, "B read transposed needs a rank from 2 to 5");
    }
    impl.b_transposed = true;
    impl.b_rank = desc.inputs[1].sizes.size();
  }
  if (impl.wide || avx2_own_gemm()) {
    impl.own_batched = true;
    impl.describe = std::string("kiln ") + (impl.wide ? "AVX-512" : "AVX2") +
                    " MatMul (run-time shapes; each batch's B packed at the call" +
                    (impl.b_transposed ? ", read transposed)" : ")");
    return Status();
  }
  impl.describe = "oneDNN matmul (run-time shapes; primitive per rank, made on first use)";
  return Status();
}

}  // namespace

Result<std::unique_ptr<RuntimeMatMul>> RuntimeMatMul::create(const OpDesc& desc) {
  using namespace dnnl_impl;  // NOLINT(google-build-using-namespace): the provider's helpers
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3));
  if (desc.op != "MatMul") {
    return error(desc, Error::NotSupported, "a run-time-shape op must be a MatMul");
  }
  auto impl = std::make_unique<RuntimeMatMulImpl>();
  impl->num_threads = desc.num_threads;
  try {
    ThreadScope threads(desc.num_threads);
    const Tensor* b = input_constant(desc, 1);
    KILN_RETURN_IF_ERROR(b != nullptr ? create_constant_b(desc, *b, *impl)
                                      : create_runtime_b(desc, *impl));
  } catch (const dnnl::error& e) {
    return error(desc, Error::Internal, std::string("a run-time-shape matmul: ") + e.what());
  }
  return std::unique_ptr<RuntimeMatMul>(new RuntimeMatMul(std::move(impl)));
}

namespace {

// The primitive for calls of `rank` on one thread or on `impl.num_threads`, made on first use
// under that thread count (oneDNN sizes a primitive's parallel regions when it is made).
Result<dnnl::matmul*> primitive_for(RuntimeMatMulImpl& impl, size_t rank, bool one_thread) {
  using namespace dnnl_impl;  // NOLINT(google-build-using-namespace): the provider's helpers
  std::optional<dnnl::matmul>& slot = impl.primitives[rank][one_thread ? 0 : 1];
  if (slot) return &*slot;
  ThreadScope threads(one_thread ? 1 : impl.num_threads);
  try {
    if (impl.constant_b) {
      dnnl::matmul::primitive_desc pd(*impl.op_desc, impl.attr, cpu_engine());
      // The weights were laid out for the first primitive's layout: another thread count
      // that wants another layout uses that primitive instead.
      if (pd.weights_desc() != impl.weights_md) {
        std::optional<dnnl::matmul>& other = impl.primitives[rank][one_thread ? 1 : 0];
        if (other) return &*other;
      }
      slot = dnnl::matmul(pd);
    } else {
      memory::desc md = runtime_md(rank);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), dnnl::primitive_attr(),
                                      cpu_engine());
      slot = dnnl::matmul(pd);
    }
  } catch (const dnnl::error& e) {
    return Status(Error::Internal, std::string(kRunContext) + ": " + e.what());
  }
  return &*slot;
}

// values[0, count) *= s (nothing for 1).
void scale_values(float* values, int64_t count, float s) {
  if (s == 1.0f) return;
  for (int64_t i = 0; i < count; ++i) values[i] *= s;
}

// C = A x B for each of `batch` matrices A [m, k], B [k, n], C [m, n] stored one after another,
// on kiln's loops: each B packed, then `avx512_gemm_blocked`, `avx512_gemm` or `avx2_gemm` (with
// AVX-512 and at most kSmallRows rows, B read in place by `avx512_small_rows` instead). With at
// least as many batches as threads, each thread takes whole batches; else the batches go one at a
// time over all threads.
void own_batched(RuntimeMatMulImpl& impl, const float* a, const float* b, float* c, int64_t batch,
                 int64_t m, int64_t k, int64_t n, int threads) {
  using namespace dnnl_impl;  // NOLINT(google-build-using-namespace): the provider's helpers
  const int teams = batch >= threads ? threads : 1;
  const bool bt = impl.b_transposed;   // each batch's B stored as B^T [n, k]
  if (impl.wide && m <= kSmallRows) {  // a decoder step's attention: B read in place
#pragma omp parallel for num_threads(teams) schedule(static) if (teams > 1)
    for (int64_t i = 0; i < batch; ++i) {
      if (bt) {
        avx512_small_rows_bt(a + i * m * k, k, m, k, b + i * k * n, k, n, c + i * m * n, n);
      } else {
        avx512_small_rows(a + i * m * k, k, m, k, b + i * k * n, n, n, c + i * m * n, n);
      }
      scale_values(c + i * m * n, m * n, impl.scale);
    }
    return;
  }
  // From 64 columns on AVX-512, B in oneDNN's blocked layout for `avx512_gemm_blocked`'s
  // tiles of 6 rows by 64 columns, which keep their pointers to A in registers (the 12-row
  // tiles over panels ran attention's scores, K of 32, at 0.8 x oneDNN's batched matmul).
  const bool blocked = impl.wide && n >= 64;
  const size_t floats = blocked ? blocked_floats(k, n) : panel_floats(k, n);
  if (impl.b_panels.size() < static_cast<size_t>(teams)) impl.b_panels.resize(teams);
  for (int t = 0; t < teams; ++t) {
    if (impl.b_panels[t].size() < floats) impl.b_panels[t].resize(floats);
  }
  const Epilogue none;
  auto gemm = blocked ? avx512_gemm_blocked : impl.wide ? avx512_gemm : avx2_gemm;
  auto pack = blocked ? pack_blocked : pack_panels;
  auto one = [&](int64_t i, float* panels, int gemm_threads) {
    // B [k, n], or B^T [n, k]: B's element (p, j) at p * n + j, or at j * k + p.
    pack(b + i * k * n, bt ? 1 : n, bt ? k : 1, k, n, impl.scale, panels);
    gemm(a + i * m * k, k, m, k, panels, n, c + i * m * n, n, none, gemm_threads);
  };
  if (teams == 1) {
    for (int64_t i = 0; i < batch; ++i) one(i, impl.b_panels[0].data(), threads);
    return;
  }
#pragma omp parallel for num_threads(teams) schedule(static)
  for (int64_t i = 0; i < batch; ++i) one(i, impl.b_panels[omp_get_thread_num()].data(), 1);
}

// The reference kernel on B^T given (`bt`, last two axes swapped): B copied out first, of
// sizes `b_dims`. For the calls kiln's loops do not take (broadcast batch dims, K of 0).
Status reference_transposed_b(const Tensor& a, const Tensor& bt, const std::vector<int64_t>& b_dims,
                              Tensor& out) {
  const size_t rank = b_dims.size();
  const int64_t k = b_dims[rank - 2], n = b_dims[rank - 1];
  const int64_t batch = k * n == 0 ? 0 : bt.numel() / (k * n);
  std::vector<float> b(static_cast<size_t>(bt.numel()));
  const float* from = bt.data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) b[(i * k + p) * n + j] = from[(i * n + j) * k + p];
    }
  }
  Tensor b_tensor(runtime::ScalarType::Float32, b_dims, b.data());
  return kernels::matmul(a, b_tensor, out).with_context(kRunContext);
}

}  // namespace

Result<std::vector<int64_t>> RuntimeMatMul::output_sizes(runtime::Span<const int64_t> a,
                                                         runtime::Span<const int64_t> b) const {
  if (!impl_->constant_b) {
    if (impl_->b_transposed) {
      if (b.size() != impl_->b_rank) {
        return Status(Error::InvalidArgument,
                      std::string(kRunContext) + ": B^T (read transposed) has shape " +
                          runtime::shape_to_string(b) + " (expected rank " +
                          std::to_string(impl_->b_rank) + ", as its Transpose's perm)");
      }
      std::vector<int64_t> swapped(b.begin(), b.end());
      std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
      auto shape = kernels::matmul_shape(a, swapped);
      if (!shape.ok()) return shape.status().with_context(kRunContext);
      return shape;
    }
    auto shape = kernels::matmul_shape(a, b);
    if (!shape.ok()) return shape.status().with_context(kRunContext);
    return shape;
  }
  if (a.empty() || a[a.size() - 1] != impl_->k) {
    return Status(Error::InvalidArgument,
                  std::string(kRunContext) + ": A has shape " + runtime::shape_to_string(a) +
                      " (expected [..., " + std::to_string(impl_->k) + "], B being [" +
                      std::to_string(impl_->k) + ", " + std::to_string(impl_->n) + "])");
  }
  std::vector<int64_t> out(a.begin(), a.end());
  out.back() = impl_->n;
  return out;
}

Status RuntimeMatMul::run(const Tensor& a, const Tensor* b, Tensor& out) {
  using namespace dnnl_impl;  // NOLINT(google-build-using-namespace): the provider's helpers
  if (!impl_->constant_b && b == nullptr) {
    return Status(Error::InvalidArgument, std::string(kRunContext) + ": B is missing");
  }
  runtime::Span<const int64_t> b_sizes = b != nullptr ? b->sizes() : runtime::Span<const int64_t>();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> expected, output_sizes(a.sizes(), b_sizes));
  if (!std::equal(expected.begin(), expected.end(), out.sizes().begin(), out.sizes().end())) {
    return Status(Error::InvalidArgument, std::string(kRunContext) + ": output has shape " +
                                              runtime::shape_to_string(out.sizes()) +
                                              " (expected " + runtime::shape_to_string(expected) +
                                              ")");
  }
  if (out.numel() == 0) return Status();
  std::vector<int64_t> a_dims, b_dims, d_dims;
  if (impl_->constant_b) {
    const int64_t rows = a.numel() / impl_->k;  // K > 0 (create)
    a_dims = {rows, impl_->k};
    d_dims = {rows, impl_->n};
  } else {
    a_dims.assign(a.sizes().begin(), a.sizes().end());
    b_dims.assign(b->sizes().begin(), b->sizes().end());
    if (impl_->b_transposed) std::swap(b_dims[b_dims.size() - 1], b_dims[b_dims.size() - 2]);
    d_dims = expected;
    // Broadcast batch dims, ranks under 2 or over 5, or an empty sum: the reference kernel.
    size_t rank = a_dims.size();
    bool same_batch = rank >= 2 && rank <= RuntimeMatMulImpl::kMaxRank && b_dims.size() == rank &&
                      std::equal(a_dims.begin(), a_dims.end() - 2, b_dims.begin());
    if (!same_batch || a_dims.back() == 0) {
      KILN_RETURN_IF_ERROR(impl_->b_transposed
                               ? reference_transposed_b(a, *b, b_dims, out)
                               : kernels::matmul(a, *b, out).with_context(kRunContext));
      scale_values(out.mutable_data_ptr<float>(), out.numel(), impl_->scale);
      return Status();
    }
  }
  int64_t k = a_dims.back();
  double macs = static_cast<double>(out.numel()) * static_cast<double>(k);
  const bool streams_b =
      impl_->constant_b &&
      static_cast<double>(impl_->k) * static_cast<double>(impl_->n) >= kMinParallelBFloats;
  const bool one_thread = (macs < kMinParallelMacs && !streams_b) || impl_->num_threads == 1;
  // Threads for kiln's loops (oneDNN's primitives are made for theirs).
  const int threads =
      one_thread ? 1 : (impl_->num_threads > 0 ? impl_->num_threads : omp_get_max_threads());
  if (impl_->own_batched) {
    const size_t rank = a_dims.size();
    const int64_t m = a_dims[rank - 2], n = b_dims[rank - 1];
    own_batched(*impl_, a.data_ptr<float>(), b->data_ptr<float>(), out.mutable_data_ptr<float>(),
                out.numel() / (m * n), m, k, n, threads);
    return Status();
  }
  if (impl_->panels != nullptr) {
    Epilogue e;
    e.col_bias = impl_->bias_values.empty() ? nullptr : impl_->bias_values.data();
    e.ops = impl_->post_ops.data();
    e.num_ops = impl_->post_ops.size();
    const int64_t rows = a_dims[0];
    float* c = out.mutable_data_ptr<float>();
    if (!impl_->wide) {
      avx2_gemm(a.data_ptr<float>(), k, rows, k, impl_->panels, impl_->n, c, impl_->n, e, threads);
    } else if (rows <= kGemvRows) {
      gemv_blocked(a.data_ptr<float>(), k, rows, k, impl_->panels, impl_->n, c, impl_->n, e,
                   threads);
    } else {
      avx512_gemm_blocked(a.data_ptr<float>(), k, rows, k, impl_->panels, impl_->n, c, impl_->n, e,
                          threads);
    }
    return Status();
  }
  KILN_ASSIGN_OR_RETURN(dnnl::matmul * primitive,
                        primitive_for(*impl_, impl_->constant_b ? 2 : a_dims.size(), one_thread));
  ThreadScope thread_scope(one_thread ? 1 : impl_->num_threads);
  try {
    memory src = wrap(plain_md(a_dims), a.data());
    memory dst = wrap(plain_md(d_dims), out.mutable_data());
    memory weights = impl_->constant_b ? impl_->weights : wrap(plain_md(b_dims), b->data());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (impl_->bias) args[DNNL_ARG_BIAS] = impl_->bias;
    primitive->execute(cpu_stream(), args);
    cpu_stream().wait();
  } catch (const dnnl::error& e) {
    return Status(Error::Internal, std::string(kRunContext) + ": " + e.what());
  }
  if (!impl_->constant_b) scale_values(out.mutable_data_ptr<float>(), out.numel(), impl_->scale);
  return Status();
}

Status RuntimeMatMul::warm_up() {
  if (!impl_->constant_b || impl_->panels != nullptr) return Status();  // nothing generated
  // Two rows: oneDNN makes its matrix-vector kernels for one row and its whole gemm kernel
  // set (which covers one row too) for more.
  constexpr int64_t kRows = 2;
  std::vector<float> a(static_cast<size_t>(kRows * impl_->k), 0.0f);
  std::vector<float> out(static_cast<size_t>(kRows * impl_->n));
  Tensor a_tensor(runtime::ScalarType::Float32, {kRows, impl_->k}, a.data());
  Tensor out_tensor(runtime::ScalarType::Float32, {kRows, impl_->n}, out.data());
  return run(a_tensor, nullptr, out_tensor);
}

std::string RuntimeMatMul::describe() const { return impl_->describe; }

std::string RuntimeMatMul::provider() const {
  return impl_->panels != nullptr || impl_->own_batched ? "kiln" : "onednn";
}

}  // namespace kiln::engine::cpu
