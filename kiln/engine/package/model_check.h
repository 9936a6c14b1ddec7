#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::package {

/// Checks what both the package writer and reader require of a model: every dtype valid,
/// every value, weight and region index in range, weight sizes non-negative with an element
/// count that fits in 64 bits, a weight-backed value agreeing with its weight's dtype and sizes,
/// an unknown rank without dims, unique function names, and values that flow forward (a node
/// reads function inputs, weights and earlier nodes' outputs, each value is written once, and
/// every function and region output is written). Weight bytes are not checked here.
/// Errors: `code` with a message that starts with `action` and names the culprit.
runtime::Status check_model(const ir::Model& model, runtime::Error code, const std::string& action);

/// The byte count of `numel(sizes) * element_size(dtype)`, or empty when a size is negative or
/// the count overflows 64 bits. `dtype` must be valid.
std::optional<uint64_t> weight_byte_count(runtime::ScalarType dtype,
                                          const std::vector<int64_t>& sizes);

}  // namespace kiln::engine::package
