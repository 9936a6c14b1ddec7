#pragma once

#include <kiln/engine/cpu/cpu_op.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::engine::cpu {

class RuntimeMatMulImpl;

/// A MatMul whose shapes are known only at run time, on one oneDNN primitive whose dims are
/// run-time dimensions (DNNL_RUNTIME_DIM_VAL), so one op serves every shape and a shape-generic
/// plan (`compile::specialize_generic`) runs its MatMuls on oneDNN without creating kernels per
/// shape. Two forms:
/// - constant B: `A [..., K] x B [K, N]`, plus an optional constant bias [N] and element-wise
///   post-ops; the rows of A are the run-time dimension. B is read in place when the primitive
///   takes it plain (oneDNN's run-time-dimension matmul does on x86-64), else packed once
///   through `OpDesc::packed`. Where kernel selection takes kiln's AVX2 MatMul
///   (`avx2_own_gemm`: no AVX-512) or its AVX-512 one (`avx512_own_runtime_gemm`), it runs
///   there instead, B packed once: into kiln's panels (AVX2), or into oneDNN's blocked layout
///   (`blocked_b_md`, AVX-512), the packing of the model's per-shape plans, shared with them
///   through `OpDesc::packed`; up to 4 rows then run on the streaming loops (`gemv_blocked`).
/// - B computed at run time (attention's products): A and B of one rank r >= 2, every dim at
///   run time. A call whose batch dims differ (broadcasting) runs on the reference kernel.
///   With `OpDesc::b_transposed` (kiln's loops only), input 1 is B^T, its last two axes
///   swapped (a Transpose folded into the MatMul: attention's keys as stored), of the rank
///   `desc.inputs[1].sizes` has.
///
/// Thread-safety: as `CpuOp` (one op runs on one thread at a time).
class RuntimeMatMul {
 public:
  /// `desc.op` is "MatMul". Constant B: `desc.constants[1]` is B, of rank 2 (A's sizes are
  /// ignored), and `desc.inputs[2]`, when present, a constant bias of N elements; `desc.post_ops`
  /// may hold element-wise kinds. B at run time: `desc.inputs[0].sizes` and
  /// `desc.inputs[1].sizes` give only the ranks (any values), equal and at least 2; no bias,
  /// and no post-op but one Linear of beta 0 (a scale: attention's 1 / sqrt(d)). Errors:
  /// NotSupported naming what is not handled (other ranks, a residual post-op, a non-constant bias,
  /// an empty B); InvalidArgument for a bias of the wrong size; Internal when oneDNN fails.
  static runtime::Result<std::unique_ptr<RuntimeMatMul>> create(const OpDesc& desc);
  ~RuntimeMatMul();
  RuntimeMatMul(const RuntimeMatMul&) = delete;
  RuntimeMatMul& operator=(const RuntimeMatMul&) = delete;

  /// Whether B is a constant (the first form).
  bool constant_b() const;

  /// The result's sizes for A of sizes `a` and (B at run time) B of sizes `b`: `[..., N]` for
  /// `[..., K]` (`[N]` for `[K]`) with a constant B; numpy's MatMul shape otherwise. Errors:
  /// InvalidArgument naming the shapes and what was expected.
  runtime::Result<std::vector<int64_t>> output_sizes(runtime::Span<const int64_t> a,
                                                     runtime::Span<const int64_t> b = {}) const;

  /// Computes `a x B (+ bias, post-ops)` into `out`, which must already have
  /// `output_sizes(...)` and be contiguous; `b` is null for a constant B. Errors: as
  /// `output_sizes`; InvalidArgument when `out` has other sizes or `b` is missing; Internal
  /// when oneDNN fails.
  runtime::Status run(const runtime::Tensor& a, const runtime::Tensor* b, runtime::Tensor& out);

  /// Constant B: runs the primitive once on two rows of zeros, so that oneDNN generates the
  /// kernels it makes on a first execution (its gemm kernel set, once per process: 35-55 ms
  /// here) now rather than in a caller's first run. Nothing for a B at run time. Errors:
  /// Internal when oneDNN fails.
  runtime::Status warm_up();

  /// The implementation, e.g. "oneDNN gemm:jit (run-time rows) wei:ab".
  std::string describe() const;
  /// Whose kernels run it: "kiln" (its AVX2 or AVX-512 loops) or "onednn".
  std::string provider() const;

 private:
  explicit RuntimeMatMul(std::unique_ptr<RuntimeMatMulImpl> impl);
  std::unique_ptr<RuntimeMatMulImpl> impl_;
};

}  // namespace kiln::engine::cpu
