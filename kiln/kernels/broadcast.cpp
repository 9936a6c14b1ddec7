#include <kiln/kernels/broadcast.h>

#include <kiln/runtime/core/tensor.h>

#include <algorithm>
#include <string>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::Span;
using runtime::Status;

Result<std::vector<int64_t>> broadcast_shape(Span<const int64_t> a, Span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {  // i counts from the last dimension
    const int64_t size_a = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t size_b = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (size_a != size_b && size_a != 1 && size_b != 1) {
      return Status(Error::InvalidArgument,
                    "broadcast shape " + runtime::shape_to_string(a) + " with shape " +
                        runtime::shape_to_string(b) + ": dimension -" + std::to_string(i + 1) +
                        " has sizes " + std::to_string(size_a) + " and " + std::to_string(size_b) +
                        " (expected equal sizes or one of them 1)");
    }
    out[rank - 1 - i] = size_a == 1 ? size_b : size_a;
  }
  return out;
}

bool broadcasts_to(Span<const int64_t> from, Span<const int64_t> to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  }
  return true;
}

std::vector<int64_t> broadcast_strides(Span<const int64_t> in_sizes,
                                       Span<const int64_t> out_sizes) {
  std::vector<int64_t> strides(out_sizes.size(), 0);
  const size_t lead = out_sizes.size() - in_sizes.size();
  int64_t stride = 1;
  for (size_t d = in_sizes.size(); d-- > 0;) {
    strides[lead + d] = in_sizes[d] == 1 ? 0 : stride;
    stride *= in_sizes[d];
  }
  return strides;
}

}  // namespace kiln::kernels
