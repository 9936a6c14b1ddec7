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
  /// "kiln" (the default): each partition of a method (its nodes between graph breaks, see
  /// partition.h) becomes a KilnBackend delegate over a model package, or (with a note) runs on
  /// the reference kernels when the engine cannot take it. "portable": reference kernels only.
  std::string backend = "kiln";
  std::vector<DimBound> bounds;
  /// `--enumerate` flags: each enumerated partition becomes one static function per
  /// combination of the listed sizes, which its delegate dispatches to (kiln backend only).
  std::vector<DimEnumeration> enumerations;
  /// `--multifunction`: every delegate's functions go into one model package shared by all
  /// methods (`<method>_<i>`, weights stored once by content); else one package per delegate
  /// with the function `main`.
  bool multifunction = false;
  /// `--expect-frequent-reshapes`: each delegate carries the compile spec
  /// `expect_frequent_reshapes` = "true", the default of the load-time option.
  bool expect_frequent_reshapes = false;
  /// `--aot`: specialize each package at export and embed its compiled artifact. It is used
  /// where its cache key matches: the same CPU features and thread count as the exporting
  /// machine's default (all its CPUs); elsewhere the load compiles, with a warning.
  bool aot = false;
  /// false with `--no-pattern-rewrites`: import each graph as written, without rewriting
  /// decomposed patterns (GELU, layer normalization, a Conv's BatchNormalization) into single ops
  /// (`engine::passes::rewrite_patterns`), nor merging repeated nodes
  /// (`engine::passes::merge_common_subexpressions`): to compare results with the graph as
  /// exported.
  bool rewrite_patterns = true;
  uint32_t segment_alignment = 4096;
  /// Receives notes a user should see (e.g. a fallback to the portable lowering). Optional.
  std::function<void(const std::string&)> on_note;
};

/// One method of a program to export: its name and the ONNX model it runs (graph "forward"
/// of the import). Settings left empty take the ExportOptions' value.
struct MethodSource {
  std::string name;
  std::string onnx_path;
  std::optional<bool> multifunction;
  std::optional<bool> expect_frequent_reshapes;
  std::optional<bool> aot;
};

/// Imports each method's model and exports them as one program (DESIGN.md §5). Errors:
/// InvalidArgument for no method, a duplicate or empty method name, methods that disagree on
/// `multifunction` (naming those that are not), methods of one shared package that disagree on
/// another compile setting (naming it), a flag naming an unknown method, multifunction or
/// enumerations with the portable backend; as `import_onnx_file`, `enumerate_function` and the
/// lowering otherwise.
runtime::Result<std::vector<uint8_t>> export_program(const std::vector<MethodSource>& methods,
                                                     const ExportOptions& options = {});

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

/// Imports `onnx_path` and exports it as a one-method ("forward") program: `export_program`
/// with that one method.
runtime::Result<std::vector<uint8_t>> export_onnx_file(const std::string& onnx_path,
                                                       const ExportOptions& options = {});

}  // namespace kiln::exporter
