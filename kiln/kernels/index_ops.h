#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

/// Indexing, scattering, padding and rearranging operators (ONNX semantics): GatherND,
/// ScatterElements (and the deprecated Scatter), ScatterND, OneHot, NonZero, Compress, Unique,
/// ReverseSequence, DepthToSpace, SpaceToDepth, Pad and Einsum. Part of the typed API that
/// `kernels.h` includes; its conventions hold here (dense row-major tensors, `out` already
/// shaped by the `*_shape` helper, InvalidType for dtypes, InvalidArgument for shapes).
///
/// Index inputs (i32 or i64) are checked element by element before anything is written: an
/// index outside its valid range gives InvalidArgument naming the op, the input, the index
/// value, its position and the valid range, and nothing is read or written out of bounds.
/// Negative indices count from the end where ONNX allows them. Shape helpers return errors
/// without the "run kernel" prefix unless they say otherwise; the adapters add it.
namespace kiln::kernels {

// ---- GatherND, ScatterElements, ScatterND
// --------------------------------------------------------

/// The shape of ONNX GatherND: indices[:-1] + data[batch_dims + k:], where k = indices[-1]
/// (1..rank(data) - batch_dims) and the first `batch_dims` sizes of data and indices are equal.
runtime::Result<std::vector<int64_t>> gather_nd_shape(runtime::Span<const int64_t> data,
                                                      runtime::Span<const int64_t> indices,
                                                      int64_t batch_dims);
/// Gathers the slices of `data` (any dtype) that the last dimension of `indices` (i32 or i64)
/// addresses, per batch of the first `batch_dims` dimensions, into `out` of shape
/// `gather_nd_shape(...)`. Each index lies in [-dim, dim) of the data dimension it addresses.
runtime::Status gather_nd(const runtime::Tensor& data, const runtime::Tensor& indices,
                          int64_t batch_dims, runtime::Tensor& out);

/// How a scatter combines an update with the element already there (ONNX `reduction`).
enum class ScatterReduction { None, Add, Mul, Max, Min };
/// The reduction named `name` ("none", "add", "mul", "max", "min"). Errors: InvalidArgument
/// "attribute 'reduction' is 'x' (expected none, add, mul, max or min)".
runtime::Result<ScatterReduction> scatter_reduction_from_string(std::string_view name);

/// ONNX ScatterElements (and Scatter, opsets 9-10): `out` = `data`, then for every element of
/// `indices` (i32 or i64, `data`'s rank, no dimension larger than `data`'s outside `axis`)
/// out[..., indices[i...], ...] (index at `axis`) combines with updates[i...] by `reduction`.
/// `updates` has `indices`' shape and `data`'s dtype; `out` has `data`'s shape. Dtypes: any
/// for None; f32, f64, f16, bf16, i8, u8, i16, i32, i64 for the reductions. With None and
/// repeated indices the last update wins.
runtime::Status scatter_elements(const runtime::Tensor& data, const runtime::Tensor& indices,
                                 const runtime::Tensor& updates, int64_t axis,
                                 ScatterReduction reduction, runtime::Tensor& out);

/// ONNX ScatterND: `out` = `data`, then each slice data[indices[i..., :]] (k = indices[-1] <=
/// rank(data) leading coordinates) combines with updates[i...] by `reduction`. `updates` has
/// shape indices[:-1] + data[k:]. Dtypes as `scatter_elements`.
runtime::Status scatter_nd(const runtime::Tensor& data, const runtime::Tensor& indices,
                           const runtime::Tensor& updates, ScatterReduction reduction,
                           runtime::Tensor& out);

// ---- OneHot, NonZero, Compress, Unique
// -----------------------------------------------------------

/// The depth of ONNX OneHot: the single element of `depth` (any numeric dtype; floats are
/// truncated). Errors: InvalidArgument unless it has one element and is at least 1.
runtime::Result<int64_t> one_hot_depth(const runtime::Tensor& depth);
/// The shape of ONNX OneHot: `indices` with a dimension of size `depth` inserted at `axis`
/// (in [-(rank + 1), rank]).
runtime::Result<std::vector<int64_t>> one_hot_shape(runtime::Span<const int64_t> indices,
                                                    int64_t depth, int64_t axis);
/// ONNX OneHot: out = values[1] where the inserted coordinate equals the index (negative
/// indices in [-depth, -1] count from the end), values[0] elsewhere. `indices` has any numeric
/// dtype (floats are truncated); `values` holds [off, on] and gives `out`'s dtype (any). As
/// ONNX specifies, an index outside [-depth, depth) gives a row of off values, not an error.
runtime::Status one_hot(const runtime::Tensor& indices, int64_t depth,
                        const runtime::Tensor& values, int64_t axis, runtime::Tensor& out);

/// The number of non-zero elements of `x` (any dtype; nan counts as non-zero).
runtime::Result<int64_t> count_nonzero(const runtime::Tensor& x);
/// ONNX NonZero: writes the coordinates of `x`'s non-zero elements, in row-major order, into
/// the i64 `out` of shape [rank(x), count_nonzero(x)]; a 0-D `x` is read as 1-D, as numpy does,
/// giving [1, count] holding zeros. The output size depends on the data: the adapter resizes an
/// unbounded or bounded output, and a bounded one too small gives the executor's error.
runtime::Status nonzero(const runtime::Tensor& x, runtime::Tensor& out);

/// The shape of ONNX Compress: `x` with the `axis` dimension (or, without an axis, the whole
/// flattened tensor) reduced to the number of true elements of the 1-D bool `condition`, which
/// may be shorter than that dimension (the rest is dropped) but not longer.
runtime::Result<std::vector<int64_t>> compress_shape(runtime::Span<const int64_t> x,
                                                     const runtime::Tensor& condition,
                                                     std::optional<int64_t> axis);
/// Copies the slices of `x` (any dtype) that `condition` selects into `out`.
runtime::Status compress(const runtime::Tensor& x, const runtime::Tensor& condition,
                         std::optional<int64_t> axis, runtime::Tensor& out);

/// What ONNX Unique finds in a tensor: the shape of Y and the three i64 index outputs.
struct UniquePlan {
  std::vector<int64_t> y_shape;  ///< x's shape with `axis` set to the unique count (1-D without).
  std::vector<int64_t> indices;  ///< For each unique slice, its first occurrence in x.
  std::vector<int64_t> inverse;  ///< For each slice of x, the position of its unique slice.
  std::vector<int64_t> counts;   ///< For each unique slice, how often it occurs.
  int64_t axis = -1;             ///< Normalized axis, or -1 for the flattened tensor.
};
/// Finds the unique elements of `x` (or its unique slices along `axis`, in [-rank, rank)),
/// sorted ascending (slices lexicographically; nan sorts last) when `sorted`, else in order
/// of first occurrence. Dtypes: every dtype of `DtypeGroup::All`.
runtime::Result<UniquePlan> unique_plan(const runtime::Tensor& x, bool sorted,
                                        std::optional<int64_t> axis);
/// Writes Y: the unique slices that `plan` (from `unique_plan(x, ...)`) lists, into `y` of
/// shape `plan.y_shape`.
runtime::Status unique(const runtime::Tensor& x, const UniquePlan& plan, runtime::Tensor& y);

// ---- ReverseSequence, DepthToSpace, SpaceToDepth
// -------------------------------------------------

/// ONNX ReverseSequence: for each batch b (along `batch_axis`), the first sequence_lens[b]
/// elements along `time_axis` (the two axes are 0 and 1, in either order) are reversed; the
/// rest are copied. `sequence_lens` is i32 or i64 of shape [batch], each in [0, time]. `x` has
/// rank 2 or more and any dtype; `out` has its shape.
runtime::Status reverse_sequence(const runtime::Tensor& x, const runtime::Tensor& sequence_lens,
                                 int64_t batch_axis, int64_t time_axis, runtime::Tensor& out);

/// DepthToSpace's channel order: DCR (depth-column-row, the default) or CRD.
enum class DepthToSpaceMode { DCR, CRD };
/// The shape of ONNX DepthToSpace of a 4-D [N, C, H, W] input: [N, C / b², H * b, W * b].
/// Errors: rank other than 4, `blocksize` < 1, or C not divisible by b².
runtime::Result<std::vector<int64_t>> depth_to_space_shape(runtime::Span<const int64_t> x,
                                                           int64_t blocksize);
/// Moves depth into blocks of space (any dtype).
runtime::Status depth_to_space(const runtime::Tensor& x, int64_t blocksize, DepthToSpaceMode mode,
                               runtime::Tensor& out);
/// The shape of ONNX SpaceToDepth of [N, C, H, W]: [N, C * b², H / b, W / b]; H and W must be
/// multiples of `blocksize`.
runtime::Result<std::vector<int64_t>> space_to_depth_shape(runtime::Span<const int64_t> x,
                                                           int64_t blocksize);
/// Moves blocks of space into depth (any dtype).
runtime::Status space_to_depth(const runtime::Tensor& x, int64_t blocksize, runtime::Tensor& out);

// ---- Pad
// -------------------------------------------------------------------------------------------

/// ONNX Pad's `mode`.
enum class PadMode { Constant, Reflect, Edge, Wrap };
/// The mode named `name` ("constant", "reflect", "edge", "wrap"). Errors: InvalidArgument.
runtime::Result<PadMode> pad_mode_from_string(std::string_view name);
/// The full pads list [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] of ONNX Pad for rank
/// `rank` from `pads` given for `axes` (ONNX opset 18; empty `axes` means every axis, and then
/// `pads` has 2 * rank entries). Errors name the lists and the expected lengths.
runtime::Result<std::vector<int64_t>> pad_full_pads(int64_t rank, runtime::Span<const int64_t> pads,
                                                    runtime::Span<const int64_t> axes);
/// The shape of ONNX Pad: input[d] + begin_d + end_d, each at least 0. A negative pad crops.
runtime::Result<std::vector<int64_t>> pad_shape(runtime::Span<const int64_t> input,
                                                runtime::Span<const int64_t> pads);
/// Pads `x` (any dtype) by `pads` (from `pad_full_pads`) into `out`. Negative pads crop first;
/// the remaining input is then padded with `value` (Constant: a one-element tensor of `x`'s
/// dtype, or null for 0), its mirror without the edge (Reflect), its edge (Edge) or its other
/// end (Wrap). Errors: InvalidArgument when a non-constant mode pads a dimension of size 0.
runtime::Status pad(const runtime::Tensor& x, runtime::Span<const int64_t> pads, PadMode mode,
                    const runtime::Tensor* value, runtime::Tensor& out);

// ---- Einsum
// ----------------------------------------------------------------------------------------

/// The shape of ONNX Einsum of `inputs` under `equation` ("ij,jk->ik", or implicit "ij,jk";
/// "..." broadcasts; a label repeated within one term takes the diagonal). In implicit form
/// the output is the broadcast ellipsis dimensions, then the labels used once, alphabetically.
/// Errors: InvalidArgument naming the equation and the term or label at fault (syntax, term
/// count, rank, sizes of one label that differ).
runtime::Result<std::vector<int64_t>> einsum_shape(
    std::string_view equation, runtime::Span<const runtime::Tensor* const> inputs);
/// Evaluates Einsum into `out` of shape `einsum_shape(...)`: a sum over the labels missing
/// from the output of the product of the inputs. Dtypes f32, f64, f16, bf16 (accumulate in
/// double), i32, i64 (accumulate in i64); all inputs share one dtype. Plain batched matrix
/// products go through `matmul`.
runtime::Status einsum(std::string_view equation,
                       runtime::Span<const runtime::Tensor* const> inputs, runtime::Tensor& out);

}  // namespace kiln::kernels
