#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <vector>

/// Reductions (ONNX ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL2, ReduceL1,
/// ReduceSumSquare, ReduceLogSum, ReduceLogSumExp) and
/// ArgMax/ArgMin. Part of the typed API that `kernels.h` includes; its conventions hold here.
namespace kiln::kernels {

/// What a reduction computes over the reduced elements.
enum class ReduceKind {
  Sum,        ///< ReduceSum; 0 for an empty reduction.
  Mean,       ///< ReduceMean; nan for an empty float reduction (integers truncate, 0 when empty).
  Max,        ///< ReduceMax; -inf (or the integer's lowest value) for an empty reduction; nan wins.
  Min,        ///< ReduceMin; +inf (or the integer's highest value) when empty; nan wins.
  Prod,       ///< ReduceProd; 1 for an empty reduction.
  L2,         ///< ReduceL2: sqrt of the sum of squares.
  L1,         ///< ReduceL1: the sum of absolute values.
  SumSquare,  ///< ReduceSumSquare: the sum of squares.
  LogSum,     ///< ReduceLogSum: log of the sum.
  LogSumExp,  ///< ReduceLogSumExp: log of the sum of exponentials (floats only).
};

/// The output shape of a reduction of `input` over `axes` (normalized, distinct, sorted or not;
/// empty reduces every axis): reduced dimensions become 1 with `keepdims`, else disappear.
std::vector<int64_t> reduce_shape(runtime::Span<const int64_t> input,
                                  runtime::Span<const int64_t> axes, bool keepdims);
/// Reduces `x` over `axes` (as `reduce_shape`) into `out` of shape
/// `reduce_shape(x.sizes(), axes, keepdims)` and `x`'s dtype. Dtypes f32, f64, f16, bf16, i32,
/// i64. Floats accumulate in double; integer sums and products wrap. Allocates one accumulator
/// per output element. Errors: InvalidArgument for an axis outside [-rank, rank) or a repeated
/// axis.
runtime::Status reduce(const runtime::Tensor& x, ReduceKind kind, runtime::Span<const int64_t> axes,
                       bool keepdims, runtime::Tensor& out);

/// The output shape of ArgMax/ArgMin over `axis` (normalized): that dimension becomes 1 with
/// `keepdims`, else disappears.
std::vector<int64_t> arg_reduce_shape(runtime::Span<const int64_t> input, int64_t axis,
                                      bool keepdims);
/// The index of the largest element along `axis` (in [-rank, rank)) into the i64 `out`;
/// ties give the first index, or the last with `select_last_index`. Dtypes f32, f64, f16,
/// bf16, i32, i64. Errors: InvalidArgument for a bad axis or an empty reduced dimension.
runtime::Status arg_max(const runtime::Tensor& x, int64_t axis, bool keepdims,
                        bool select_last_index, runtime::Tensor& out);
/// The index of the smallest element; as `arg_max`.
runtime::Status arg_min(const runtime::Tensor& x, int64_t axis, bool keepdims,
                        bool select_last_index, runtime::Tensor& out);

}  // namespace kiln::kernels
