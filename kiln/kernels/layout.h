#pragma once

// Helpers for the data-movement and axis-taking ops (Concat, Slice, Gather, reductions, ...):
// axis normalization, integer lists read from inputs or attributes, and element copies that
// only care about the element size. Internal to kiln/kernels.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::kernels::internal {

/// `axis` in [-rank, rank) made non-negative. Errors: InvalidArgument
/// "run kernel '<op>': <subject> is 3 (expected -3..2 for input 0 of rank 3)", `subject`
/// naming the value, e.g. "attribute 'axis'".
runtime::Result<int64_t> normalize_axis(std::string_view op, std::string_view subject, int64_t axis,
                                        int64_t rank);

/// Normalizes every axis of `axes` against `rank`; repeated axes are an InvalidArgument error
/// naming `subject`.
runtime::Result<std::vector<int64_t>> normalize_axes(std::string_view op, std::string_view subject,
                                                     const std::vector<int64_t>& axes,
                                                     int64_t rank);

/// The elements of input `index`, a 0-D or 1-D tensor of dtype i32 or i64 (ONNX `axes`,
/// `starts`, `repeats`, a shape, ...), as int64. Errors: InvalidType or InvalidArgument naming
/// the input and `name` ("input 1 (axes)").
runtime::Result<std::vector<int64_t>> read_int_list(std::string_view op,
                                                    runtime::Span<runtime::EValue* const> inputs,
                                                    size_t index, std::string_view name);

/// A parameter that ONNX moved from an attribute to an input across opsets: input `index`
/// when it is present, else the int list attribute `name` when set, else nullopt.
runtime::Result<std::optional<std::vector<int64_t>>> int_list_input_or_attribute(
    std::string_view op, runtime::Span<runtime::EValue* const> inputs, size_t index,
    const runtime::Attributes& attributes, std::string_view name);

/// Reads int attribute `name`, prefixing the op to any error.
runtime::Result<int64_t> int_attribute(std::string_view op, const runtime::Attributes& attributes,
                                       std::string_view name, int64_t fallback);

/// Calls `fn(TypeTag<U>{})` with `U` an unsigned integer type of `element_size` bytes (1, 2, 4
/// or 8), so byte-moving ops need one instantiation per size rather than per dtype.
template <typename Fn>
runtime::Status dispatch_bytes(size_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1:
      return fn(TypeTag<uint8_t>{});
    case 2:
      return fn(TypeTag<uint16_t>{});
    case 4:
      return fn(TypeTag<uint32_t>{});
    default:
      return fn(TypeTag<uint64_t>{});
  }
}

/// Row-major strides (in elements) of a dense tensor of shape `sizes`.
std::vector<int64_t> dense_strides(runtime::Span<const int64_t> sizes);

/// Copies into the dense `out_data` (an array of `out_sizes`, elements of `x`'s size): the
/// output element at index (i_0, ..., i_k) is `x`'s element at `base + sum(i_d * in_strides[d])`
/// (in elements; a stride may be 0 or negative). Slice, Transpose, Expand and Tile are this
/// walk with different strides.
void strided_copy(const runtime::Tensor& x, int64_t base, runtime::Span<const int64_t> out_sizes,
                  const std::vector<int64_t>& in_strides, void* out_data);

/// "input 0 of shape [2, 3]", for messages.
std::string describe_input(size_t index, runtime::Span<const int64_t> sizes);

}  // namespace kiln::kernels::internal
