// plan_delegates: which partitions of a method run on KilnBackend, and the functions of their
// model packages; PackageSet: the packages, stored once as named data.
#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/exporter/enumerate.h>
#include <kiln/exporter/lowering.h>
#include <kiln/runtime/executor/kernel_registry.h>
#include <kiln/runtime/executor/program_verify.h>

#include <cstdio>
#include <map>
#include <set>

namespace kiln::exporter {

namespace ir = engine::ir;
using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

constexpr const char* kSingleFunction = "main";

// A delegate costs its load a fixed few tenths of a millisecond (its package, cache key and
// lookup, plan); element-wise, reduction and shape ops on at most kLightElements values in all
// take microseconds on the reference kernels. A partition of only such ops beside a graph break
// (a data-dependent If's condition, say) stays on them; a method of one partition keeps its
// delegate whatever its work.
constexpr int64_t kLightElements = 16384;
// clang-format off
const std::set<std::string, std::less<>> kLightOps = {
    "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Erf", "Floor",
    "Ceil", "Round", "Sign", "Not", "Cast", "Identity", "Add", "Sub", "Mul", "Div", "Pow", "Max",
    "Min", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor",
    "Where", "Clip", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceSumSquare", "ArgMax", "ArgMin", "Shape", "Size", "Reshape",
    "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Concat", "Slice", "Gather", "Expand",
    "ConstantOfShape", "Constant"};
// clang-format on

// Why `graph` is too light to be worth a delegate, or nullopt: every op in kLightOps with a
// reference kernel, every value static, kLightElements or fewer read and written in all.
std::optional<std::string> light_work(const ir::Graph& graph) {
  int64_t elements = 0;
  auto add = [&](const std::vector<int>& values) {
    for (int v : values) {
      if (v < 0) continue;
      auto sizes = graph.values[static_cast<size_t>(v)].type.static_sizes();
      if (!sizes) return false;
      int64_t numel = 1;
      for (int64_t s : *sizes) numel *= s;
      elements += numel;
      if (elements > kLightElements) return false;
    }
    return true;
  };
  for (const ir::Node& node : graph.nodes) {
    if (kLightOps.count(node.op) == 0 || !node.regions.empty() ||
        runtime::get_kernel(node.op) == nullptr || !add(node.inputs) || !add(node.outputs)) {
      return std::nullopt;
    }
  }
  if (graph.nodes.empty()) return std::nullopt;
  return std::to_string(graph.nodes.size()) + " element-wise, reduction or shape op(s) over " +
         std::to_string(elements) + " values, less work than a delegate's load";
}

std::optional<std::string> unsupported_interface(const ir::Graph& graph) {
  for (int input : graph.inputs) {
    const ir::Value& v = graph.values[static_cast<size_t>(input)];
    if (!v.type.rank_known || v.type.shape.size() > runtime::kMaxTensorRank) {
      return "input '" + v.name + "' has an unknown rank or one above " +
             std::to_string(runtime::kMaxTensorRank);
    }
  }
  for (int output : graph.outputs) {
    const ir::Value& v = graph.values[static_cast<size_t>(output)];
    if (!v.type.rank_known || v.type.shape.size() > runtime::kMaxTensorRank) {
      return "output '" + v.name + "' has an unknown rank or one above " +
             std::to_string(runtime::kMaxTensorRank);
    }
  }
  if (graph.outputs.empty()) return std::string("it computes nothing the method uses");
  return std::nullopt;
}

// A static function is specialized once here so that what the engine rejects (shapes it cannot
// resolve, kernels failing on constants) falls back at export, not at load.
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

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The static functions partition function `graph` expands into under the method's enumerated
// combinations: one per distinct set of input shapes, named after the symbols its inputs use.
// Empty when its inputs use no enumerated symbol; nullopt when a shape cannot be evaluated
// (a data-dependent dim).
std::optional<std::vector<EnumeratedFunction>> enumerate_partition(
    const ir::Graph& graph, const std::string& prefix,
    const std::vector<EnumeratedFunction>& combinations) {
  std::set<std::string> used;
  for (int input : graph.inputs) {
    for (const ir::Dim& dim : graph.values[static_cast<size_t>(input)].type.shape) {
      collect_symbols(dim, used);
    }
  }
  std::vector<EnumeratedFunction> functions;
  std::set<std::vector<std::vector<int64_t>>> seen;
  for (const EnumeratedFunction& combination : combinations) {
    bool relevant = false;
    for (const std::string& symbol : combination.symbols) relevant |= used.count(symbol) > 0;
    if (!relevant) return std::vector<EnumeratedFunction>{};
    EnumeratedFunction f;
    f.name = prefix;
    for (const std::string& symbol : combination.symbols) {
      if (used.count(symbol) == 0) continue;
      int64_t value = combination.bindings.at(symbol);
      f.bindings[symbol] = value;
      f.symbols.push_back(symbol);
      f.name += "_" + sanitized_symbol(symbol) + "_" + std::to_string(value);
    }
    for (int input : graph.inputs) {
      std::vector<int64_t> shape;
      for (const ir::Dim& dim : graph.values[static_cast<size_t>(input)].type.shape) {
        auto size = dim.evaluate(f.bindings);
        if (!size.ok()) return std::nullopt;
        shape.push_back(*size);
      }
      f.input_shapes.push_back(std::move(shape));
    }
    if (seen.insert(f.input_shapes).second) functions.push_back(std::move(f));
  }
  return functions;
}

// Stores `bytes` as named data `key` unless the key is present (identical content).
void add_named_data(ProgramSpec& spec, const std::string& key, std::vector<uint8_t> bytes) {
  for (const auto& [existing, segment] : spec.named_data) {
    if (existing == key) return;
  }
  spec.segments.push_back(std::move(bytes));
  spec.named_data.emplace_back(key, static_cast<int>(spec.segments.size()) - 1);
}

// The compiled artifact of `package` for the default load options (compute_unit `all`), or
// empty when it has no static function to compile.
Result<std::vector<uint8_t>> aot_artifact(const engine::package::PackageView& package,
                                          bool expect_frequent_reshapes, const std::string& key) {
  auto options = engine::specialization::SpecializationOptions::from_compute_unit(
      "all", expect_frequent_reshapes);
  if (!options.ok()) return options.status();
  auto artifact = engine::ModelLoader::compile_artifact(package, *options);
  if (artifact.ok()) return artifact;
  if (artifact.error() == Error::NotSupported) return std::vector<uint8_t>{};
  return artifact.status().with_context("export --aot artifact of package '" + key + "'");
}

nlohmann::json interface_names(const ir::Graph& graph, const std::vector<int>& values) {
  nlohmann::json names = nlohmann::json::array();
  for (int v : values) names.push_back(graph.values[static_cast<size_t>(v)].name);
  return names;
}

}  // namespace

