#pragma once

// Quantization-parameter helpers shared by the quantization and integer-matmul kernels.
// Internal to kiln/kernels.

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln::kernels::internal {

/// Where the scale of element i of a tensor is: index (i / inner) % channels (channels 1 for
/// per-tensor parameters).
struct QuantAxis {
  int64_t channels = 1;
  int64_t inner = 1;
};

/// Validates a scale (and optional zero point of the same shape) for a tensor of shape `x`:
/// per tensor (one element, rank <= 1) or 1-D along `axis` (in [-rank, rank)). Errors:
/// InvalidArgument naming the axis or the parameter, its shape and what was expected.
runtime::Result<QuantAxis> quant_axis(std::string_view op, runtime::Span<const int64_t> x,
                                      const runtime::Tensor& scale,
                                      const runtime::Tensor* zero_point, int64_t axis,
                                      std::string_view scale_name,
                                      std::string_view zero_point_name);

/// The elements of a float tensor (f32, f64, f16, bf16) as double (zeros for other dtypes).
std::vector<double> float_values(const runtime::Tensor& t);

/// The first `count` elements of a u8, i8 or i32 zero point as i32 (zeros when `t` is null);
/// a one-element zero point fills only index 0 unless `count` is 1.
std::vector<int32_t> zero_point_values(const runtime::Tensor* t, size_t count);

}  // namespace kiln::kernels::internal
