#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::backends {

/// The input shapes of one call: one shape per input, in `input_names` order.
using Shapes = std::vector<std::vector<int64_t>>;

/// The largest dim an enumerated input shape may list (larger values are rejected as a mistake).
inline constexpr int64_t kMaxManifestDim = (int64_t{1} << 31) - 1;

/// One entry of the enumerated form: a static function and the input shapes it is bound to.
struct EnumeratedFunction {
  std::string function;
  Shapes input_shapes;
};

/// The processed bytes of a KilnBackend delegate (DESIGN.md §3 "Delegate blob"), a JSON object
/// in one of two forms:
///
///   {"package": "kiln/package/<hash hex>", "input_names": ["x"], "output_names": ["y"],
///    "function": "main"}
///
///   {"package": "kiln/package/<hash hex>", "input_names": ["x"], "output_names": ["y"],
///    "enumerated": true,
///    "enumerated_functions": [{"function": "prefill_0_seq_64", "input_shapes": [[1, 64]]},
///                             {"function": "prefill_0_seq_128", "input_shapes": [[1, 128]]}]}
///
/// `package` is the named-data key of the model package; `input_names` / `output_names` are the
/// function's inputs and outputs, in the order of the delegate call's arguments. In the
/// enumerated form, each call runs the function whose `input_shapes` (one shape per input, in
/// `input_names` order) equal the call's input shapes.
struct Manifest {
  std::string package;
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  /// The one function the delegate runs; empty in the enumerated form.
  std::string function;
  /// True for the enumerated form, whose functions are listed in `enumerated_functions`
  /// (manifest order, at least one, distinct names, distinct shapes).
  bool enumerated = false;
  std::vector<EnumeratedFunction> enumerated_functions;
};

/// Parses and validates a manifest. Errors, all InvalidArgument naming the field (and the item
/// index within a list): bytes that are not a JSON object; a missing required field (`package`,
/// `input_names`, `output_names`); a field of the wrong type; an empty name; a duplicate name
/// within `input_names` or `output_names`; an unknown field (at the top level or in an entry of
/// `enumerated_functions`); both or neither of `function` and `enumerated_functions`;
/// `enumerated` given with `function`, or missing or not `true` with `enumerated_functions`; an
/// empty `enumerated_functions`; a duplicate function name; an entry whose `input_shapes` count
/// differs from `input_names`'; a dim that is not an integer or lies outside
/// 1..`kMaxManifestDim`; two entries with equal `input_shapes`.
runtime::Result<Manifest> parse_manifest(runtime::Span<const uint8_t> bytes);

}  // namespace kiln::backends
