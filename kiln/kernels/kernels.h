#pragma once

#include <kiln/kernels/binary_ops.h>
#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/image_ops.h>
#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/misc_ops.h>
#include <kiln/kernels/nn_conv_ops.h>
#include <kiln/kernels/nn_norm_ops.h>
#include <kiln/kernels/quant_ops.h>
#include <kiln/kernels/reduce_ops.h>
#include <kiln/kernels/rnn_ops.h>
#include <kiln/kernels/shape_ops.h>
#include <kiln/kernels/signal_ops.h>
#include <kiln/kernels/unary_ops.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <vector>

/// Reference CPU operators (ONNX semantics, opset 13+ forms) as typed functions.
///
/// Conventions shared by every function here:
/// - Tensors are dense and row-major (identity dim order); others give NotSupported.
/// - `out` must already have the output shape (from the op's `*_shape` helper, or the input's
///   shape for element-wise unary ops) and the input's dtype (unless the function says
///   otherwise); the function checks both and writes every element of `out`. `out` must not
///   overlap an input, except that `out` may be the input itself for the unary element-wise
///   ops, Identity, Reshape and Flatten.
/// - Errors: InvalidType when a dtype is not supported or differs from input 0's,
///   InvalidArgument for shapes; messages read "run kernel '<Op>': <what> (expected ...)".
/// - No allocation beyond small index vectors (MatMul and Gemm keep one row of accumulators).
/// - Thread-safety: reentrant; concurrent calls must not write the same output.
///
/// Each op is also registered for the executor under its ONNX name ("Add", "MatMul", ...)
/// by an adapter in the op's .cpp file; see README.md.
namespace kiln::kernels {

// ---- Element-wise binary: Add, Sub, Mul, Div -------------------------------------------------

/// out = a + b with numpy broadcasting; `out` has shape `broadcast_shape(a, b)`.
/// Dtypes f32, f64, f16, bf16, i8, u8, i16, i32, i64; `b` and `out` have `a`'s dtype. Integers
/// wrap on overflow (two's complement).
runtime::Status add(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);
/// out = a - b; as `add`.
runtime::Status sub(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);
/// out = a * b; as `add`.
runtime::Status mul(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);
/// out = a / b; as `add`. Integer division truncates toward zero (as C and ONNX do), and
/// INT_MIN / -1 wraps to INT_MIN. An integer divisor of 0 gives InvalidArgument naming the
/// element (checked before anything is written); float division follows IEEE (inf, nan).
runtime::Status div(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);

// ---- Element-wise unary: Relu, Sigmoid, Tanh, Identity ---------------------------------------

/// out = max(x, 0); `out` has `x`'s shape and dtype. Dtypes f32, f64, f16, bf16, i32, i64.
runtime::Status relu(const runtime::Tensor& x, runtime::Tensor& out);
/// out = 1 / (1 + exp(-x)), computed without overflow for large |x|. Dtypes f32, f64, f16, bf16.
runtime::Status sigmoid(const runtime::Tensor& x, runtime::Tensor& out);
/// out = tanh(x). Dtypes f32, f64, f16, bf16.
runtime::Status tanh(const runtime::Tensor& x, runtime::Tensor& out);
/// Copies `x` into `out` (same shape, any dtype).
runtime::Status identity(const runtime::Tensor& x, runtime::Tensor& out);

// ---- MatMul and Gemm -------------------------------------------------------------------------

/// The output shape of numpy matmul (ONNX MatMul) for operands of shapes `a` and `b`: a 1-D `a`
/// is a row [1, K] and a 1-D `b` a column [K, 1], and the added dimension is removed from the
/// result; dimensions before the last two are batch dimensions and broadcast.
/// Errors: InvalidArgument for a rank-0 operand, inner sizes that differ, or batch dimensions
/// that do not broadcast; the message names the input and both shapes.
runtime::Result<std::vector<int64_t>> matmul_shape(runtime::Span<const int64_t> a,
                                                   runtime::Span<const int64_t> b);
/// out = matmul(a, b); `out` has shape `matmul_shape(a, b)`. Dtypes f32, f64, f16, bf16 (f16
/// and bf16 accumulate in f32).
runtime::Status matmul(const runtime::Tensor& a, const runtime::Tensor& b, runtime::Tensor& out);

/// Gemm's attributes (ONNX defaults).
struct GemmOptions {
  double alpha = 1.0;    ///< Scales A' * B'.
  double beta = 1.0;     ///< Scales C; with beta = 0, C is not read.
  bool trans_a = false;  ///< A' = transpose(A): A has shape [K, M] instead of [M, K].
  bool trans_b = false;  ///< B' = transpose(B): B has shape [N, K] instead of [K, N].
};

/// The output shape [M, N] of Gemm for A of shape `a`, B of shape `b` and, when `c` is not
/// null, C of shape `*c`. Errors: InvalidArgument when A or B is not 2-D, the inner sizes
/// differ, or C does not broadcast (unidirectionally) to [M, N].
runtime::Result<std::vector<int64_t>> gemm_shape(runtime::Span<const int64_t> a,
                                                 runtime::Span<const int64_t> b,
                                                 const std::vector<int64_t>* c,
                                                 const GemmOptions& options);
/// out = alpha * A' * B' + beta * C, C optional (null). `out` has shape `gemm_shape(...)`.
/// Dtypes f32, f64, f16, bf16; every operand has A's dtype.
runtime::Status gemm(const runtime::Tensor& a, const runtime::Tensor& b, const runtime::Tensor* c,
                     runtime::Tensor& out, const GemmOptions& options);

// ---- Softmax ---------------------------------------------------------------------------------

/// `axis` in [-rank, rank - 1] made non-negative. Errors: InvalidArgument naming the attribute,
/// its value and the accepted range.
runtime::Result<int64_t> normalize_softmax_axis(int64_t axis, int64_t rank);
/// Opset-13 Softmax of `x` along one axis (negative counts from the end): exp(x - max) / sum,
/// the max and sum taken along that axis only. `out` has `x`'s shape and dtype.
/// Dtypes f32, f64, f16, bf16. Errors as `normalize_softmax_axis`.
runtime::Status softmax(const runtime::Tensor& x, int64_t axis, runtime::Tensor& out);
/// out = log(softmax(x)) along `axis`, computed as x - max - log(sum(exp(x - max))) (ONNX
/// LogSoftmax, opset 13). As `softmax`.
runtime::Status log_softmax(const runtime::Tensor& x, int64_t axis, runtime::Tensor& out);

// ---- Reshape and Flatten ---------------------------------------------------------------------

/// The output shape of ONNX Reshape for an input of shape `input` and the requested `shape`:
/// a 0 copies the input's size at the same index unless `allow_zero` (then it is a size 0);
/// one -1 is inferred from the element count. Errors: InvalidArgument for two -1s, a value
/// below -1, a 0 past the input's rank, 0 and -1 together with `allow_zero`, a -1 that
/// cannot be inferred, or an element count that differs from the input's; the message names
/// the shape input (input 1), the position and the values.
runtime::Result<std::vector<int64_t>> reshape_shape(runtime::Span<const int64_t> input,
                                                    runtime::Span<const int64_t> shape,
                                                    bool allow_zero);
/// Copies `x`'s elements into `out`, which has the reshaped shape (same element count) and
/// `x`'s dtype (any).
runtime::Status reshape(const runtime::Tensor& x, runtime::Tensor& out);

/// The 2-D output shape of ONNX Flatten: [product of sizes before `axis`, product of the rest].
/// `axis` is in [-rank, rank]. Errors: InvalidArgument naming the axis and the accepted range.
runtime::Result<std::vector<int64_t>> flatten_shape(runtime::Span<const int64_t> input,
                                                    int64_t axis);
/// Copies `x`'s elements into `out` of shape `flatten_shape(...)`; any dtype.
runtime::Status flatten(const runtime::Tensor& x, runtime::Tensor& out);

}  // namespace kiln::kernels
