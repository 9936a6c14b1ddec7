// lower_method: an IR function → a method of DelegateCalls (partitions on KilnBackend) and
// KernelCalls (the rest) over planned memory.
#include <kiln/engine/plan/memory_planner.h>
#include <kiln/exporter/lowering.h>
#include <kiln/runtime/executor/kernel_registry.h>
#include <kiln/runtime/executor/program_verify.h>

#include <algorithm>
#include <map>

namespace kiln::exporter {

namespace ir = engine::ir;
using runtime::Error;
using runtime::Result;
using runtime::ShapeDynamism;
using runtime::Status;

namespace {

class Lowering {
 public:
  Lowering(const ir::Model& model, const ir::Graph& graph, const ExportOptions& options,
           ConstantPool& constants, ProgramSpec& spec)
      : model_(model), graph_(graph), options_(options), constants_(constants), spec_(spec),
        values_(graph.values.size(), -1) {}

  Status run(const std::string& method_name, const std::vector<Partition>& partitions,
             const std::vector<DelegatedPartition>& delegated, PackageSet& packages) {
    method_.name = method_name;
    KILN_RETURN_IF_ERROR(check_kernels(partitions, delegated));
    for (int input : graph_.inputs) {
      KILN_ASSIGN_OR_RETURN(int index, value(input));
      method_.inputs.push_back(index);
      method_.input_names.push_back(graph_.values[static_cast<size_t>(input)].name);
    }
    std::vector<const DelegatedPartition*> delegate_of(partitions.size(), nullptr);
    for (const DelegatedPartition& d : delegated) delegate_of[d.partition] = &d;
    for (size_t p = 0; p < partitions.size(); ++p) {
      if (delegate_of[p] != nullptr) {
        KILN_RETURN_IF_ERROR(add_delegate_call(partitions[p], *delegate_of[p], packages));
        continue;
      }
      for (int n : partitions[p].nodes) {
        KILN_RETURN_IF_ERROR(add_node(graph_.nodes[static_cast<size_t>(n)]));
      }
    }
    for (int output : graph_.outputs) {
      KILN_ASSIGN_OR_RETURN(int index, value(output));
      method_.outputs.push_back(index);
      method_.output_names.push_back(graph_.values[static_cast<size_t>(output)].name);
    }
    plan();
    spec_.methods.push_back(std::move(method_));
    return Status();
  }

 private:
  static void find_missing(const std::vector<ir::Node>& nodes, std::string& missing) {
    for (const auto& node : nodes) {
      if (is_graph_break(node)) {
        for (const auto& region : node.regions) find_missing(region.nodes, missing);
        continue;
      }
      if (runtime::get_kernel(node.op) != nullptr) continue;
      if (missing.find("operator " + node.op + " ") != std::string::npos) continue;
      missing += (missing.empty() ? "" : "; ") + std::string("operator ") + node.op +
                 " (node '" + node.name + "')";
    }
  }

  // Every node needs a reference kernel: delegated ones too, as the engine's fallback.
  Status check_kernels(const std::vector<Partition>&, const std::vector<DelegatedPartition>&) {
    std::string missing;
    find_missing(graph_.nodes, missing);
    if (missing.empty()) return Status();
    return Status(Error::OperatorMissing, "export method '" + method_.name + "' (function '" +
                                              graph_.name + "'): no kernel implements " +
                                              missing);
  }

  const DimBound* bound_for(int value, size_t dim) const {
    for (const auto& b : options_.bounds) {
      if (b.method == method_.name && b.input == graph_.values[static_cast<size_t>(value)].name &&
          b.dim == static_cast<int>(dim)) {
        return &b;
      }
    }
    return nullptr;
  }

  // The method value of graph value `index`, added on first use (-1 stays -1: an absent input).
  Result<int> value(int index) {
    if (index < 0) return index;
    int& mapped = values_[static_cast<size_t>(index)];
    if (mapped >= 0) return mapped;
    KILN_ASSIGN_OR_RETURN(ValueSpec spec, value_spec(index));
    method_.values.push_back(std::move(spec));
    mapped = static_cast<int>(method_.values.size()) - 1;
    return mapped;
  }

