#pragma once

#include <kiln/engine/cpu/cpu_op.h>

#include <memory>
#include <string>
#include <string_view>

namespace kiln::engine::cpu {

/// Add, Sub, Mul and Div of two f32 tensors, and Where (bool condition, f32 X and Y), whose
/// shapes are known only at run time, on loops of kiln's own: a shape-generic plan
/// (`compile::specialize_generic`) otherwise runs them on the reference kernels, which walk
/// each element through broadcast strides (GPT prefill's attention mask, a Where over
/// [1, 4, 128, 128] scores: 53 us a call there, 6 us here). Each call broadcasts its inputs
/// under numpy rules, merges the dims every input allows (as `kernels::make_broadcast_loop`),
/// and runs the innermost rows 16 lanes at a time, each input read contiguously or as one
/// repeated value. Results equal the reference kernels' bit for bit (one IEEE operation an
/// element). The rows run on one thread: at the sizes these ops have in the models measured
/// (at most a few hundred thousand elements), a call takes microseconds. Transpose (f32, its
/// `perm`) too, on `dnnl_impl::TransposeLoops` planned at each call, on up to the desc's
/// threads from a megabyte.
///
/// Thread-safety: as `CpuOp` (one op runs on one thread at a time).
class RuntimeElementwise {
 public:
  /// Whether `op` is one of the ops above.
  static bool handles(std::string_view op);

  /// `desc.op` is one of the ops above; `desc.inputs` give each input's type (sizes are
  /// ignored). Errors: NotSupported naming what is not handled (another input count, other
  /// types, post-ops).
  static runtime::Result<std::unique_ptr<RuntimeElementwise>> create(const OpDesc& desc);
  ~RuntimeElementwise();
  RuntimeElementwise(const RuntimeElementwise&) = delete;
  RuntimeElementwise& operator=(const RuntimeElementwise&) = delete;

  /// The result's sizes for inputs of `sizes` (numpy broadcasting). Errors: InvalidArgument
  /// naming both shapes and the dim that does not broadcast (as the reference kernels).
  runtime::Result<runtime::Span<const int64_t>> output_sizes(
      runtime::Span<const runtime::Tensor* const> inputs);

  /// Computes the op of `inputs` into `out`, which must already have the sizes the last
  /// `output_sizes` call returned for these inputs and be contiguous. Allocates nothing once a
  /// call of the same rank has run. Errors: InvalidArgument for a missing input or `out` of
  /// other sizes.
  runtime::Status run(runtime::Span<const runtime::Tensor* const> inputs, runtime::Tensor& out);

  /// The implementation, e.g. "kiln Add (own loops, run-time shapes)".
  std::string describe() const;

 private:
  struct Impl;
  explicit RuntimeElementwise(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::engine::cpu
