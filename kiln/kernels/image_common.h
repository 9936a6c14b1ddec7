#pragma once

// Helpers shared by the image operators (Resize, Upsample, GridSample, RoiAlign,
// NonMaxSuppression): float inputs read as doubles and string attributes. Internal to
// kiln/kernels.

#include <kiln/kernels/adapter.h>

#include <string>
#include <string_view>
#include <vector>

namespace kiln::kernels::internal {

/// The elements of input `index`, a 0-D or 1-D tensor of dtype f32, f64, f16 or bf16 (Resize's
/// `roi` and `scales`, NonMaxSuppression's thresholds), as double. Errors: InvalidType or
/// InvalidArgument naming the input and `name` ("input 2 (scales)").
runtime::Result<std::vector<double>> read_float_list(std::string_view op,
                                                     runtime::Span<runtime::EValue* const> inputs,
                                                     size_t index, std::string_view name);

/// Reads string attribute `name`, prefixing the op to any error.
runtime::Result<std::string> string_attribute(std::string_view op,
                                              const runtime::Attributes& attributes,
                                              std::string_view name, std::string fallback);

/// Reads float attribute `name` (an int reads as well), prefixing the op to any error.
runtime::Result<double> double_attribute(std::string_view op,
                                         const runtime::Attributes& attributes,
                                         std::string_view name, double fallback);

}  // namespace kiln::kernels::internal
