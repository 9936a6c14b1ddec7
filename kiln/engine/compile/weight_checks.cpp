// Weight checks on first use (CompileOptions::verify_weight) and the shared scratchpad of a
// compiled function's oneDNN steps.
#include <kiln/engine/compile/function_plan.h>

#include <algorithm>
#include <functional>

namespace kiln::engine::compile {

using runtime::Status;

namespace {

// Whether the oneDNN and kiln ops of `op` only pack its input `input` (checking it through
// `cpu::OpDesc::verify_constant` when they pack it, and never reading it otherwise): B of the
// products, W and R of the recurrent cells. A node left to a reference kernel has all its
// weights checked when it is placed.
bool only_packed(const std::string& op, size_t input) {
  if (op == "Conv" || op == "MatMul" || op == "Gemm") return input == 1;
  if (op == "LSTM" || op == "GRU") return input == 1 || input == 2;
  return false;
}

}  // namespace

Status verify_read_weights(const ir::Model& model, const ir::Graph& graph,
                           const CompileOptions& options) {
  if (!options.verify_weight) return Status();
  enum Use : uint8_t { None, Packed, Read };
  std::vector<uint8_t> use(model.weights.size(), None);
  auto mark = [&](int value, bool packed) {
    if (value < 0) return;
    int w = graph.values[static_cast<size_t>(value)].weight;
    if (w >= 0) use[w] = packed && use[w] != Read ? Packed : Read;
  };
  std::function<void(const std::vector<ir::Node>&, bool)> walk =
      [&](const std::vector<ir::Node>& nodes, bool top) {
        for (const ir::Node& node : nodes) {
          for (size_t i = 0; i < node.inputs.size(); ++i) {
            mark(node.inputs[i], top && only_packed(node.op, i));
          }
          for (const ir::Attribute& a : node.attributes) {
            if (const auto* ref = std::get_if<ir::WeightRef>(&a.value)) {
              if (ref->weight >= 0) use[ref->weight] = Read;
            }
          }
          for (const ir::Region& region : node.regions) walk(region.nodes, false);
        }
      };
  walk(graph.nodes, true);
  for (int output : graph.outputs) mark(output, false);
  for (size_t w = 0; w < use.size(); ++w) {
    if (use[w] == Read) KILN_RETURN_IF_ERROR(options.verify_weight(w));
  }
  return Status();
}

Status verify_node_weights(const ir::Graph& graph, const ir::Node& node,
                           const CompileOptions& options) {
  if (!options.verify_weight) return Status();
  for (int input : node.inputs) {
    int w = input >= 0 ? graph.values[static_cast<size_t>(input)].weight : -1;
    if (w >= 0) KILN_RETURN_IF_ERROR(options.verify_weight(static_cast<size_t>(w)));
  }
  return Status();
}

}  // namespace kiln::engine::compile
