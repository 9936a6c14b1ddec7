#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

/// Data-movement and shape operators (ONNX semantics): Cast, Shape, Size, ConstantOfShape,
/// Range, Concat, Transpose, Squeeze, Unsqueeze, Expand, Tile, Slice, Gather, GatherElements,
/// Split. Part of
/// the typed API that `kernels.h` includes; its conventions hold here. Each op whose output
/// shape depends on its arguments has a `*_shape` helper; the data functions check that `out`
/// has that shape. Unless a function says otherwise they move elements of any dtype, `out` has
/// the input's dtype and must not overlap the input. Shape helpers return InvalidArgument
/// errors without the "run kernel" prefix; the adapters add it.
namespace kiln::kernels {

// ---- Cast, Shape, Size, ConstantOfShape, Range ------------------------------------------------

/// The dtype of ONNX TensorProto data type number `onnx_type` (1 float, 2 uint8, 3 int8,
/// 5 int16, 6 int32, 7 int64, 9 bool, 10 float16, 11 double, 16 bfloat16). Errors:
/// InvalidArgument naming the number and the accepted ones.
runtime::Result<runtime::ScalarType> scalar_type_from_onnx(int64_t onnx_type);
/// Converts every element of `x` to `out`'s dtype (ONNX Cast; any dtype to any dtype). Floats
/// become integers by truncation, saturating at the integer's range (nan gives 0); integers
/// narrow by wrapping; anything non-zero becomes true; f16 and bf16 round to nearest even.
runtime::Status cast(const runtime::Tensor& x, runtime::Tensor& out);

/// The part of `input` that ONNX Shape returns for `start` and `end` (negative counts from
/// the end; both are clamped to [0, rank]; an empty range gives an empty shape).
std::vector<int64_t> shape_slice(runtime::Span<const int64_t> input, int64_t start, int64_t end);
/// Writes `shape_slice(x.sizes(), start, end)` into the 1-D i64 tensor `out`.
runtime::Status shape(const runtime::Tensor& x, int64_t start, int64_t end, runtime::Tensor& out);
/// Writes `x`'s element count into the 0-D i64 tensor `out` (ONNX Size).
runtime::Status size(const runtime::Tensor& x, runtime::Tensor& out);

/// Fills `out` (any shape) with the single element of `value`, which has `out`'s dtype
/// (ONNX ConstantOfShape).
runtime::Status constant_of_shape(const runtime::Tensor& value, runtime::Tensor& out);

/// The length of ONNX Range(start, limit, delta): max(ceil((limit - start) / delta), 0). The
/// three are one-element tensors of one dtype: f32, f64, i16, i32 or i64. Errors:
/// InvalidArgument when delta is 0 or an operand has more than one element; InvalidType for
/// another dtype or differing dtypes.
runtime::Result<int64_t> range_length(const runtime::Tensor& start, const runtime::Tensor& limit,
                                      const runtime::Tensor& delta);
/// out[i] = start + i * delta for the 1-D `out` of length `range_length(...)`.
runtime::Status range(const runtime::Tensor& start, const runtime::Tensor& limit,
                      const runtime::Tensor& delta, runtime::Tensor& out);

// ---- Concat, Transpose, Squeeze, Unsqueeze ----------------------------------------------------

/// The shape of ONNX Concat of `inputs` along `axis` (in [-rank, rank)): the inputs share rank
/// and dtype, and all sizes but `axis`'s. Errors name the input and the differing dimension.
runtime::Result<std::vector<int64_t>> concat_shape(
    runtime::Span<const runtime::Tensor* const> inputs, int64_t axis);
/// Joins `inputs` along `axis` into `out` of shape `concat_shape(inputs, axis)`.
runtime::Status concat(runtime::Span<const runtime::Tensor* const> inputs, int64_t axis,
                       runtime::Tensor& out);

/// The shape of ONNX Transpose: out[i] = input[perm[i]]. An empty `perm` reverses the
/// dimensions. Errors: InvalidArgument unless `perm` is a permutation of 0..rank-1.
runtime::Result<std::vector<int64_t>> transpose_shape(runtime::Span<const int64_t> input,
                                                      runtime::Span<const int64_t> perm);
/// Permutes `x`'s dimensions by `perm` (as `transpose_shape`) into `out`.
runtime::Status transpose(const runtime::Tensor& x, runtime::Span<const int64_t> perm,
                          runtime::Tensor& out);

/// The shape of ONNX Squeeze: `axes` (in [-rank, rank), distinct) removed, each of size 1;
/// without axes, every size-1 dimension is removed. The data moves as for `reshape`.
runtime::Result<std::vector<int64_t>> squeeze_shape(
    runtime::Span<const int64_t> input, const std::optional<std::vector<int64_t>>& axes);
/// The shape of ONNX Unsqueeze: a size-1 dimension inserted at each of `axes`, which index the
/// output (in [-(rank + n), rank + n), distinct). The data moves as for `reshape`.
runtime::Result<std::vector<int64_t>> unsqueeze_shape(runtime::Span<const int64_t> input,
                                                      const std::vector<int64_t>& axes);

// ---- Expand, Tile, Slice, Gather, Split -------------------------------------------------------

/// The shape of ONNX Expand: `broadcast_shape(input, shape)`.
runtime::Result<std::vector<int64_t>> expand_shape(runtime::Span<const int64_t> input,
                                                   runtime::Span<const int64_t> shape);
/// Broadcasts `x` into `out`, whose shape `x` broadcasts to (ONNX Expand).
runtime::Status expand(const runtime::Tensor& x, runtime::Tensor& out);

/// The shape of ONNX Tile: input[i] * repeats[i]; `repeats` has one non-negative entry per
/// dimension.
runtime::Result<std::vector<int64_t>> tile_shape(runtime::Span<const int64_t> input,
                                                 runtime::Span<const int64_t> repeats);
/// Repeats `x` along each dimension into `out`, whose sizes are multiples of `x`'s.
runtime::Status tile(const runtime::Tensor& x, runtime::Tensor& out);

/// Where a Slice reads along every dimension of its input.
struct SlicePlan {
  std::vector<int64_t> starts;  ///< First index read, per dimension.
  std::vector<int64_t> steps;   ///< Step per dimension (negative walks backwards).
  std::vector<int64_t> sizes;   ///< Output size per dimension.
};
/// Plans ONNX Slice (opset 10+ semantics) of an input of shape `input`: for each listed axis
/// (default 0, 1, ...; negative counts from the end), negative starts and ends count from the
/// end and are then clamped to the dimension ([0, dim] for positive steps, [0, dim - 1] and
/// [-1, dim - 1] for negative ones); steps default to 1. Errors: InvalidArgument for lists of
/// different lengths, a repeated or out-of-range axis, or a step of 0.
runtime::Result<SlicePlan> slice_plan(runtime::Span<const int64_t> input,
                                      runtime::Span<const int64_t> starts,
                                      runtime::Span<const int64_t> ends,
                                      runtime::Span<const int64_t> axes,
                                      runtime::Span<const int64_t> steps);
/// Copies the elements `plan` selects from `x` into `out` of shape `plan.sizes`.
runtime::Status slice(const runtime::Tensor& x, const SlicePlan& plan, runtime::Tensor& out);

/// The shape of ONNX Gather: data[:axis] + indices + data[axis + 1:].
runtime::Result<std::vector<int64_t>> gather_shape(runtime::Span<const int64_t> data,
                                                   runtime::Span<const int64_t> indices,
                                                   int64_t axis);
/// Gathers slices of `data` along `axis` at `indices` (i32 or i64; negative counts from the
/// end). Errors: InvalidArgument naming the first index outside [-dim, dim), checked before
/// anything is written.
runtime::Status gather(const runtime::Tensor& data, const runtime::Tensor& indices, int64_t axis,
                       runtime::Tensor& out);

/// ONNX GatherElements: out[i_0, ..., i_k] = data[i_0, ..., indices[i_0, ..., i_k], ..., i_k]
/// with the index replacing position `axis` (in [-rank, rank)). `out` has `indices`' shape;
/// `indices` (i32 or i64, negative counts from the end) has `data`'s rank and no dimension
/// larger than `data`'s. Errors: InvalidArgument for shapes, or naming the first index outside
/// [-dim, dim), checked before anything is written.
runtime::Status gather_elements(const runtime::Tensor& data, const runtime::Tensor& indices,
                                int64_t axis, runtime::Tensor& out);

/// The sizes along `axis` (of size `dim`) of the `num_outputs` parts of ONNX Split: `split`
/// when given (its entries must sum to `dim`), else equal parts of ceil(dim / num_outputs)
/// with a smaller last part (opset 18).
runtime::Result<std::vector<int64_t>> split_sizes(int64_t dim, size_t num_outputs,
                                                  const std::optional<std::vector<int64_t>>& split);
/// Cuts `x` along `axis` into `outputs`, whose sizes along `axis` give the parts.
runtime::Status split(const runtime::Tensor& x, int64_t axis,
                      runtime::Span<runtime::Tensor* const> outputs);

}  // namespace kiln::kernels