ir::Model& PackageSet::package_for_delegate(int& index) {
  if (!multifunction_ || packages_.empty()) {
    packages_.push_back(std::make_unique<ir::Model>());
    claims_.emplace_back();
  }
  index = static_cast<int>(packages_.size()) - 1;
  return *packages_.back();
}

Status PackageSet::claim(int package, const std::string& function, const std::string& delegate) {
  for (const auto& [name, owner] : claims_[static_cast<size_t>(package)]) {
    if (name == function) {
      return Status(Error::InvalidArgument,
                    "export: delegates '" + owner + "' and '" + delegate +
                        "' both make function '" + function +
                        "' of the shared model package (expected distinct function names; "
                        "rename a method)");
    }
  }
  claims_[static_cast<size_t>(package)].emplace_back(function, delegate);
  return Status();
}

void PackageSet::add_delegate(const std::string& method, size_t delegate_index, int package,
                              nlohmann::json manifest, const ExportOptions& options) {
  pending_.push_back(Pending{method, delegate_index, package, std::move(manifest), options.aot,
                             options.expect_frequent_reshapes});
}

Status PackageSet::finish(ProgramSpec& spec,
                          const std::function<void(const std::string&)>& on_note) {
  std::vector<std::string> keys, artifacts(packages_.size());
  for (size_t p = 0; p < packages_.size(); ++p) {
    auto bytes = engine::package::write_package(*packages_[p]);
    if (!bytes.ok()) return bytes.status().with_context("export model package");
    auto view = engine::package::PackageView::open(*bytes);
    if (!view.ok()) return view.status().with_context("export model package");
    std::string hash = hex64(view->content_hash());
    keys.push_back("kiln/package/" + hash);
    const Pending* aot = nullptr;
    for (const Pending& d : pending_) {
      if (d.package == static_cast<int>(p) && d.aot) aot = &d;
    }
    if (aot != nullptr) {
      KILN_ASSIGN_OR_RETURN(auto artifact,
                            aot_artifact(*view, aot->expect_frequent_reshapes, keys.back()));
      if (artifact.empty()) {
        if (on_note) {
          on_note("--aot: package '" + keys.back() +
                  "' has no function of static input shapes to compile ahead of time; its "
                  "functions are compiled on first use");
        }
      } else {
        artifacts[p] = "kiln/aot/" + hash;
        add_named_data(spec, artifacts[p], std::move(artifact));
      }
    }
    add_named_data(spec, keys.back(), std::move(bytes).get());
  }
  for (Pending& p : pending_) {
    p.manifest["package"] = keys[static_cast<size_t>(p.package)];
    const std::string& artifact = artifacts[static_cast<size_t>(p.package)];
    for (MethodSpec& method : spec.methods) {
      if (method.name != p.method) continue;
      DelegateSpec& delegate = method.delegates[p.delegate];
      std::string text = p.manifest.dump();
      delegate.processed.assign(text.begin(), text.end());
      if (!artifact.empty()) {
        delegate.compile_specs.emplace_back("aot_artifact",
                                            std::vector<uint8_t>(artifact.begin(), artifact.end()));
      }
    }
  }
  return Status();
}

