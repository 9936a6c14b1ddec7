#pragma once

// Helpers for the index-taking ops of index_ops.h (GatherND, the scatters, ReverseSequence,
// Unique, ...): reading i32/i64 index tensors and checking each index against its range.
// Internal to kiln/kernels.

#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::kernels::internal {

/// Element `i` of the i32 or i64 tensor `indices`, as int64.
inline int64_t index_at(const runtime::Tensor& indices, int64_t i) {
  return indices.dtype() == runtime::ScalarType::Int64 ? indices.data_ptr<int64_t>()[i]
                                                       : indices.data_ptr<int32_t>()[i];
}

/// Ok when `index` lies in [lo, hi]; otherwise InvalidArgument
/// "run kernel '<op>': <subject> has <index> at element <position> (expected <lo>..<hi> <why>)".
/// `why` says which dimension the index addresses, e.g. "for axis 1 of size 3".
runtime::Status check_index(std::string_view op, std::string_view subject, int64_t index,
                            int64_t position, int64_t lo, int64_t hi, const std::string& why);

/// Ok when `tensor` has the same sizes as `expected`; otherwise InvalidArgument naming
/// `subject`, its shape and the expected shape with `why`.
runtime::Status check_shape(std::string_view op, std::string_view subject,
                            runtime::Span<const int64_t> actual,
                            runtime::Span<const int64_t> expected, const std::string& why);

/// Product of `sizes[begin:end]`.
int64_t product(runtime::Span<const int64_t> sizes, size_t begin, size_t end);

}  // namespace kiln::kernels::internal
