#include <kiln/engine/passes/pattern_rewrites.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace kiln::engine::passes {

namespace {

class Rewriter {
 public:
  Rewriter(ir::Model& model, ir::Graph& graph) : model_(model), graph_(graph) { count_uses(); }

  size_t run() {
    size_t rewrites = 0;
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      if (removed_.size() > n && removed_[n]) continue;
      if (gelu(n) || reciprocal(n) || square(n)) ++rewrites;
    }
    std::vector<ir::Node> kept;
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      if (n >= removed_.size() || !removed_[n]) kept.push_back(std::move(graph_.nodes[n]));
    }
    graph_.nodes = std::move(kept);
    return rewrites;
  }

 private:
  void count_uses() {
    uses_.assign(graph_.values.size(), 0);
    consumer_.assign(graph_.values.size(), -1);
    for (size_t n = 0; n < graph_.nodes.size(); ++n) count_node(graph_.nodes[n], static_cast<int>(n));
    for (int output : graph_.outputs) uses_[static_cast<size_t>(output)] += 2;  // never absorbed
    removed_.assign(graph_.nodes.size(), false);
  }

  void count_node(const ir::Node& node, int top) {
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

  // The only top-level node reading `value`, when exactly one node reads it once.
  const ir::Node* sole_consumer(int value, size_t& index) const {
    if (value < 0 || uses_[static_cast<size_t>(value)] != 1) return nullptr;
    int c = consumer_[static_cast<size_t>(value)];
    if (c < 0 || removed_[static_cast<size_t>(c)]) return nullptr;
    index = static_cast<size_t>(c);
    const ir::Node& node = graph_.nodes[index];
    if (!node.regions.empty() || !node.domain.empty()) return nullptr;
    return &node;
  }

  std::optional<float> scalar(int value) const {
    if (value < 0) return std::nullopt;
    const ir::Value& v = graph_.values[static_cast<size_t>(value)];
    if (v.weight < 0) return std::nullopt;
    const ir::Weight& w = model_.weights[static_cast<size_t>(v.weight)];
    if (w.dtype != runtime::ScalarType::Float32 || w.data.size() != sizeof(float)) {
      return std::nullopt;
    }
    float f;
    std::memcpy(&f, w.data.data(), sizeof(f));
    return f;
  }

  static bool near(float value, double expected) {
    return std::fabs(value - expected) <= 1e-6 * std::max(1.0, std::fabs(expected));
  }

  // A binary node `op` of `value` and a constant scalar near `expected` (either side when
  // `commutes`): true when it matches.
  bool binary_with(const ir::Node& node, const char* op, int value, double expected,
                   bool commutes) const {
    if (node.op != op || node.inputs.size() != 2 || node.outputs.size() != 1) return false;
    for (int side = 0; side < (commutes ? 2 : 1); ++side) {
      int a = node.inputs[static_cast<size_t>(side)], b = node.inputs[static_cast<size_t>(1 - side)];
      auto c = scalar(b);
      if (a == value && c && near(*c, expected)) return true;
    }
    return false;
  }

  static bool reads(const ir::Node& node, int value) {
    for (int input : node.inputs) {
      if (input == value) return true;
    }
    return false;
  }
  static int other_input(const ir::Node& node, int value) {
    return node.inputs[0] == value ? node.inputs[1] : node.inputs[0];
  }

  // x / sqrt(2) (or x * 1/sqrt(2)) → Erf → + 1 → then 0.5 * x * that, in one of three orders.
  bool gelu(size_t n) {
    const ir::Node& scale = graph_.nodes[n];
    if (scale.inputs.size() != 2 || scale.outputs.size() != 1) return false;
    int x = -1;
    if (binary_with(scale, "Div", scale.inputs[0], std::sqrt(2.0), false)) {
      x = scale.inputs[0];
    } else if (scale.op == "Mul") {
      for (int side = 0; side < 2 && x < 0; ++side) {
        int candidate = scale.inputs[static_cast<size_t>(side)];
        if (binary_with(scale, "Mul", candidate, 1.0 / std::sqrt(2.0), true)) x = candidate;
      }
    }
    if (x < 0 || scalar(x)) return false;
    size_t erf_i, add_i;
    const ir::Node* erf = sole_consumer(scale.outputs[0], erf_i);
    if (erf == nullptr || erf->op != "Erf" || erf->outputs.size() != 1) return false;
    const ir::Node* add = sole_consumer(erf->outputs[0], add_i);
    if (add == nullptr || !binary_with(*add, "Add", erf->outputs[0], 1.0, true)) return false;
    int one_plus = add->outputs[0];
    size_t first_i, second_i;
    const ir::Node* first = sole_consumer(one_plus, first_i);
    if (first == nullptr || first->op != "Mul" || first->inputs.size() != 2) return false;
    std::vector<size_t> absorbed = {n, erf_i, add_i, first_i};
    int result = -1;
    if (other_input(*first, one_plus) == x) {
      // (x * (1 + erf)) * 0.5
      const ir::Node* half = sole_consumer(first->outputs[0], second_i);
      if (half == nullptr || !binary_with(*half, "Mul", first->outputs[0], 0.5, true)) return false;
      absorbed.push_back(second_i);
      result = half->outputs[0];
    } else if (binary_with(*first, "Mul", one_plus, 0.5, true)) {
      // x * ((1 + erf) * 0.5)
      const ir::Node* times_x = sole_consumer(first->outputs[0], second_i);
      if (times_x == nullptr || times_x->op != "Mul" || times_x->inputs.size() != 2 ||
          other_input(*times_x, first->outputs[0]) != x) {
        return false;
      }
      absorbed.push_back(second_i);
      result = times_x->outputs[0];
    } else {
      // (x * 0.5) * (1 + erf): the half product is read by this Mul alone.
      int half_x = other_input(*first, one_plus);
      if (half_x < 0 || uses_[static_cast<size_t>(half_x)] != 1) return false;
      size_t half_i = SIZE_MAX;
      for (size_t i = 0; i < graph_.nodes.size(); ++i) {
        const ir::Node& node = graph_.nodes[i];
        if (!removed_[i] && node.outputs.size() == 1 && node.outputs[0] == half_x) half_i = i;
      }
      if (half_i == SIZE_MAX || !binary_with(graph_.nodes[half_i], "Mul", x, 0.5, true)) {
        return false;
      }
      absorbed.push_back(half_i);
      result = first->outputs[0];
    }
    // The Gelu takes the place of the pattern's last node (all its inputs exist by then).
    size_t last = *std::max_element(absorbed.begin(), absorbed.end());
    ir::Node gelu;
    gelu.name = graph_.nodes[last].name;
    gelu.op = "Gelu";
    gelu.inputs = {x};
    gelu.outputs = {result};
    gelu.attributes.push_back(ir::Attribute{"approximate", std::string("none")});
    for (size_t i : absorbed) removed_[i] = true;
    removed_[last] = false;
    graph_.nodes[last] = std::move(gelu);
    return true;
  }

  // Div(x, c) with c a constant f32 scalar → Mul(x, 1 / c).
  bool reciprocal(size_t n) {
    ir::Node& div = graph_.nodes[n];
    if (div.op != "Div" || div.inputs.size() != 2 || div.outputs.size() != 1) return false;
    auto c = scalar(div.inputs[1]);
    if (!c || *c == 0.0f || !std::isfinite(*c) || !std::isfinite(1.0f / *c)) return false;
    const ir::Value& x = graph_.values[static_cast<size_t>(div.inputs[0])];
    if (x.type.dtype != runtime::ScalarType::Float32) return false;
    ir::Weight w;
    w.name = graph_.values[static_cast<size_t>(div.inputs[1])].name + ":reciprocal";
    w.dtype = runtime::ScalarType::Float32;
    w.sizes = model_.weights[static_cast<size_t>(
                                 graph_.values[static_cast<size_t>(div.inputs[1])].weight)]
                  .sizes;
    float r = 1.0f / *c;
    w.data.resize(sizeof(r));
    std::memcpy(w.data.data(), &r, sizeof(r));
    ir::Value value;
    value.name = w.name;
    value.type.dtype = runtime::ScalarType::Float32;
    for (int64_t s : w.sizes) value.type.shape.emplace_back(s);
    value.weight = model_.add_weight(std::move(w));
    int reciprocal = graph_.add_value(std::move(value));
    uses_.push_back(1);
    consumer_.push_back(static_cast<int>(n));
    div.op = "Mul";
    div.inputs[1] = reciprocal;
    return true;
  }

  // Pow(x, 2) with x f32 and 2 a constant f32 scalar → Mul(x, x): exact (x * x is powf(x, 2)
  // correctly rounded), and a oneDNN op instead of a call to powf per element.
  bool square(size_t n) {
    ir::Node& pow = graph_.nodes[n];
    if (pow.op != "Pow" || pow.inputs.size() != 2 || pow.outputs.size() != 1) return false;
    auto c = scalar(pow.inputs[1]);
    if (!c || *c != 2.0f || pow.inputs[0] < 0) return false;
    const ir::Value& x = graph_.values[static_cast<size_t>(pow.inputs[0])];
    if (x.type.dtype != runtime::ScalarType::Float32) return false;
    pow.op = "Mul";
    pow.inputs[1] = pow.inputs[0];
    return true;
  }

  ir::Model& model_;
  ir::Graph& graph_;
  std::vector<int> uses_;
  std::vector<int> consumer_;
  std::vector<bool> removed_;
};

}  // namespace

size_t rewrite_patterns(ir::Model& model, ir::Graph& graph) {
  return Rewriter(model, graph).run();
}

}  // namespace kiln::engine::passes
