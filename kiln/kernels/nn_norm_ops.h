#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <vector>

/// Normalization operators (ONNX semantics): LayerNormalization, RMSNormalization,
/// BatchNormalization, InstanceNormalization, GroupNormalization, LRN and
/// MeanVarianceNormalization. Part of the typed API that `kernels.h` includes; the conventions
/// written there hold here. Dtypes are f32, f64, f16 and bf16; every statistic (mean, variance) is
/// accumulated in double and the results are rounded once on store, so f16 and bf16 lose nothing to
/// a half-precision sum.
namespace kiln::kernels {

// ---- LayerNormalization ------------------------------------------------------------------------

/// LayerNormalization's attributes (ONNX opset 17 defaults).
struct LayerNormOptions {
  /// The first normalized axis, in [-rank, rank); the axes `axis`..rank-1 are normalized.
  int64_t axis = -1;
  /// Added to the variance before the square root.
  double epsilon = 1e-5;
};

/// The shape of LayerNormalization's Mean and InvStdDev outputs for an input of shape `x`:
/// `x[:axis]` followed by rank - axis ones. Errors: InvalidArgument naming the attribute
/// `axis`, its value and the accepted range (also for a rank-0 input).
runtime::Result<std::vector<int64_t>> layer_norm_stats_shape(runtime::Span<const int64_t> x,
                                                             int64_t axis);

/// out = (x - mean) / sqrt(var + epsilon) * scale + bias, the mean and the (biased) variance
/// taken over the axes `axis`..rank-1 (ONNX LayerNormalization, opset 17). `scale` and `bias`
/// (null: none) broadcast unidirectionally to `x.shape[axis:]` and have `x`'s dtype; `out` has
/// `x`'s shape and dtype. `mean` and `inv_std_dev` (each optional: null) have shape
/// `layer_norm_stats_shape(...)` and any float dtype of their own (ONNX's `U`, set by
/// `stash_type`); they receive the mean and 1 / sqrt(var + epsilon).
/// Errors: InvalidType for a dtype outside f32, f64, f16, bf16 or a scale/bias dtype that
/// differs from `x`'s; InvalidArgument for the axis, a scale/bias that does not broadcast, or
/// an output of the wrong shape.
runtime::Status layer_norm(const runtime::Tensor& x, const runtime::Tensor& scale,
                           const runtime::Tensor* bias, const LayerNormOptions& options,
                           runtime::Tensor& out, runtime::Tensor* mean,
                           runtime::Tensor* inv_std_dev);

// ---- RMSNormalization --------------------------------------------------------------------------

/// RMSNormalization's attributes (ONNX opset 23 defaults).
struct RmsNormOptions {
  /// The first normalized axis, in [-rank, rank); the axes `axis`..rank-1 are normalized.
  int64_t axis = -1;
  /// Added to the mean square before the square root.
  double epsilon = 1e-5;
};

/// out = x / sqrt(mean(x^2) + epsilon) * scale, the mean of squares taken over the axes
/// `axis`..rank-1 (ONNX RMSNormalization, opset 23; what Llama and T5 call RMSNorm, which
/// exporters before it spell out and the importer rewrites into this op). `scale` broadcasts
/// unidirectionally to `x.shape[axis:]` and has `x`'s dtype; `out` has `x`'s shape and dtype.
/// Errors: InvalidType for a dtype outside f32, f64, f16, bf16 or a scale dtype that differs
/// from `x`'s; InvalidArgument for the axis (naming its range), a scale that does not
/// broadcast, or an output of the wrong shape.
runtime::Status rms_norm(const runtime::Tensor& x, const runtime::Tensor& scale,
                         const RmsNormOptions& options, runtime::Tensor& out);

// ---- BatchNormalization ------------------------------------------------------------------------

/// BatchNormalization's attributes (ONNX defaults).
struct BatchNormOptions {
  double epsilon = 1e-5;  ///< Added to the variance before the square root.
  /// Training only: running = running * momentum + batch * (1 - momentum).
  double momentum = 0.9;
  /// False: normalize with the given mean and variance (inference). True: normalize with the
  /// batch's own statistics and write the updated running mean and variance (opset 14+
  /// `training_mode` = 1).
  bool training = false;
};

/// ONNX BatchNormalization over channel dimension 1 of `x` (shape [N, C, D1, ...], rank >= 2;
/// rank 1 is read as [N]-less [C]). `scale`, `bias`, `mean` and `var` have `x`'s dtype and C
/// elements each, or, for the per-activation form (opset < 9 `spatial` = 0), one element per
/// position of `x.shape[1:]`. Inference: out = (x - mean) / sqrt(var + epsilon) * scale +
/// bias. Training: the batch mean and (biased) variance over every axis but 1 replace `mean`
/// and `var`, and `running_mean` / `running_var` (optional: null; shaped like `mean`) receive
/// `mean * momentum + batch_mean * (1 - momentum)` and the same for the variance.
/// Errors: InvalidType for dtypes; InvalidArgument for rank 0, parameter sizes, output shapes.
runtime::Status batch_norm(const runtime::Tensor& x, const runtime::Tensor& scale,
                           const runtime::Tensor& bias, const runtime::Tensor& mean,
                           const runtime::Tensor& var, const BatchNormOptions& options,
                           runtime::Tensor& out, runtime::Tensor* running_mean,
                           runtime::Tensor* running_var);

// ---- InstanceNormalization ---------------------------------------------------------------------

/// out = (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c], the statistics taken per (n, c)
/// over the spatial axes 2.. of `x` ([N, C, D1, ...], rank >= 3; ONNX InstanceNormalization,
/// `epsilon` default 1e-5). `scale` and `bias` are 1-D of C elements, `x`'s dtype.
/// Errors: InvalidType for dtypes; InvalidArgument for the rank or the parameter shapes.
runtime::Status instance_norm(const runtime::Tensor& x, const runtime::Tensor& scale,
                              const runtime::Tensor& bias, double epsilon, runtime::Tensor& out);

// ---- GroupNormalization ------------------------------------------------------------------------

/// out = (x - mean) / sqrt(var + epsilon) * scale + bias, the statistics taken per (n, group)
/// over the group's C / `groups` channels and the spatial axes 2.. of `x` ([N, C, D1, ...], rank
/// >= 3; ONNX GroupNormalization, `epsilon` default 1e-5). `scale` and `bias` are 1-D of `x`'s
/// dtype, each of C elements (one per channel, opset 21) or of `groups` (one per group, opset
/// 18). Errors: InvalidType for dtypes; InvalidArgument for the rank, a `groups` that does not
/// divide C, or the parameter shapes.
runtime::Status group_norm(const runtime::Tensor& x, const runtime::Tensor& scale,
                           const runtime::Tensor& bias, int64_t groups, double epsilon,
                           runtime::Tensor& out);

// ---- LRN ---------------------------------------------------------------------------------------

/// LRN's attributes (ONNX defaults; `size` is required).
struct LrnOptions {
  double alpha = 1e-4;
  double beta = 0.75;
  double bias = 1.0;
  int64_t size = 0;  ///< Channels summed over, >= 1.
};

/// Local response normalization across channels (ONNX LRN): out = x / (bias + alpha / size *
/// square_sum) ^ beta, square_sum summing x^2 over channels c - floor((size - 1) / 2) ..
/// c + ceil((size - 1) / 2), clipped to [0, C). `x` is [N, C, D1, ...], rank >= 3.
/// Errors: InvalidType for dtypes; InvalidArgument for the rank or `size` < 1.
runtime::Status lrn(const runtime::Tensor& x, const LrnOptions& options, runtime::Tensor& out);

// ---- MeanVarianceNormalization -----------------------------------------------------------------

/// out = (x - mean) / (sqrt(var) + 1e-9), the mean and (biased) variance taken over `axes`
/// (ONNX MeanVarianceNormalization, default axes [0, 2, 3]; negative axes count from the end).
/// Errors: InvalidType for dtypes; InvalidArgument for an axis out of range or repeated.
runtime::Status mean_variance_normalization(const runtime::Tensor& x,
                                            runtime::Span<const int64_t> axes,
                                            runtime::Tensor& out);

}  // namespace kiln::kernels
