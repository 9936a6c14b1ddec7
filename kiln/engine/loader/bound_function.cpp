#include <kiln/engine/loader/bound_function.h>

#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/cpu/cpu_op.h>

#include <map>
#include <set>

namespace kiln::engine::loader_detail {

namespace {

// Everything of a compiled function's plan that a warm load must reproduce: each step's
// placement (node, op, device, fused nodes, implementation) and the arena size.
uint64_t plan_fingerprint(const compile::CompiledFunction& function) {
  std::string text = std::to_string(function.arena_bytes());
  for (const compile::PlacementEntry& step : function.placement()) {
    text += '\n' + step.node + '\t' + step.op + '\t' + step.device + '\t' + step.detail;
    for (const std::string& fused : step.fused) text += '\t' + fused;
  }
  return cache::checksum64(text.data(), text.size());
}

// Ops whose reference kernels are far slower than their oneDNN ones and that oneDNN has no
// run-time-shape form of: a shape-generic plan would run them 10-50x slower (OCR detection:
// 40x), so a function holding one keeps its per-shape plans even with expect_frequent_reshapes.
// With `shaped_convs`, 2-D Convs and ConvTransposes of a weight run on kiln's loops made for
// each shape (`compile::ShapedOp`), so only the recurrent ops and the other Convs count.
bool needs_per_shape_kernels(const ir::Graph& graph, bool shaped_convs) {
  static const std::set<std::string> kOps = {"Conv", "ConvTranspose", "LSTM", "GRU", "RNN"};
  for (const ir::Node& node : graph.nodes) {
    if (kOps.count(node.op) == 0) continue;
    if (!shaped_convs || (node.op != "Conv" && node.op != "ConvTranspose")) return true;
    const int w = node.inputs.size() > 1 ? node.inputs[1] : -1;
    const ir::Value* weight = w >= 0 ? &graph.values[static_cast<size_t>(w)] : nullptr;
    if (weight == nullptr || weight->weight < 0 || weight->type.shape.size() != 4) return true;
  }
  return false;
}

}  // namespace

artifact::FunctionRecord record_of(const compile::CompiledFunction& compiled,
                                   const std::string& name,
                                   const std::vector<std::vector<int64_t>>& sizes) {
  return artifact::FunctionRecord{name, sizes, plan_fingerprint(compiled), compiled.arena_bytes(),
                                  static_cast<uint32_t>(compiled.placement().size())};
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& sizes) {
  std::string text;
  for (const auto& shape : sizes) {
    text += text.empty() ? "[" : ", [";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    text += ']';
  }
  return text.empty() ? "()" : text;
}

// Whether every input of `graph` has a static shape.
bool has_static_inputs(const ir::Graph& graph) {
  for (int input : graph.inputs) {
    if (!graph.values[static_cast<size_t>(input)].type.static_sizes()) return false;
  }
  return true;
}

// Whether a function gets a shape-generic plan when expect_frequent_reshapes is set.
bool has_generic_plan(const ir::Graph& graph, bool frequent_reshapes) {
  return !has_static_inputs(graph) &&
         !needs_per_shape_kernels(graph, frequent_reshapes && cpu::own_vector_loops());
}

bool generic_plan_runs_fast(const compile::CompiledFunction& plan, const ir::Graph& graph) {
  static const std::set<std::string> kMovesData = {
      "Shape", "Size",  "Gather", "Unsqueeze",       "Squeeze", "Reshape",  "Flatten", "Concat",
      "Slice", "Split", "Cast",   "ConstantOfShape", "Expand",  "Identity", "Range",   "Transpose",
      "Where", "Tile",  "Pad",    "Trilu",           "Constant"};
  std::map<std::string, const ir::Node*> nodes;
  for (const ir::Node& node : graph.nodes) nodes.emplace(node.name, &node);
  for (const compile::PlacementEntry& step : plan.placement()) {
    if (step.device != "cpu:reference" || kMovesData.count(step.op) != 0) continue;
    auto it = nodes.find(step.node);
    if (it == nodes.end()) return false;
    for (int output : it->second->outputs) {
      if (output < 0) continue;
      const runtime::ScalarType dtype = graph.values[static_cast<size_t>(output)].type.dtype;
      if (runtime::is_floating_point(dtype)) return false;
    }
  }
  return true;
}

}  // namespace kiln::engine::loader_detail
