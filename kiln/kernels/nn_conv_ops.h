#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

/// Convolution and pooling (ONNX Conv, ConvInteger, ConvTranspose, MaxPool, AveragePool,
/// LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool, MaxUnpool). Part of the typed API
/// that `kernels.h` includes; its conventions hold here.
///
/// Layout is NCHW: an input of rank 2 + S has batch N, channels C and S spatial axes; S is 1,
/// 2 or 3 (other ranks give NotSupported). Lists of per-axis attributes (`strides`,
/// `dilations`, `kernel_shape`) have S entries, `pads` has 2 * S ([begin..., end...]); an
/// empty list means the ONNX default (1 for strides and dilations, 0 for pads). Errors are
/// InvalidArgument naming the attribute, its value and what was expected.
namespace kiln::kernels {

/// ONNX `auto_pad`. With anything but NotSet, `pads` is ignored.
enum class AutoPad {
  NotSet,     ///< Explicit `pads` (default; also the empty string).
  SameUpper,  ///< Output size ceil(in / stride); an odd total padding puts the extra at the end.
  SameLower,  ///< As SameUpper, the extra padding at the beginning.
  Valid,      ///< No padding.
};

/// Parses an `auto_pad` string ("NOTSET", "", "SAME_UPPER", "SAME_LOWER", "VALID").
/// Errors: InvalidArgument naming `op`, the value and the accepted ones.
runtime::Result<AutoPad> parse_auto_pad(std::string_view op, std::string_view value);

// ---- Conv, ConvInteger -----------------------------------------------------------------------

/// Conv's attributes (ONNX defaults).
struct ConvOptions {
  std::vector<int64_t> kernel_shape;  ///< Empty: W's spatial sizes; else must equal them.
  std::vector<int64_t> strides;       ///< Empty: all 1.
  std::vector<int64_t> dilations;     ///< Empty: all 1.
  std::vector<int64_t> pads;          ///< [begin..., end...]; empty: all 0.
  AutoPad auto_pad = AutoPad::NotSet;
  int64_t group = 1;  ///< Channels split into `group` independent convolutions (C for depthwise).
};

/// The output shape [N, M, out...] of Conv for X of shape `x` [N, C, in...] and W of shape `w`
/// [M, C / group, k...]. Errors: InvalidArgument when the ranks differ or are below 3, C is
/// not W's channels times `group`, M is not a multiple of `group`, an attribute has the wrong
/// length or a value out of range, or a padded input is smaller than the dilated kernel.
runtime::Result<std::vector<int64_t>> conv_shape(runtime::Span<const int64_t> x,
                                                 runtime::Span<const int64_t> w,
                                                 const ConvOptions& options);
/// Y = conv(X, W) + B, B (shape [M]) optional (null). `out` has shape `conv_shape(...)` and X's
/// dtype; W and B have X's dtype. Dtypes f32, f64, f16, bf16 (f16 and bf16 accumulate in f32).
/// Allocates a column buffer of (C / group) * prod(k) * prod(out) elements unless the kernel is
/// 1x1 with stride 1 and no padding.
runtime::Status conv(const runtime::Tensor& x, const runtime::Tensor& w, const runtime::Tensor* b,
                     const ConvOptions& options, runtime::Tensor& out);
/// ConvInteger: Y = conv(X - x_zero_point, W - w_zero_point) in int32. X and W are u8 or i8
/// (each on its own); `x_zero_point` (optional) is a scalar of X's dtype, `w_zero_point`
/// (optional) a scalar or a 1-D tensor of M values of W's dtype. Padding reads as the zero
/// point. `out` is i32 of shape `conv_shape(...)`. Sums wrap on int32 overflow.
runtime::Status conv_integer(const runtime::Tensor& x, const runtime::Tensor& w,
                             const runtime::Tensor* x_zero_point,
                             const runtime::Tensor* w_zero_point, const ConvOptions& options,
                             runtime::Tensor& out);

// ---- ConvTranspose ---------------------------------------------------------------------------

/// ConvTranspose's attributes (ONNX defaults).
struct ConvTransposeOptions {
  std::vector<int64_t> kernel_shape;  ///< Empty: W's spatial sizes; else must equal them.
  std::vector<int64_t> strides;       ///< Empty: all 1.
  std::vector<int64_t> dilations;     ///< Empty: all 1.
  std::vector<int64_t> pads;          ///< [begin..., end...]; empty: all 0 (or from output_shape).
  std::vector<int64_t> output_padding;  ///< Added at the end of each axis; empty: all 0.
  /// The spatial output sizes (S values, or 2 + S with N and C first); when set, the pads are
  /// derived from it (SAME_UPPER puts the extra padding at the end, otherwise at the start, as
  /// the ONNX spec says) and `pads` is ignored. Empty: not set.
  std::vector<int64_t> output_shape;
  AutoPad auto_pad = AutoPad::NotSet;  ///< SAME_*: output size in * stride.
  int64_t group = 1;
};

/// The output shape [N, M, out...] of ConvTranspose for X [N, C, in...] and W
/// [C, M / group, k...]: out = stride * (in - 1) + output_padding + (k - 1) * dilation + 1 -
/// pad_begin - pad_end unless `output_shape` or `auto_pad` fix it. Errors: InvalidArgument as
/// `conv_shape`, also for a negative output_padding or an output_shape that needs negative pads.
runtime::Result<std::vector<int64_t>> conv_transpose_shape(runtime::Span<const int64_t> x,
                                                           runtime::Span<const int64_t> w,
                                                           const ConvTransposeOptions& options);
/// Y = conv_transpose(X, W) + B, B (shape [M]) optional. `out` has shape
/// `conv_transpose_shape(...)` and X's dtype. Dtypes f32, f64, f16, bf16. Allocates one
/// accumulator per output element of one batch item and one row of prod(in) accumulators.
runtime::Status conv_transpose(const runtime::Tensor& x, const runtime::Tensor& w,
                               const runtime::Tensor* b, const ConvTransposeOptions& options,
                               runtime::Tensor& out);

// ---- MaxPool, AveragePool, LpPool ------------------------------------------------------------

/// The attributes of MaxPool, AveragePool and LpPool (ONNX defaults).
struct PoolOptions {
  std::vector<int64_t> kernel_shape;  ///< Required: S window sizes.
  std::vector<int64_t> strides;       ///< Empty: all 1.
  std::vector<int64_t> dilations;     ///< Empty: all 1.
  std::vector<int64_t> pads;          ///< [begin..., end...]; empty: all 0.
  AutoPad auto_pad = AutoPad::NotSet;
  /// Rounds the output size up instead of down; a window that would start in the end padding
  /// is dropped (as the ONNX spec and PyTorch do).
  bool ceil_mode = false;
  bool count_include_pad = false;  ///< AveragePool: divide by the window size within the pads.
  int64_t storage_order = 0;       ///< MaxPool Indices: 0 row-major, 1 column-major spatial index.
  int64_t p = 2;                   ///< LpPool: the norm's exponent.
};

/// The output shape [N, C, out...] of MaxPool, AveragePool or LpPool for X of shape `x`:
/// out = floor or ceil((in + pad_begin + pad_end - ((k - 1) * dilation + 1)) / stride) + 1;
/// ceil(in / stride) for SAME_*. Errors: InvalidArgument when the rank is below 3, an
/// attribute is missing, has the wrong length or a value out of range, or the padded input is
/// smaller than the dilated window.
runtime::Result<std::vector<int64_t>> pool_shape(runtime::Span<const int64_t> x,
                                                 const PoolOptions& options);
/// Y = the maximum of each window (padding is ignored; a window entirely in the padding gives
/// the dtype's lowest value); `out` has shape `pool_shape(...)` and X's dtype. When `indices`
/// is not null it is an i64 tensor of Y's shape and receives each maximum's flat index in X
/// ((n * C + c) * prod(in) + the spatial index, row-major or, with storage_order 1,
/// column-major); ties keep the first. Dtypes f32, f64, f16, bf16, i8, u8. Nan is skipped.
runtime::Status max_pool(const runtime::Tensor& x, const PoolOptions& options, runtime::Tensor& out,
                         runtime::Tensor* indices);
/// Y = the mean of each window: over its elements inside X, or with `count_include_pad` over
/// its elements inside the padded extent; a window with no element inside X gives nan (0 / 0)
/// without `count_include_pad`. Dtypes f32, f64, f16, bf16; accumulates in double.
runtime::Status average_pool(const runtime::Tensor& x, const PoolOptions& options,
                             runtime::Tensor& out);
/// Y = (sum over each window of |x|^p)^(1/p), the padding counting as 0. `p` >= 1.
/// Dtypes f32, f64, f16, bf16.
runtime::Status lp_pool(const runtime::Tensor& x, const PoolOptions& options, runtime::Tensor& out);

// ---- Global pools ----------------------------------------------------------------------------

/// [N, C, 1, ...]: the output shape of the global pools for X [N, C, ...] of rank >= 3.
/// Errors: InvalidArgument for a rank below 3.
runtime::Result<std::vector<int64_t>> global_pool_shape(runtime::Span<const int64_t> x);
/// Y[n, c] = the mean of X[n, c, ...]. Dtypes f32, f64, f16, bf16; accumulates in double.
runtime::Status global_average_pool(const runtime::Tensor& x, runtime::Tensor& out);
/// Y[n, c] = the maximum of X[n, c, ...] (nan is skipped). Dtypes f32, f64, f16, bf16.
runtime::Status global_max_pool(const runtime::Tensor& x, runtime::Tensor& out);
/// Y[n, c] = (sum of |X[n, c, ...]|^p)^(1/p), `p` >= 1. Dtypes f32, f64, f16, bf16.
runtime::Status global_lp_pool(const runtime::Tensor& x, int64_t p, runtime::Tensor& out);

// ---- MaxUnpool -------------------------------------------------------------------------------

/// MaxUnpool's attributes.
struct MaxUnpoolOptions {
  std::vector<int64_t> kernel_shape;  ///< Required: S window sizes.
  std::vector<int64_t> strides;       ///< Empty: all 1.
  std::vector<int64_t> pads;          ///< [begin..., end...]; empty: all 0.
};

/// The output shape of MaxUnpool for X of shape `x`: `output_shape` when not null (its rank
/// must be X's, its N and C X's, each spatial size at least the default), else the default
/// [N, C, (in - 1) * stride + k - pad_begin - pad_end...]. Errors: InvalidArgument for a bad
/// attribute, a negative default size or an output_shape that does not fit.
runtime::Result<std::vector<int64_t>> max_unpool_shape(runtime::Span<const int64_t> x,
                                                       const MaxUnpoolOptions& options,
                                                       const std::vector<int64_t>* output_shape);
/// Y = zeros, then X's elements are placed at the flat positions `indices` holds, counted in
/// the default output shape (as MaxPool's Indices of an input of that shape); when `out` is
/// larger (an explicit output_shape), that default-shaped result sits at the start of each
/// axis and the rest stays zero (as ONNX's reference pads at the end). `indices` is i64 of X's
/// shape, each in [0, numel(default)) (else InvalidArgument, checked before anything is
/// written); `out` has X's dtype and `max_unpool_shape(...)`. Dtypes f32, f64, f16, bf16, i8,
/// u8, i16, i32, i64.
runtime::Status max_unpool(const runtime::Tensor& x, const runtime::Tensor& indices,
                           const MaxUnpoolOptions& options, runtime::Tensor& out);

}  // namespace kiln::kernels
