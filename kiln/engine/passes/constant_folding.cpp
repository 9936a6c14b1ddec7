#include <kiln/engine/passes/constant_folding.h>

#include <kiln/runtime/executor/kernel_registry.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace kiln::engine::passes {

using runtime::EValue;
using runtime::Error;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;

namespace {

bool is_random(const std::string& op) {
  return op.rfind("Random", 0) == 0 || op == "Multinomial" || op == "Bernoulli";
}

EValue weight_tensor(ir::Weight& weight) {
  return EValue(Tensor(weight.dtype, weight.sizes, weight.data.data()));
}

// Shape/Size of a statically shaped value need no kernel.
std::optional<ir::Weight> fold_shape(const ir::Graph& graph, const ir::Node& node) {
  if ((node.op != "Shape" && node.op != "Size") || node.inputs.empty() || node.inputs[0] < 0) {
    return std::nullopt;
  }
  auto sizes = graph.values[node.inputs[0]].type.static_sizes();
  if (!sizes) return std::nullopt;
  std::vector<int64_t> out;
  if (node.op == "Size") {
    int64_t numel = 1;
    for (int64_t s : *sizes) numel *= s;
    out = {numel};
  } else {
    auto rank = static_cast<int64_t>(sizes->size());
    int64_t start = 0, end = rank;
    if (const auto* a = node.attribute("start")) start = std::get<int64_t>(a->value);
    if (const auto* a = node.attribute("end")) end = std::get<int64_t>(a->value);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    for (int64_t i = start; i < end; ++i) out.push_back((*sizes)[i]);
  }
  ir::Weight w;
  w.dtype = ScalarType::Int64;
  if (node.op == "Shape") w.sizes = {static_cast<int64_t>(out.size())};
  w.data.resize(out.size() * sizeof(int64_t));
  if (!out.empty()) std::memcpy(w.data.data(), out.data(), w.data.size());
  return w;
}

}  // namespace

runtime::Result<bool> fold_node(ir::Model& model, ir::Graph& graph, size_t node_index) {
  const ir::Node node = graph.nodes[node_index];
  return fold_node(model, graph, node);
}

runtime::Result<bool> fold_node(ir::Model& model, ir::Graph& graph, const ir::Node& node) {
  if (!node.regions.empty()) return false;
  if (node.outputs.size() != 1 && node.op != "Split") {
    if (node.outputs.empty()) return false;
  }
  if (auto shape = fold_shape(graph, node)) {
    shape->name = graph.values[node.outputs[0]].name;
    graph.values[node.outputs[0]].weight = model.add_weight(std::move(*shape));
    return true;
  }
  if (node.inputs.empty() || is_random(node.op) || !node.domain.empty()) return false;
  for (int input : node.inputs) {
    if (input >= 0 && graph.values[input].weight < 0) return false;
  }
  for (const auto& attribute : node.attributes) {
    if (!ir::scalar_attribute(attribute.value) && !std::holds_alternative<ir::WeightRef>(attribute.value)) {
      return false;
    }
  }
  runtime::KernelFunction kernel = runtime::get_kernel(node.op);
  if (kernel == nullptr) return false;
  for (int output : node.outputs) {
    if (output < 0 || !graph.values[output].type.rank_known) return false;
  }

  std::vector<EValue> inputs(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] >= 0) inputs[i] = weight_tensor(model.weights[graph.values[node.inputs[i]].weight]);
  }
  std::vector<EValue> outputs;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> storage;
  for (int output : node.outputs) {
    const auto& type = graph.values[output].type;
    storage.push_back(std::make_unique<std::vector<uint8_t>>());
    outputs.emplace_back(Tensor(type.dtype, std::vector<int64_t>(type.shape.size(), 0), nullptr,
                                runtime::ShapeDynamism::Unbounded, 0));
  }
  std::vector<std::pair<std::string, EValue>> attributes;
  for (const auto& attribute : node.attributes) {
    if (auto scalar = ir::scalar_attribute(attribute.value)) {
      attributes.emplace_back(attribute.name, std::move(*scalar));
    } else {
      int w = std::get<ir::WeightRef>(attribute.value).weight;
      attributes.emplace_back(attribute.name, weight_tensor(model.weights[w]));
    }
  }
  EValue* base = outputs.data();
  bool too_large = false;
  runtime::KernelContext context(node.op, [&](EValue& value, runtime::Span<const int64_t> sizes) {
    auto numel = runtime::checked_numel(sizes);
    if (!numel.ok()) return numel.status();
    if (*numel > kMaxFoldedElements) {
      too_large = true;
      return Status(Error::OutOfResources, "constant too large to fold");
    }
    Tensor& t = value.to_tensor();
    auto& bytes = *storage[static_cast<size_t>(&value - base)];
    bytes.resize(static_cast<size_t>(*numel) * t.element_size() + 1);
    Tensor resized(t.dtype(), std::vector<int64_t>(sizes.begin(), sizes.end()), bytes.data(),
                   runtime::ShapeDynamism::Unbounded, bytes.size());
    t = resized;
    return Status();
  });
  std::vector<EValue*> in_ptrs, out_ptrs;
  EValue none;
  for (size_t i = 0; i < inputs.size(); ++i) in_ptrs.push_back(node.inputs[i] >= 0 ? &inputs[i] : &none);
  for (auto& o : outputs) out_ptrs.push_back(&o);
  Status status = kernel(context, in_ptrs, out_ptrs, runtime::Attributes(std::move(attributes)));
  if (too_large) return false;
  if (!status.ok()) {
    return status.with_context("fold node '" + node.name + "' (" + node.op + ")");
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const Tensor& t = outputs[i].to_tensor();
    ir::Weight w;
    w.name = graph.values[node.outputs[i]].name;
    w.dtype = t.dtype();
    w.sizes.assign(t.sizes().begin(), t.sizes().end());
    const auto* bytes = static_cast<const uint8_t*>(t.data());
    if (t.nbytes() > 0) w.data.assign(bytes, bytes + t.nbytes());
    auto& value = graph.values[node.outputs[i]];
    value.type.shape.assign(w.sizes.begin(), w.sizes.end());
    value.type.rank_known = true;
    value.weight = model.add_weight(std::move(w));
  }
  return true;
}

}  // namespace kiln::engine::passes
