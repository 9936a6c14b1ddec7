// lower_to_kiln: an IR function → one KilnBackend delegate over a model package in named data.
#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/package/package.h>
#include <kiln/exporter/enumerate.h>
#include <kiln/exporter/export.h>
#include <kiln/runtime/executor/kernel_registry.h>
#include <kiln/runtime/executor/program_verify.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

namespace kiln::exporter {

namespace ir = engine::ir;
using runtime::Error;
using runtime::ShapeDynamism;
using runtime::Status;

namespace {

constexpr const char* kBackendId = "KilnBackend";
constexpr const char* kPackageFunction = "main";

std::optional<std::string> unsupported_node(const std::vector<ir::Node>& nodes) {
  for (const auto& node : nodes) {
    if (node.op == "If" && node.regions.size() == 2) {
      return "node '" + node.name + "' (If) branches on data, which the engine does not compile";
    }
    if (runtime::get_kernel(node.op) == nullptr) {
      return "node '" + node.name + "' (" + node.op + ") has no kernel";
    }
  }
  return std::nullopt;
}

std::optional<std::string> unsupported_interface(const ir::Graph& graph) {
  std::set<int> seen(graph.inputs.begin(), graph.inputs.end());
  for (int input : graph.inputs) {
    const ir::Value& v = graph.values[static_cast<size_t>(input)];
    if (!v.type.rank_known || v.type.shape.size() > runtime::kMaxTensorRank) {
      return "input '" + v.name + "' has an unknown rank or one above " +
             std::to_string(runtime::kMaxTensorRank);
    }
  }
  for (int output : graph.outputs) {
    const ir::Value& v = graph.values[static_cast<size_t>(output)];
    if (v.weight >= 0 || !seen.insert(output).second) {
      return "output '" + v.name + "' is a weight, an input or another output";
    }
    if (v.type.shape.size() > runtime::kMaxTensorRank) {
      return "output '" + v.name + "' has rank " + std::to_string(v.type.shape.size());
    }
  }
  return std::nullopt;
}

// A static function is specialized once here so that what the engine rejects (today: shapes
// it cannot resolve, kernels failing on constants) falls back at export, not at load.
std::optional<std::string> unsupported_specialization(const ir::Model& model,
                                                      const ir::Graph& graph) {
  std::vector<std::vector<int64_t>> sizes;
  for (int input : graph.inputs) {
    auto s = graph.values[static_cast<size_t>(input)].type.static_sizes();
    if (!s) return std::nullopt;
    sizes.push_back(*s);
  }
  engine::specialization::SpecializationOptions options;
  options.allowed_kinds = {engine::specialization::ComputeKind::Cpu};
  auto compiled = engine::compile::specialize(model, graph.name, sizes, options);
  if (compiled.ok()) return std::nullopt;
  return "the engine cannot specialize it: " + compiled.status().message();
}

const DimBound* bound_for(const ExportOptions& options, const std::string& method,
                          const std::string& input, size_t dim) {
  for (const auto& b : options.bounds) {
    if (b.method == method && b.input == input && b.dim == static_cast<int>(dim)) return &b;
  }
  return nullptr;
}

// The method-side tensor of a delegate argument: static when the IR shape is, bounded when a
// `--bound` covers every symbolic dim of an input, unbounded (allocated at run time) otherwise.
ValueSpec argument_value(const ir::Value& v, const ExportOptions& options,
                         const std::string& method, bool is_input) {
  ValueSpec value;
  TensorSpec& t = value.tensor;
  t.dtype = v.type.dtype;
  bool all_bounded = is_input;
  bool any_symbolic = false;
  for (size_t d = 0; d < v.type.shape.size(); ++d) {
    const ir::Dim& dim = v.type.shape[d];
    const DimBound* b = is_input ? bound_for(options, method, v.name, d) : nullptr;
    if (dim.is_static()) {
      t.sizes.push_back(dim.value());
    } else {
      any_symbolic = true;
      all_bounded = all_bounded && b != nullptr;
      t.sizes.push_back(b != nullptr ? b->max : 0);
    }
    t.dim_names.push_back(dim.is_static() ? "" : dim.to_string());
  }
  if (!any_symbolic && v.type.rank_known) {
    t.dynamism = ShapeDynamism::Static;
    t.dim_names.clear();
  } else {
    t.dynamism =
        all_bounded && v.type.rank_known ? ShapeDynamism::Bounded : ShapeDynamism::Unbounded;
  }
  return value;
}

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The package holding the one function, named "main", or the enumerated static functions, and
// the weights they use (once).
runtime::Result<std::vector<uint8_t>> function_package(
    const ir::Model& model, const ir::Graph& graph,
    const std::vector<EnumeratedFunction>& enumerated) {
  ir::Model package;
  package.weights = model.weights;
  if (enumerated.empty()) {
    package.functions.push_back(graph);
    package.functions.back().name = kPackageFunction;
  }
  for (const EnumeratedFunction& f : enumerated) {
    package.functions.push_back(static_function(graph, f));
  }
  return engine::package::write_package(package);
}

// An enumerated method's input: bounded by the largest listed size of each dim (static when
// every function has the same size there).
ValueSpec enumerated_input(const ir::Value& v, size_t input,
                           const std::vector<EnumeratedFunction>& enumerated) {
  ValueSpec value;
  TensorSpec& t = value.tensor;
  t.dtype = v.type.dtype;
  bool varies = false;
  for (size_t d = 0; d < v.type.shape.size(); ++d) {
    int64_t largest = 0;
    for (const EnumeratedFunction& f : enumerated) {
      largest = std::max(largest, f.input_shapes[input][d]);
      varies = varies || f.input_shapes[input][d] != enumerated[0].input_shapes[input][d];
    }
    t.sizes.push_back(largest);
    const ir::Dim& dim = v.type.shape[d];
    t.dim_names.push_back(dim.is_static() ? "" : dim.to_string());
  }
  t.dynamism = varies ? ShapeDynamism::Bounded : ShapeDynamism::Static;
  if (!varies) t.dim_names.clear();
  return value;
}

}  // namespace

std::optional<std::string> kiln_unsupported_reason(const ir::Model& model,
                                                   const std::string& function) {
  const ir::Graph* graph = model.find_function(function);
  if (graph == nullptr) return std::nullopt;  // lowering reports it
  if (auto reason = unsupported_node(graph->nodes)) return reason;
  if (auto reason = unsupported_interface(*graph)) return reason;
  return unsupported_specialization(model, *graph);
}

Status lower_to_kiln(const ir::Model& model, const std::string& function,
                     const std::string& method_name, const ExportOptions& options,
                     ProgramSpec& spec) {
  const ir::Graph* graph = model.find_function(function);
  if (graph == nullptr) {
    return Status(Error::NotFound, "export function '" + function + "': no such function");
  }
  KILN_RETURN_IF_ERROR(check_bounds(*graph, method_name, options));
  std::string where = "export method '" + method_name + "' for KilnBackend";
  std::vector<EnumeratedFunction> enumerated;
  bool enumerates = std::any_of(options.enumerations.begin(), options.enumerations.end(),
                                [&](const DimEnumeration& e) { return e.method == method_name; });
  if (enumerates) {
    KILN_ASSIGN_OR_RETURN(enumerated,
                          enumerate_function(*graph, method_name, 0, options.enumerations));
  }
  auto package = function_package(model, *graph, enumerated);
  if (!package.ok()) return package.status().with_context(where);
  auto view = engine::package::PackageView::open(*package);
  if (!view.ok()) return view.status().with_context(where);
  std::string key = "kiln/package/" + hex64(view->content_hash());

  MethodSpec method;
  method.name = method_name;
  nlohmann::json manifest = {{"package", key},
                             {"input_names", nlohmann::json::array()},
                             {"output_names", nlohmann::json::array()}};
  if (enumerated.empty()) {
    manifest["function"] = kPackageFunction;
  } else {
    manifest["enumerated"] = true;
    manifest["enumerated_functions"] = nlohmann::json::array();
    for (const EnumeratedFunction& f : enumerated) {
      manifest["enumerated_functions"].push_back(
          {{"function", f.name}, {"input_shapes", f.input_shapes}});
    }
  }
  InstructionSpec call;
  call.kind = InstructionSpec::Kind::Delegate;
  call.is_delegate = true;
  call.delegate = 0;
  for (int input : graph->inputs) {
    const ir::Value& v = graph->values[static_cast<size_t>(input)];
    method.values.push_back(enumerated.empty()
                                ? argument_value(v, options, method_name, /*is_input=*/true)
                                : enumerated_input(v, method.inputs.size(), enumerated));
    int index = static_cast<int>(method.values.size()) - 1;
    method.inputs.push_back(index);
    method.input_names.push_back(v.name);
    call.inputs.push_back(index);
    manifest["input_names"].push_back(v.name);
  }
  for (int output : graph->outputs) {
    const ir::Value& v = graph->values[static_cast<size_t>(output)];
    method.values.push_back(argument_value(v, options, method_name, /*is_input=*/false));
    int index = static_cast<int>(method.values.size()) - 1;
    method.outputs.push_back(index);
    method.output_names.push_back(v.name);
    call.outputs.push_back(index);
    manifest["output_names"].push_back(v.name);
  }
  method.instructions.push_back(std::move(call));
  DelegateSpec delegate;
  delegate.id = method_name + "_0";
  delegate.backend_id = kBackendId;
  std::string text = manifest.dump();
  delegate.processed.assign(text.begin(), text.end());
  method.delegates.push_back(std::move(delegate));

  bool stored = false;
  for (const auto& [existing, segment] : spec.named_data) stored = stored || existing == key;
  if (!stored) {
    spec.segments.push_back(std::move(package).get());
    spec.named_data.emplace_back(key, static_cast<int>(spec.segments.size()) - 1);
  }
  spec.methods.push_back(std::move(method));
  return Status();
}

}  // namespace kiln::exporter
