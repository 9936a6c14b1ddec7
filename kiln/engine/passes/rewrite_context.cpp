#include <kiln/engine/passes/rewrite_context.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <variant>

namespace kiln::engine::passes {

RewriteContext::RewriteContext(ir::Model& model, ir::Graph& graph) : model_(model), graph_(graph) {
  uses_.assign(graph_.values.size(), 0);
  consumer_.assign(graph_.values.size(), -1);
  for (size_t n = 0; n < graph_.nodes.size(); ++n) count_node(graph_.nodes[n], static_cast<int>(n));
  for (int output : graph_.outputs) uses_[static_cast<size_t>(output)] += 2;  // never absorbed
  removed_.assign(graph_.nodes.size(), false);
}

void RewriteContext::count_node(const ir::Node& node, int top) {
  for (int input : node.inputs) {
    if (input < 0) continue;
    ++uses_[static_cast<size_t>(input)];
    consumer_[static_cast<size_t>(input)] = top;
  }
  for (const ir::Region& region : node.regions) {
    for (const ir::Node& inner : region.nodes) count_node(inner, top);
    for (int output : region.outputs) {
      if (output >= 0) uses_[static_cast<size_t>(output)] += 2;
    }
  }
}

const ir::Node* RewriteContext::sole_consumer(int value, size_t& index) const {
  if (value < 0 || uses_[static_cast<size_t>(value)] != 1) return nullptr;
  int c = consumer_[static_cast<size_t>(value)];
  if (c < 0 || removed_[static_cast<size_t>(c)]) return nullptr;
  index = static_cast<size_t>(c);
  const ir::Node& node = graph_.nodes[index];
  if (!node.regions.empty() || !node.domain.empty()) return nullptr;
  return &node;
}

std::vector<size_t> RewriteContext::readers(int value) const {
  std::vector<size_t> out;
  if (value < 0) return out;
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (!removed_[n] && reads(graph_.nodes[n], value)) out.push_back(n);
  }
  return out;
}

size_t RewriteContext::producer(int value) const {
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const ir::Node& node = graph_.nodes[n];
    if (!removed_[n] &&
        std::find(node.outputs.begin(), node.outputs.end(), value) != node.outputs.end()) {
      return n;
    }
  }
  return SIZE_MAX;
}

const ir::Weight* RewriteContext::constant(int value, runtime::ScalarType dtype) const {
  if (value < 0) return nullptr;
  const ir::Value& v = graph_.values[static_cast<size_t>(value)];
  if (v.weight < 0) return nullptr;
  const ir::Weight& w = model_.weights[static_cast<size_t>(v.weight)];
  return w.dtype == dtype ? &w : nullptr;
}

std::optional<float> RewriteContext::scalar(int value) const {
  const ir::Weight* w = constant(value, runtime::ScalarType::Float32);
  if (w == nullptr || w->data.size() != sizeof(float)) return std::nullopt;
  float f;
  std::memcpy(&f, w->data.data(), sizeof(f));
  return f;
}

std::optional<std::vector<double>> RewriteContext::per_channel(int value, size_t rank,
                                                               int64_t channels) const {
  const ir::Weight* w = constant(value, runtime::ScalarType::Float32);
  if (w == nullptr || w->sizes.size() > rank) return std::nullopt;
  const size_t pad = rank - w->sizes.size();
  int64_t found = 1;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t size = d < pad ? 1 : w->sizes[d - pad];
    if (d == 1 && (size == channels || size == 1)) {
      found = size;
    } else if (size != 1) {
      return std::nullopt;
    }
  }
  const std::vector<float> v = f32_values(*w);
  if (v.size() != static_cast<size_t>(found)) return std::nullopt;
  std::vector<double> out(static_cast<size_t>(channels));
  for (size_t o = 0; o < out.size(); ++o) out[o] = v[found == 1 ? 0 : o];
  return out;
}

bool RewriteContext::near(float value, double expected) {
  return std::fabs(value - expected) <= 1e-6 * std::max(1.0, std::fabs(expected));
}

bool RewriteContext::binary_with(const ir::Node& node, const char* op, int value, double expected,
                                 bool commutes) const {
  if (node.op != op || node.inputs.size() != 2 || node.outputs.size() != 1) return false;
  for (int side = 0; side < (commutes ? 2 : 1); ++side) {
    int a = node.inputs[static_cast<size_t>(side)], b = node.inputs[static_cast<size_t>(1 - side)];
    auto c = scalar(b);
    if (a == value && c && near(*c, expected)) return true;
  }
  return false;
}

bool RewriteContext::reads(const ir::Node& node, int value) {
  return std::find(node.inputs.begin(), node.inputs.end(), value) != node.inputs.end();
}

int RewriteContext::other_input(const ir::Node& node, int value) {
  return node.inputs[0] == value ? node.inputs[1] : node.inputs[0];
}

int RewriteContext::add_constant(ir::Weight weight, size_t reader) {
  ir::Value value;
  value.name = weight.name;
  value.type.dtype = weight.dtype;
  for (int64_t s : weight.sizes) value.type.shape.emplace_back(s);
  value.weight = model_.add_weight(std::move(weight));
  int index = graph_.add_value(std::move(value));
  uses_.push_back(1);
  consumer_.push_back(static_cast<int>(reader));
  return index;
}

void RewriteContext::replace_input(size_t reader, size_t input, int value) {
  ir::Node& node = graph_.nodes[reader];
  drop_read(node.inputs[input]);
  node.inputs[input] = value;
  if (value < 0) return;
  ++uses_[static_cast<size_t>(value)];
  consumer_[static_cast<size_t>(value)] = static_cast<int>(reader);
}

void RewriteContext::replace(const std::vector<size_t>& absorbed, ir::Node node) {
  size_t last = *std::max_element(absorbed.begin(), absorbed.end());
  node.name = graph_.nodes[last].name;
  for (size_t i : absorbed) removed_[i] = true;
  removed_[last] = false;
  graph_.nodes[last] = std::move(node);
}

void RewriteContext::compact() {
  std::vector<ir::Node> kept;
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (!removed_[n]) kept.push_back(std::move(graph_.nodes[n]));
  }
  graph_.nodes = std::move(kept);
}

std::optional<int64_t> int_attribute(const ir::Node& node, const char* name) {
  const ir::Attribute* a = node.attribute(name);
  if (a == nullptr) return std::nullopt;
  const auto* i = std::get_if<int64_t>(&a->value);
  return i ? std::optional<int64_t>(*i) : std::nullopt;
}

std::vector<float> f32_values(const ir::Weight& weight) {
  std::vector<float> v(weight.data.size() / sizeof(float));
  std::memcpy(v.data(), weight.data.data(), v.size() * sizeof(float));
  return v;
}

ir::Weight f32_weight(std::string name, std::vector<int64_t> sizes,
                      const std::vector<float>& values) {
  ir::Weight w;
  w.name = std::move(name);
  w.dtype = runtime::ScalarType::Float32;
  w.sizes = std::move(sizes);
  w.data.resize(values.size() * sizeof(float));
  std::memcpy(w.data.data(), values.data(), w.data.size());
  return w;
}

}  // namespace kiln::engine::passes
