#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/exporter/enumerate.h>
#include <kiln/exporter/writer/program_spec.h>
#include <kiln/runtime/core/result.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::exporter {

/// `--bound METHOD:INPUT:DIM=MAX`: plan input INPUT's dimension DIM statically up to MAX.
struct DimBound {
  std::string method;
  std::string input;
  int dim = 0;
  int64_t max = 0;
};

struct ExportOptions {
  /// "kiln" (the default): the whole function becomes one KilnBackend delegate over a model
  /// package, or (with a note) the portable lowering when the engine cannot run it.
  /// "portable": reference kernels only.
  std::string backend = "kiln";
  std::vector<DimBound> bounds;
  /// `--enumerate` flags: each enumerated method becomes one KilnBackend delegate over one
  /// static function per combination of the listed sizes (kiln backend only).
  std::vector<DimEnumeration> enumerations;
  uint32_t segment_alignment = 4096;
  /// Receives notes a user should see (e.g. a fallback to the portable lowering). Optional.
  std::function<void(const std::string&)> on_note;
};

/// Lowers function `function` of `model` into method `method_name` of `spec`: one KernelCall per
/// node, weights in segments (identical weights once), tensors of static shape in arenas planned
/// by lifetime, tensors with dynamic dims allocated at run time (or planned up to a bound).
/// Errors: OperatorMissing naming the node and operator when no kernel is registered for it;
/// InvalidArgument for a bound naming an unknown input or dim.
runtime::Status lower_to_portable(const engine::ir::Model& model, const std::string& function,
                                  const std::string& method_name, const ExportOptions& options,
                                  ProgramSpec& spec);

/// Checks each bound of `options` for method `method_name` against `graph`'s inputs. Errors:
/// InvalidArgument naming an unknown input, or a dim or max out of range.
runtime::Status check_bounds(const engine::ir::Graph& graph, const std::string& method_name,
                             const ExportOptions& options);

/// Why the engine cannot run function `function` of `model` as one KilnBackend delegate (a
/// data-dependent If, an operator with no kernel, an output that is an input or a weight, a
/// static function that fails to specialize, ...), or nothing when it can.
std::optional<std::string> kiln_unsupported_reason(const engine::ir::Model& model,
                                                   const std::string& function);

/// Lowers function `function` of `model` into method `method_name` of `spec` as one
/// KilnBackend delegate: the model package (the function alone, named "main") stored once as
/// named data "kiln/package/<content hash hex>", a DelegateCall over the method's inputs and
/// outputs (static tensors, or unbounded ones for symbolic dims; inputs bounded by `--bound`
/// are planned up to the bound), and the JSON manifest as the delegate's processed bytes.
/// Errors: as `check_bounds` and `write_package`; NotFound for an unknown function.
runtime::Status lower_to_kiln(const engine::ir::Model& model, const std::string& function,
                              const std::string& method_name, const ExportOptions& options,
                              ProgramSpec& spec);

/// Imports `onnx_path` and exports it as a one-method ("forward") program. Errors: as
/// `import_onnx_file` and `lower_to_portable`.
runtime::Result<std::vector<uint8_t>> export_onnx_file(const std::string& onnx_path,
                                                       const ExportOptions& options = {});

}  // namespace kiln::exporter
