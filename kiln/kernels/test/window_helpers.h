#pragma once

// The window geometry of the naive convolution and pooling loops in the kernel tests.

#include <cstdint>
#include <vector>

namespace kiln::kernels::test_helpers {

/// One sliding window over S spatial axes with explicit pads (the naive loops' input); every
/// member has S entries.
struct Geometry {
  using Shape = std::vector<int64_t>;
  Shape kernel, stride, dilation, pad_begin, pad_end;

  /// The output sizes over spatial sizes `in` (floor rounding, as the ops without ceil_mode).
  Shape out_sizes(const Shape& in) const {
    Shape out;
    for (size_t a = 0; a < in.size(); ++a) {
      const int64_t extent = (kernel[a] - 1) * dilation[a] + 1;
      out.push_back((in[a] + pad_begin[a] + pad_end[a] - extent) / stride[a] + 1);
    }
    return out;
  }
  /// The pads in the ops' attribute form: [begin..., end...].
  Shape pads() const {
    Shape p = pad_begin;
    p.insert(p.end(), pad_end.begin(), pad_end.end());
    return p;
  }
};

}  // namespace kiln::kernels::test_helpers