  Result<ValueSpec> value_spec(int index) {
    const ir::Value& v = graph_.values[static_cast<size_t>(index)];
    size_t rank = v.weight >= 0 ? model_.weights[static_cast<size_t>(v.weight)].sizes.size()
                                : v.type.shape.size();
    if (rank > runtime::kMaxTensorRank) {
      return Status(Error::NotSupported,
                    "export method '" + method_.name + "': value '" + v.name + "' has rank " +
                        std::to_string(rank) + " (programs hold tensors of rank at most " +
                        std::to_string(runtime::kMaxTensorRank) + ")");
    }
    ValueSpec value;
    TensorSpec& t = value.tensor;
    t.dtype = v.type.dtype;
    if (v.weight >= 0) {
      const ir::Weight& w = model_.weights[static_cast<size_t>(v.weight)];
      t.dtype = w.dtype;
      t.sizes = w.sizes;
      constants_.place(w, t);
      return value;
    }
    bool is_static = v.type.is_static();
    bool bounded = false;
    for (size_t d = 0; d < v.type.shape.size(); ++d) {
      const ir::Dim& dim = v.type.shape[d];
      if (const DimBound* b = bound_for(index, d)) {
        bounded = true;
        t.sizes.push_back(b->max);
      } else {
        t.sizes.push_back(dim.is_static() ? dim.value() : 0);
      }
      t.dim_names.push_back(dim.is_static() ? "" : dim.to_string());
    }
    if (!is_static && !dim_names_used(t.dim_names)) t.dim_names.clear();
    if (is_static) {
      t.dynamism = ShapeDynamism::Static;
    } else if (bounded && all_dims_known(index, t)) {
      t.dynamism = ShapeDynamism::Bounded;
    } else {
      t.dynamism = ShapeDynamism::Unbounded;
    }
    if (is_static) t.dim_names.clear();
    return value;
  }

  static bool dim_names_used(const std::vector<std::string>& names) {
    for (const auto& n : names) {
      if (!n.empty()) return true;
    }
    return false;
  }

  bool all_dims_known(int index, const TensorSpec& t) const {
    const auto& shape = graph_.values[static_cast<size_t>(index)].type.shape;
    if (!graph_.values[static_cast<size_t>(index)].type.rank_known) return false;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!shape[d].is_static() && bound_for(index, d) == nullptr) return false;
    }
    return t.sizes.size() == shape.size();
  }

  int add_scalar(runtime::EValue scalar) {
    ValueSpec value;
    value.is_tensor = false;
    value.scalar = std::move(scalar);
    method_.values.push_back(std::move(value));
    return static_cast<int>(method_.values.size()) - 1;
  }

  Status add_delegate_call(const Partition& partition, const DelegatedPartition& d,
                           PackageSet& packages) {
    InstructionSpec call;
    call.kind = InstructionSpec::Kind::Delegate;
    call.is_delegate = true;
    call.delegate = static_cast<int>(method_.delegates.size());
    for (int input : partition.inputs) {
      KILN_ASSIGN_OR_RETURN(int index, value(input));
      call.inputs.push_back(index);
    }
    for (int output : partition.outputs) {
      KILN_ASSIGN_OR_RETURN(int index, value(output));
      call.outputs.push_back(index);
    }
    method_.instructions.push_back(std::move(call));
    DelegateSpec delegate;
    delegate.id = d.id;
    delegate.backend_id = kKilnBackendId;
    delegate.compile_specs = d.compile_specs;
    packages.add_delegate(method_.name, method_.delegates.size(), d.package, d.manifest, options_);
    method_.delegates.push_back(std::move(delegate));
    return Status();
  }

  Status add_node(const ir::Node& node) {
    return is_graph_break(node) ? add_if(node) : add_instruction(node);
  }

  size_t add_jump_false(int condition) {
    InstructionSpec jump;
    jump.kind = InstructionSpec::Kind::JumpFalse;
    jump.inputs = {condition};
    method_.instructions.push_back(std::move(jump));
    return method_.instructions.size() - 1;
  }

