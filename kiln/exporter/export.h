#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/exporter/writer/program_spec.h>
#include <kiln/runtime/core/result.h>

#include <cstdint>
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
  /// "portable" (reference kernels only). "kiln" comes with the engine.
  std::string backend = "portable";
  std::vector<DimBound> bounds;
  uint32_t segment_alignment = 4096;
};

/// Lowers function `function` of `model` into method `method_name` of `spec`: one KernelCall per
/// node, weights in segments (identical weights once), tensors of static shape in arenas planned
/// by lifetime, tensors with dynamic dims allocated at run time (or planned up to a bound).
/// Errors: OperatorMissing naming the node and operator when no kernel is registered for it;
/// InvalidArgument for a bound naming an unknown input or dim.
runtime::Status lower_to_portable(const engine::ir::Model& model, const std::string& function,
                                  const std::string& method_name, const ExportOptions& options,
                                  ProgramSpec& spec);

/// Imports `onnx_path` and exports it as a one-method ("forward") program. Errors: as
/// `import_onnx_file` and `lower_to_portable`.
runtime::Result<std::vector<uint8_t>> export_onnx_file(const std::string& onnx_path,
                                                       const ExportOptions& options = {});

}  // namespace kiln::exporter
