#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>

#include <string>

namespace kiln::exporter {

struct ImportOptions {
  /// Name of the function the graph becomes.
  std::string function_name = "forward";
  /// Fold constant subgraphs (shape arithmetic and the like) into weights.
  bool fold_constants = true;
  /// Rewrite decomposed patterns into single ops (erf GELU → Gelu, division by a constant
  /// scalar → multiplication, layer normalization → LayerNormalization, a Conv's
  /// BatchNormalization and per-channel Mul/Div/Add/Sub folded into its weights), see
  /// `engine::passes::rewrite_patterns`; then merge nodes that compute the same thing
  /// (`engine::passes::merge_common_subexpressions`).
  bool rewrite_patterns = true;
};

/// Imports a serialized ONNX model (IR 3+, default-domain opsets 7–18) into an IR model with one
/// function. Initializers and Constant nodes become weights (identical ones stored once); ONNX
/// shape inference supplies dtypes and shapes, with named dims kept as symbols; an `If` whose
/// condition is known is replaced by its branch; constant subgraphs are folded with the
/// reference kernels.
///
/// Errors name the node, its operator and the problem: InvalidProgram for a corrupt or
/// inconsistent model (`import model 'm.onnx': not a valid ONNX protobuf`), NotSupported for
/// what kiln does not handle (other domains, sequence/map/optional types, data-dependent `If`,
/// opsets outside 7–18).
runtime::Result<engine::ir::Model> import_onnx(const std::string& bytes,
                                               const std::string& source_name,
                                               const ImportOptions& options = {});

/// Reads `path` and imports it. Errors: AccessFailed naming the path, else as `import_onnx`.
runtime::Result<engine::ir::Model> import_onnx_file(const std::string& path,
                                                    const ImportOptions& options = {});

}  // namespace kiln::exporter
