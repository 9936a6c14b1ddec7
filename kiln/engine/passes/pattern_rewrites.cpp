#include <kiln/engine/passes/pattern_rewrites.h>

#include <kiln/engine/passes/conv_folding.h>
#include <kiln/engine/passes/normalization_patterns.h>
#include <kiln/engine/passes/rewrite_context.h>

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
  Rewriter(ir::Model& model, ir::Graph& graph) : c_(model, graph), graph_(graph) {}

  size_t run() {
    size_t rewrites = 0;
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      if (c_.removed(n)) continue;
      // (A scale of a Conv's input first: a Div by a scalar would become a Mul, passed over.)
      if (fold_conv_input_scale(c_, n) || gelu(n) || reciprocal(n) || square(n) ||
          rewrite_layer_norm(c_, n) || rewrite_rms_norm(c_, n) || rewrite_group_norm(c_, n) ||
          fold_conv_affine(c_, n)) {
        ++rewrites;
      }
    }
    c_.compact();
    return rewrites;
  }

 private:
  const ir::Node* sole_consumer(int value, size_t& index) const {
    return c_.sole_consumer(value, index);
  }
  std::optional<float> scalar(int value) const { return c_.scalar(value); }
  bool binary_with(const ir::Node& node, const char* op, int value, double expected,
                   bool commutes) const {
    return c_.binary_with(node, op, value, expected, commutes);
  }
  static int other_input(const ir::Node& node, int value) {
    return RewriteContext::other_input(node, value);
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
      if (half_x < 0 || c_.uses(half_x) != 1) return false;
      size_t half_i = c_.producer(half_x);
      if (half_i == SIZE_MAX || !binary_with(graph_.nodes[half_i], "Mul", x, 0.5, true)) {
        return false;
      }
      absorbed.push_back(half_i);
      result = first->outputs[0];
    }
    ir::Node gelu;
    gelu.op = "Gelu";
    gelu.inputs = {x};
    gelu.outputs = {result};
    gelu.attributes.push_back(ir::Attribute{"approximate", std::string("none")});
    c_.replace(absorbed, std::move(gelu));
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
    w.sizes = c_.constant(div.inputs[1], runtime::ScalarType::Float32)->sizes;
    float r = 1.0f / *c;
    w.data.resize(sizeof(r));
    std::memcpy(w.data.data(), &r, sizeof(r));
    int reciprocal = c_.add_constant(std::move(w), n);
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

  RewriteContext c_;
  ir::Graph& graph_;
};

}  // namespace

size_t rewrite_patterns(ir::Model& model, ir::Graph& graph) { return Rewriter(model, graph).run(); }

}  // namespace kiln::engine::passes
