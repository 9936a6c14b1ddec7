#include <kiln/kernels/index_util.h>

#include <algorithm>

namespace kiln::kernels::internal {

using runtime::Span;
using runtime::Status;

Status check_index(std::string_view op, std::string_view subject, int64_t index, int64_t position,
                   int64_t lo, int64_t hi, const std::string& why) {
  if (index >= lo && index <= hi) return Status();
  const std::string range =
      hi < lo ? "no valid index" : std::to_string(lo) + ".." + std::to_string(hi);
  return invalid_argument(op, std::string(subject) + " has " + std::to_string(index) +
                                  " at element " + std::to_string(position) + " (expected " +
                                  range + " " + why + ")");
}

Status check_shape(std::string_view op, std::string_view subject, Span<const int64_t> actual,
                   Span<const int64_t> expected, const std::string& why) {
  if (std::equal(actual.begin(), actual.end(), expected.begin(), expected.end())) return Status();
  return invalid_argument(op, std::string(subject) + " has shape " +
                                  runtime::shape_to_string(actual) + " (expected " +
                                  runtime::shape_to_string(expected) + ", " + why + ")");
}

int64_t product(Span<const int64_t> sizes, size_t begin, size_t end) {
  int64_t result = 1;
  for (size_t d = begin; d < end && d < sizes.size(); ++d) result *= sizes[d];
  return result;
}

}  // namespace kiln::kernels::internal
