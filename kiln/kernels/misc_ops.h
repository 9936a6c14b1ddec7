#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <vector>

/// Assorted operators (ONNX semantics): Dropout, Trilu, CumSum, TopK, Hardmax, EyeLike, IsNaN,
/// IsInf, Shrink, Softsign, Celu, Mish, the inverse-trigonometric and hyperbolic functions,
/// BitShift and Det. Part of the typed API that `kernels.h` includes; the conventions written
/// there hold here. f16 and bf16 are computed in f32 and rounded once on store.
namespace kiln::kernels {

// ---- Unary math: f32, f64, f16, bf16; `out` has `x`'s shape and dtype and may be `x` ---------

/// tan(x), x in radians.
runtime::Status tan(const runtime::Tensor& x, runtime::Tensor& out);
/// asin(x) in [-pi/2, pi/2]; nan outside [-1, 1].
runtime::Status asin(const runtime::Tensor& x, runtime::Tensor& out);
/// acos(x) in [0, pi]; nan outside [-1, 1].
runtime::Status acos(const runtime::Tensor& x, runtime::Tensor& out);
/// atan(x) in (-pi/2, pi/2).
runtime::Status atan(const runtime::Tensor& x, runtime::Tensor& out);
/// sinh(x).
runtime::Status sinh(const runtime::Tensor& x, runtime::Tensor& out);
/// cosh(x).
runtime::Status cosh(const runtime::Tensor& x, runtime::Tensor& out);
/// asinh(x).
runtime::Status asinh(const runtime::Tensor& x, runtime::Tensor& out);
/// acosh(x); nan below 1.
runtime::Status acosh(const runtime::Tensor& x, runtime::Tensor& out);
/// atanh(x); +-inf at +-1, nan outside [-1, 1].
runtime::Status atanh(const runtime::Tensor& x, runtime::Tensor& out);
/// x / (1 + |x|) (ONNX Softsign).
runtime::Status softsign(const runtime::Tensor& x, runtime::Tensor& out);
/// x * tanh(softplus(x)) (ONNX Mish), softplus computed without overflow.
runtime::Status mish(const runtime::Tensor& x, runtime::Tensor& out);
/// max(0, x) + min(0, alpha * (e^(x / alpha) - 1)) (ONNX Celu; default alpha 1).
/// Errors: InvalidArgument for alpha = 0.
runtime::Status celu(const runtime::Tensor& x, double alpha, runtime::Tensor& out);
/// x - bias for x > lambd, x + bias for x < -lambd, else 0 (ONNX Shrink; defaults lambd 0.5,
/// bias 0). Dtypes f32, f64, f16, bf16, i8, u8, i16, i32, i64; integer results are computed
/// in double and converted back, truncated toward 0 and saturated to the dtype's range.
runtime::Status shrink(const runtime::Tensor& x, double lambd, double bias, runtime::Tensor& out);

// ---- Predicates: `out` is bool, shaped like `x`; x is f32, f64, f16 or bf16 ------------------

/// True where x is nan (ONNX IsNaN).
runtime::Status is_nan(const runtime::Tensor& x, runtime::Tensor& out);
/// True where x is +inf (when `detect_positive`) or -inf (when `detect_negative`) (ONNX IsInf;
/// both default to true).
runtime::Status is_inf(const runtime::Tensor& x, bool detect_negative, bool detect_positive,
                       runtime::Tensor& out);

// ---- Dropout -----------------------------------------------------------------------------------

/// Dropout's parameters: the `ratio` (input 1 from opset 12, else an attribute; default 0.5)
/// and `training_mode` (input 2 from opset 12; default false).
struct DropoutOptions {
  double ratio = 0.5;
  bool training = false;
};

/// Dropout without randomness: out = x (any float dtype), and `mask` (optional: null; bool,
/// `x`'s shape) all true. This is exact in inference, and in training when `ratio` is 0.
/// Errors: NotSupported for training with a ratio other than 0 (that needs random numbers);
/// InvalidArgument for a ratio outside [0, 1).
runtime::Status dropout(const runtime::Tensor& x, const DropoutOptions& options,
                        runtime::Tensor& out, runtime::Tensor* mask);

// ---- Trilu, CumSum -------------------------------------------------------------------------

/// Keeps the upper (`upper`, ONNX default) or lower triangle of each matrix in the last two
/// dimensions of `x` (rank >= 2, any dtype), zeroing the rest: element (i, j) is kept when
/// j - i >= k (upper) or j - i <= k (lower). `k` may be any value (ONNX Trilu).
runtime::Status trilu(const runtime::Tensor& x, int64_t k, bool upper, runtime::Tensor& out);

/// CumSum's attributes.
struct CumSumOptions {
  bool exclusive = false;  ///< Element j sums the elements before j, not through j.
  bool reverse = false;    ///< Sum from the end of the axis toward its start.
};

/// Running sum of `x` along `axis` (in [-rank, rank); ONNX CumSum). Dtypes f32, f64, f16, bf16,
/// i32, i64; floats accumulate in double, integers wrap. Errors: InvalidArgument for the axis.
runtime::Status cumsum(const runtime::Tensor& x, int64_t axis, const CumSumOptions& options,
                       runtime::Tensor& out);

// ---- TopK, Hardmax -------------------------------------------------------------------------

/// TopK's attributes (ONNX defaults).
struct TopKOptions {
  int64_t axis = -1;
  bool largest = true;  ///< The largest k values, else the smallest.
  bool sorted = true;   ///< Ignored: the values always come sorted (ONNX allows any order).
};

/// The shape of both TopK outputs: `x`'s shape with `k` at `axis`. Errors: InvalidArgument
/// for the axis, or k outside [0, x.shape[axis]].
runtime::Result<std::vector<int64_t>> top_k_shape(runtime::Span<const int64_t> x, int64_t k,
                                                  int64_t axis);
/// The `k` largest (or smallest) values along `axis` in `values` (`x`'s dtype) and their
/// positions in `indices` (i64), best first; equal values keep their order (lower index first),
/// and nan counts as larger than every number. Dtypes f32, f64, f16, bf16, i8, u8, i16, i32,
/// i64. Errors as `top_k_shape`, and for output shapes and dtypes.
runtime::Status top_k(const runtime::Tensor& x, int64_t k, const TopKOptions& options,
                      runtime::Tensor& values, runtime::Tensor& indices);

/// Hardmax: 1 at the first maximum of each line along `axis`, 0 elsewhere (ONNX opset 13).
/// With `flatten` (opsets before 13), `x` is read as the 2-D [prod(x[:axis]), prod(x[axis:])]
/// and each row is a line. Dtypes f32, f64, f16, bf16. Errors: InvalidArgument for the axis.
runtime::Status hardmax(const runtime::Tensor& x, int64_t axis, bool flatten, runtime::Tensor& out);

// ---- EyeLike, BitShift, Det ------------------------------------------------------------------

/// Ones on the `k`-th diagonal (element (i, i + k)) of the 2-D `out`, zeros elsewhere (ONNX
/// EyeLike; `out` has the input's shape and the dtype of the `dtype` attribute, else the
/// input's). Dtypes f32, f64, f16, bf16, i8, u8, i16, i32, i64, bool. Errors: InvalidArgument
/// unless `out` is 2-D.
runtime::Status eye_like(int64_t k, runtime::Tensor& out);

/// out = x << y (`left`) or x >> y with numpy broadcasting (ONNX BitShift). Dtype u8 (the
/// runtime has no wider unsigned dtype); a shift of 8 or more gives 0.
runtime::Status bit_shift(const runtime::Tensor& x, const runtime::Tensor& y, bool left,
                          runtime::Tensor& out);

/// The shape of Det's output for an input of shape `x`: `x[:-2]`. Errors: InvalidArgument
/// unless `x` has rank >= 2 and its last two sizes are equal.
runtime::Result<std::vector<int64_t>> det_shape(runtime::Span<const int64_t> x);
/// The determinant of each square matrix in the last two dimensions of `x` (ONNX Det), by LU
/// decomposition with partial pivoting in double. Dtypes f32, f64, f16, bf16.
runtime::Status det(const runtime::Tensor& x, runtime::Tensor& out);

}  // namespace kiln::kernels