  Status add_branch(const ir::Node& node, const ir::Region& region) {
    for (const auto& inner : region.nodes) KILN_RETURN_IF_ERROR(add_node(inner));
    for (size_t i = 0; i < node.outputs.size() && i < region.outputs.size(); ++i) {
      if (node.outputs[i] < 0) continue;
      InstructionSpec move;
      move.kind = InstructionSpec::Kind::Move;
      KILN_ASSIGN_OR_RETURN(int source, value(region.outputs[i]));
      KILN_ASSIGN_OR_RETURN(int destination, value(node.outputs[i]));
      move.inputs = {source};
      move.outputs = {destination};
      method_.instructions.push_back(std::move(move));
    }
    return Status();
  }

  // If: jump to the else branch when the condition is false; the then branch ends with an
  // unconditional jump (on a constant false) past the else branch. Each branch moves its
  // results into the If's outputs. Jumps go forward only, as the runtime requires.
  Status add_if(const ir::Node& node) {
    KILN_ASSIGN_OR_RETURN(int condition, value(node.inputs[0]));
    size_t to_else = add_jump_false(condition);
    KILN_RETURN_IF_ERROR(add_branch(node, node.regions[0]));
    size_t to_end = add_jump_false(add_scalar(runtime::EValue(false)));
    method_.instructions[to_else].destination = static_cast<int>(method_.instructions.size());
    KILN_RETURN_IF_ERROR(add_branch(node, node.regions[1]));
    method_.instructions[to_end].destination = static_cast<int>(method_.instructions.size());
    return Status();
  }

  Status add_instruction(const ir::Node& node) {
    InstructionSpec instruction;
    instruction.op = node.op;
    for (int input : node.inputs) {
      KILN_ASSIGN_OR_RETURN(int index, value(input));
      instruction.inputs.push_back(index);
    }
    for (int output : node.outputs) {
      if (output >= 0) {
        KILN_ASSIGN_OR_RETURN(int index, value(output));
        instruction.outputs.push_back(index);
        continue;
      }
      ValueSpec scratch;  // an optional output nobody reads
      scratch.tensor.dynamism = ShapeDynamism::Unbounded;
      method_.values.push_back(std::move(scratch));
      instruction.outputs.push_back(static_cast<int>(method_.values.size()) - 1);
    }
    for (const auto& attribute : node.attributes) {
      int index;
      if (auto scalar = ir::scalar_attribute(attribute.value)) {
        index = add_scalar(std::move(*scalar));
      } else {
        int weight = std::get<ir::WeightRef>(attribute.value).weight;
        ValueSpec value;
        const ir::Weight& w = model_.weights[static_cast<size_t>(weight)];
        value.tensor.dtype = w.dtype;
        value.tensor.sizes = w.sizes;
        constants_.place(w, value.tensor);
        method_.values.push_back(std::move(value));
        index = static_cast<int>(method_.values.size()) - 1;
      }
      instruction.attributes.emplace_back(attribute.name, index);
    }
    method_.instructions.push_back(std::move(instruction));
    return Status();
  }

  // Planned tensors (static or bounded, not constant) share one arena by lifetime.
  void plan() {
    int end = static_cast<int>(method_.instructions.size());
    std::vector<int> first(method_.values.size(), -1), last(method_.values.size(), -1);
    for (int input : method_.inputs) first[input] = 0;
    for (int i = 0; i < end; ++i) {
      const auto& instruction = method_.instructions[i];
      for (int input : instruction.inputs) {
        if (input >= 0) last[input] = std::max(last[input], i);
      }
      for (int output : instruction.outputs) {
        if (first[output] < 0) first[output] = i;
        last[output] = std::max(last[output], i);
      }
    }
    for (int output : method_.outputs) last[output] = end;
    for (int input : method_.inputs) last[input] = std::max(last[input], 0);
    std::vector<engine::plan::Lifetime> lifetimes;
    std::vector<int> planned;
    for (size_t i = 0; i < method_.values.size(); ++i) {
      const ValueSpec& v = method_.values[i];
      if (!v.is_tensor || v.tensor.constant_segment >= 0 ||
          v.tensor.dynamism == ShapeDynamism::Unbounded || first[i] < 0) {
        continue;
      }
      uint64_t bytes = runtime::element_size(v.tensor.dtype);
      for (int64_t s : v.tensor.sizes) bytes *= static_cast<uint64_t>(s);
      lifetimes.push_back(engine::plan::Lifetime{first[i], std::max(first[i], last[i]), bytes});
      planned.push_back(static_cast<int>(i));
    }
    if (planned.empty()) return;
    engine::plan::MemoryPlan memory = engine::plan::plan_memory(lifetimes);
    method_.arena_sizes.push_back(memory.arena_size);
    for (size_t k = 0; k < planned.size(); ++k) {
      method_.values[planned[k]].tensor.arena = 0;
      method_.values[planned[k]].tensor.arena_offset = memory.offsets[k];
    }
  }