Result<std::vector<DelegatedPartition>> plan_delegates(
    const ir::Model& model, const ir::Graph& graph, const std::string& method,
    const std::vector<Partition>& partitions, const ExportOptions& options, PackageSet& packages) {
  std::vector<EnumeratedFunction> combinations;
  bool enumerates = false;
  for (const DimEnumeration& e : options.enumerations) enumerates |= e.method == method;
  if (enumerates) {
    KILN_ASSIGN_OR_RETURN(combinations, enumerate_function(graph, method, 0, options.enumerations));
  }
  std::vector<DelegatedPartition> delegated;
  bool any_enumerated = false;
  for (size_t p = 0; p < partitions.size(); ++p) {
    if (partitions[p].is_break) continue;
    std::string id = method + "_" + std::to_string(delegated.size());
    ir::Model scratch;
    scratch.functions.push_back(extract_partition(model, graph, partitions[p], id, scratch));
    const ir::Graph& function = scratch.functions.back();
    std::optional<std::vector<EnumeratedFunction>> expanded;
    if (enumerates) expanded = enumerate_partition(function, id, combinations);
    if (enumerates && !expanded && options.on_note) {
      options.on_note("partition '" + id + "' of method '" + method +
                      "' has inputs of data-dependent shape: it is not enumerated");
    }
    bool is_enumerated = expanded && !expanded->empty();
    std::optional<std::string> reason =
        is_enumerated || partitions.size() == 1 ? std::nullopt : light_work(function);
    if (!reason) reason = unsupported_interface(function);
    if (!reason && !is_enumerated) reason = unsupported_specialization(scratch, function);
    if (reason) {
      if (options.on_note) {
        options.on_note("nodes '" + graph.nodes[static_cast<size_t>(partitions[p].nodes[0])].name +
                        "'.. of method '" + method +
                        "' use the portable lowering (reference kernels): " + *reason);
      }
      continue;
    }
    DelegatedPartition d;
    d.partition = p;
    d.id = id;
    ir::Model& package = packages.package_for_delegate(d.package);
    ir::Graph in_package = extract_partition(model, graph, partitions[p], id, package);
    d.manifest = {{"input_names", interface_names(function, function.inputs)},
                  {"output_names", interface_names(function, function.outputs)}};
    if (is_enumerated) {
      any_enumerated = true;
      d.manifest["enumerated"] = true;
      d.manifest["enumerated_functions"] = nlohmann::json::array();
      for (const EnumeratedFunction& f : *expanded) {
        KILN_RETURN_IF_ERROR(packages.claim(d.package, f.name, id));
        package.functions.push_back(static_function(in_package, f));
        d.manifest["enumerated_functions"].push_back(
            {{"function", f.name}, {"input_shapes", f.input_shapes}});
      }
    } else {
      std::string name = options.multifunction ? id : kSingleFunction;
      KILN_RETURN_IF_ERROR(packages.claim(d.package, name, id));
      in_package.name = name;
      package.functions.push_back(std::move(in_package));
      d.manifest["function"] = name;
    }
    if (options.expect_frequent_reshapes) {
      d.compile_specs.emplace_back("expect_frequent_reshapes",
                                   std::vector<uint8_t>{'t', 'r', 'u', 'e'});
    }
    delegated.push_back(std::move(d));
  }
  if (enumerates && !any_enumerated) {
    return Status(Error::InvalidArgument,
                  "export method '" + method +
                      "': --enumerate has nothing to expand (expected a partition on KilnBackend "
                      "whose inputs use the enumerated dimensions; see the notes for why none "
                      "runs there)");
  }
  return delegated;
}

}  // namespace kiln::exporter
