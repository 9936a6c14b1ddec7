#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::backends {

/// The processed bytes of a KilnBackend delegate (DESIGN.md §3 "Delegate blob"), a JSON object:
///
///   {"package": "kiln/package/<hash hex>", "input_names": ["x"], "output_names": ["y"],
///    "function": "main"}
///
/// `package` is the named-data key of the model package; `input_names` / `output_names` are the
/// function's inputs and outputs, in the order of the delegate call's arguments.
struct Manifest {
  std::string package;
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  /// The one function the delegate runs.
  std::string function;
};

/// Parses and validates a manifest. Errors (each naming the field): InvalidArgument for bytes
/// that are not a JSON object, a missing required field (`package`, `input_names`,
/// `output_names`), a field of the wrong type, an empty name, a duplicate name within
/// `input_names` or `output_names`, an unknown field, both or neither of `function` and
/// `enumerated`; NotSupported for the `enumerated` form, which this build does not run yet.
runtime::Result<Manifest> parse_manifest(runtime::Span<const uint8_t> bytes);

}  // namespace kiln::backends