  const ir::Model& model_;
  const ir::Graph& graph_;
  const ExportOptions& options_;
  ConstantPool& constants_;
  ProgramSpec& spec_;
  MethodSpec method_;
  std::vector<int> values_;  // graph value → method value, -1 until used
};

}  // namespace

Status check_bounds(const ir::Graph& graph_ref, const std::string& method_name,
                    const ExportOptions& options) {
  const ir::Graph* graph = &graph_ref;
  for (const auto& b : options.bounds) {
    if (b.method != method_name) continue;
    int index = graph->find_value(b.input);
    bool is_input = false;
    for (int input : graph->inputs) is_input |= input == index;
    if (index < 0 || !is_input) {
      return Status(Error::InvalidArgument, "export method '" + method_name + "': bound names " +
                                                "input '" + b.input + "', which does not exist");
    }
    int rank = static_cast<int>(graph->values[index].type.shape.size());
    if (b.dim < 0 || b.dim >= rank || b.max <= 0) {
      return Status(Error::InvalidArgument,
                    "export method '" + method_name + "': bound on input '" + b.input + "' dim " +
                        std::to_string(b.dim) + " = " + std::to_string(b.max) +
                        " (expected dim 0.." + std::to_string(rank - 1) + " and a max > 0)");
    }
  }
  return Status();
}

void ConstantPool::place(const ir::Weight& weight, TensorSpec& tensor) {
  tensor.constant_segment = kPending;
  uint64_t hash = weight.content_hash != 0 ? weight.content_hash : ir::hash_weight(weight);
  std::vector<uint64_t>& candidates = offsets_[hash];
  for (uint64_t offset : candidates) {
    if (offset + weight.data.size() <= bytes_.size() &&
        std::equal(weight.data.begin(), weight.data.end(), bytes_.begin() + offset)) {
      tensor.constant_offset = offset;
      return;
    }
  }
  uint64_t offset = (bytes_.size() + 63) / 64 * 64;
  bytes_.resize(offset);
  bytes_.insert(bytes_.end(), weight.data.begin(), weight.data.end());
  candidates.push_back(offset);
  tensor.constant_offset = offset;
}

void ConstantPool::finish(ProgramSpec& spec) {
  int segment = static_cast<int>(spec.segments.size());
  bool used = false;
  for (MethodSpec& method : spec.methods) {
    for (ValueSpec& value : method.values) {
      if (value.is_tensor && value.tensor.constant_segment == kPending) {
        value.tensor.constant_segment = segment;
        used = true;
      }
    }
  }
  if (used) spec.segments.push_back(std::move(bytes_));
}

Status lower_method(const ir::Model& model, const ir::Graph& graph, const std::string& method,
                    const ExportOptions& options, const std::vector<Partition>& partitions,
                    const std::vector<DelegatedPartition>& delegated, PackageSet& packages,
                    ConstantPool& constants, ProgramSpec& spec) {
  KILN_RETURN_IF_ERROR(check_bounds(graph, method, options));
  return Lowering(model, graph, options, constants, spec)
      .run(method, partitions, delegated, packages);
}

Status lower_to_portable(const ir::Model& model, const std::string& function,
                         const std::string& method_name, const ExportOptions& options,
                         ProgramSpec& spec) {
  const ir::Graph* graph = model.find_function(function);
  if (graph == nullptr) {
    return Status(Error::NotFound, "export function '" + function + "': no such function");
  }
  PackageSet unused(false);
  ConstantPool constants;
  KILN_RETURN_IF_ERROR(lower_method(model, *graph, method_name, options, partition_graph(*graph),
                                    {}, unused, constants, spec));
  constants.finish(spec);
  return Status();
}

}  // namespace kiln::exporter
