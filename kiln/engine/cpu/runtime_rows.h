#pragma once

#include <kiln/engine/cpu/cpu_op.h>

#include <memory>
#include <string>
#include <string_view>

namespace kiln::engine::cpu {

/// Softmax, LogSoftmax, LayerNormalization, RMSNormalization, Instance- and GroupNormalization
/// whose shapes are known only at run time, on loops of kiln's own (vectorized, rows split over the
/// op's threads): oneDNN's softmax and layer normalization take no run-time dimensions, so
/// without this a shape-generic plan (`compile::specialize_generic`) runs them on the reference
/// kernels, several times slower.
/// - Softmax, LogSoftmax (opset 13): along the last axis, f32.
/// - LayerNormalization: over the dims from `axis` to the end, f32, with a constant Scale and
///   an optional constant B of the normalized dims (leading 1s aside), in float statistics
///   (`stash_type` 1); no Mean or InvStdDev output.
/// - RMSNormalization (ONNX opset 23, which the importer rewrites Llama's and T5's RMSNorm
///   into): as LayerNormalization, without the mean and without B. oneDNN 2.6 has no RMS
///   normalization, so plans of known shapes run it on these loops too (a CpuOp over them,
///   `row_norm_op.cpp`).
/// - InstanceNormalization: each (n, c) row of an [N, C, D1, ...] f32 tensor over its spatial
///   axes, with constant Scale and B of C values (one multiply-add an element); oneDNN 2.6's
///   batch normalization computes such statistics fast only in blocked layouts, so plans of
///   known shapes run it on these loops too (`row_norm_op.cpp`).
/// - GroupNormalization (which the importer rewrites PyTorch's GroupNorm export into): each
///   (n, group) row of `num_groups` per sample over the group's channels and spatial axes, with
///   constant scale and bias of C values (a scale of one value per group, opset 18's, runs on
///   the reference kernel); plans of known shapes too (`row_norm_op.cpp`).
/// Instance and group normalizations take fused activations (`desc.post_ops`: Relu, Clip,
/// Sigmoid, Tanh, Linear, Swish), applied as each row is stored, or after the reference kernel
/// where that runs the call.
/// A call the loops do not cover (an axis that is not the last for Softmax or lies outside the
/// input's rank, a non-contiguous tensor, a Scale or B that broadcasts) runs on the reference
/// kernel, with its semantics and errors. Results match the reference kernels' to about 1e-6
/// relative (exp by polynomial, float sums in 16 lanes).
///
/// Thread-safety: as `CpuOp` (one op runs on one thread at a time).
class RuntimeRows {
 public:
  /// Whether `op` is one of the ops above.
  static bool handles(std::string_view op);

  /// `desc.op` is one of the ops above. `desc.inputs[0].sizes` gives only the input's rank
  /// (any values), or is empty when the rank is known only at run time. The normalizations'
  /// `desc.constants[1]` (and `[2]`, when B is present) are their Scale and B, read at each run:
  /// they must outlive the op. Errors: NotSupported naming what is not handled (an input that
  /// is not f32, an axis other than the last for Softmax of a known rank, `stash_type` 11, a
  /// Mean or InvStdDev output, a Scale or B that is not a constant, post-ops other than the
  /// activations above or on other ops); InvalidArgument for an axis outside a known rank, an
  /// instance or group normalization of a known rank under 3, a `num_groups` missing or under
  /// 1, or a missing input.
  static runtime::Result<std::unique_ptr<RuntimeRows>> create(const OpDesc& desc);
  ~RuntimeRows();
  RuntimeRows(const RuntimeRows&) = delete;
  RuntimeRows& operator=(const RuntimeRows&) = delete;

  /// Computes the op of `x` into `out`, which must already have x's sizes. Errors:
  /// InvalidArgument for `x` of another rank than a rank known at creation, or `out` of other
  /// sizes; those of the reference kernel where it runs.
  runtime::Status run(const runtime::Tensor& x, runtime::Tensor& out);

  /// The implementation, e.g. "kiln rows (run-time shapes): softmax over the last axis".
  std::string describe() const;

 private:
  struct Impl;
  explicit RuntimeRows(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::engine::cpu
