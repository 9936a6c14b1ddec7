#include <kiln/engine/passes/conv_folding.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kiln::engine::passes {

namespace {

using runtime::ScalarType;

// y = a * Conv(x) + d, per output channel.
struct Affine {
  std::vector<double> a;
  std::vector<double> d;
};

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Folds the inference BatchNormalization `bn` of `current` into `f`; false when it is not one
// this pass folds.
bool fold_batch_norm(const RewriteContext& c, const ir::Node& bn, int current, int64_t m,
                     Affine& f) {
  if (bn.inputs.size() != 5 || bn.inputs[0] != current ||
      int_attribute(bn, "training_mode").value_or(0) != 0 ||
      int_attribute(bn, "spatial").value_or(1) != 1) {
    return false;
  }
  for (size_t o = 1; o < bn.outputs.size(); ++o) {
    if (c.uses(bn.outputs[o]) != 0) return false;  // training statistics someone reads
  }
  std::vector<std::vector<float>> params;  // scale, B, mean, var
  for (size_t p = 1; p < 5; ++p) {
    const ir::Weight* w = c.constant(bn.inputs[p], ScalarType::Float32);
    if (w == nullptr || w->sizes != std::vector<int64_t>{m}) return false;
    params.push_back(f32_values(*w));
  }
  double epsilon = 1e-5;
  if (const ir::Attribute* a = bn.attribute("epsilon")) {
    const auto* e = std::get_if<double>(&a->value);
    if (e == nullptr) return false;
    epsilon = *e;
  }
  Affine next = f;
  for (size_t o = 0; o < f.a.size(); ++o) {
    const double s = params[0][o] / std::sqrt(static_cast<double>(params[3][o]) + epsilon);
    next.a[o] = f.a[o] * s;
    next.d[o] = (f.d[o] - params[2][o]) * s + params[1][o];
  }
  if (!all_finite(next.a) || !all_finite(next.d)) return false;
  f = std::move(next);
  return true;
}

// Folds the binary `node` of `current` and a per-channel constant into `f`.
bool fold_binary(const RewriteContext& c, const ir::Node& node, int current, size_t rank, int64_t m,
                 Affine& f) {
  if (node.inputs.size() != 2 || node.inputs[0] == node.inputs[1]) return false;
  const bool first = node.inputs[0] == current;
  const bool commutes = node.op == "Mul" || node.op == "Add";
  if (!first && !commutes) return false;  // constant - y, constant / y: not affine in y's form
  auto t = c.per_channel(node.inputs[first ? 1 : 0], rank, m);
  if (!t) return false;
  Affine next = f;
  for (size_t o = 0; o < f.a.size(); ++o) {
    const double v = (*t)[o];
    if (node.op == "Mul" || node.op == "Div") {
      const double factor = node.op == "Mul" ? v : 1.0 / v;
      next.a[o] *= factor;
      next.d[o] *= factor;
    } else {
      next.d[o] += node.op == "Add" ? v : -v;
    }
  }
  if (!all_finite(next.a) || !all_finite(next.d)) return false;
  f = std::move(next);
  return true;
}

}  // namespace

bool fold_conv_affine(RewriteContext& c, size_t n) {
  ir::Graph& g = c.graph();
  const bool transpose = g.nodes[n].op == "ConvTranspose";
  if ((g.nodes[n].op != "Conv" && !transpose) || !g.nodes[n].domain.empty() ||
      g.nodes[n].inputs.size() < 2 || g.nodes[n].outputs.size() != 1 || g.nodes[n].outputs[0] < 0) {
    return false;
  }
  const ir::Node& conv = g.nodes[n];
  const ir::Weight* weight = c.constant(conv.inputs[1], ScalarType::Float32);
  if (weight == nullptr || weight->sizes.size() < 3 || weight->sizes[0] <= 0 ||
      weight->sizes[1] <= 0) {
    return false;
  }
  // Conv's W is [M, C / group, k...]; ConvTranspose's [C, M / group, k...].
  const int64_t group = int_attribute(conv, "group").value_or(1);
  if (transpose && (group <= 0 || weight->sizes[0] % group != 0)) return false;
  const int64_t m = transpose ? weight->sizes[1] * group : weight->sizes[0];
  const size_t rank = weight->sizes.size();
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
  const ir::Weight* bias = has_bias ? c.constant(conv.inputs[2], ScalarType::Float32) : nullptr;
  if (has_bias && (bias == nullptr || bias->sizes != std::vector<int64_t>{m})) return false;

  Affine f{std::vector<double>(static_cast<size_t>(m), 1.0),
           std::vector<double>(static_cast<size_t>(m), 0.0)};
  std::vector<size_t> folded;
  int current = conv.outputs[0];
  size_t i = 0;
  while (const ir::Node* next = c.sole_consumer(current, i)) {
    if (next->outputs.empty() || next->outputs[0] < 0) break;
    const bool step =
        next->op == "BatchNormalization"
            ? fold_batch_norm(c, *next, current, m, f)
            : (next->op == "Mul" || next->op == "Div" || next->op == "Add" || next->op == "Sub") &&
                  next->outputs.size() == 1 && fold_binary(c, *next, current, rank, m, f);
    if (!step) break;
    folded.push_back(i);
    current = next->outputs[0];
  }
  if (folded.empty()) return false;

  std::vector<float> w = f32_values(*weight);
  const size_t plane = w.size() / static_cast<size_t>(weight->sizes[0] * weight->sizes[1]);
  const auto in_per_group = static_cast<size_t>(weight->sizes[0] / (transpose ? group : 1));
  const auto out_per_group = static_cast<size_t>(weight->sizes[1]);
  for (size_t e = 0; e < w.size(); ++e) {
    // The output channel element e weighs: its row (Conv), or its group's and column's
    // (ConvTranspose: W[c][j] feeds channel (c / (C / group)) * (M / group) + j).
    const size_t row = e / plane / out_per_group, column = e / plane % out_per_group;
    const size_t channel = transpose ? row / in_per_group * out_per_group + column : row;
    w[e] = static_cast<float>(w[e] * f.a[channel]);
  }
  std::vector<float> b = has_bias ? f32_values(*bias) : std::vector<float>(f.a.size(), 0.0f);
  for (size_t o = 0; o < b.size(); ++o) {
    b[o] = static_cast<float>(static_cast<double>(b[o]) * f.a[o] + f.d[o]);
  }
  // Everything read from the weight table before adding to it (which may move it).
  const std::string name = c.value(conv.inputs[1]).name;
  const std::vector<int64_t> w_sizes = weight->sizes;
  for (size_t node : folded) c.remove(node);
  const int folded_w = c.add_constant(f32_weight(name + ":folded", w_sizes, w), n);
  const int folded_b = c.add_constant(f32_weight(name + ":folded_bias", {m}, b), n);
  ir::Node& result = g.nodes[n];
  result.inputs.resize(std::max<size_t>(result.inputs.size(), 3), -1);
  result.inputs[1] = folded_w;
  result.inputs[2] = folded_b;
  result.outputs[0] = current;
  return true;
}

bool fold_conv_input_scale(RewriteContext& c, size_t n) {
  ir::Graph& g = c.graph();
  const ir::Node& scale = g.nodes[n];
  if ((scale.op != "Mul" && scale.op != "Div") || !scale.domain.empty() ||
      scale.inputs.size() != 2 || scale.outputs.size() != 1 || scale.outputs[0] < 0 ||
      scale.inputs[0] < 0 || scale.inputs[1] < 0 || scale.inputs[0] == scale.inputs[1]) {
    return false;
  }
  size_t conv_index = 0;
  const ir::Node* conv = c.sole_consumer(scale.outputs[0], conv_index);
  if (conv == nullptr || conv->op != "Conv" || conv->inputs.size() < 2 ||
      conv->inputs[0] != scale.outputs[0] || conv->inputs[1] == scale.outputs[0] ||
      (conv->inputs.size() > 2 && conv->inputs[2] == scale.outputs[0])) {
    return false;
  }
  const ir::Weight* weight = c.constant(conv->inputs[1], ScalarType::Float32);
  const int64_t group = int_attribute(*conv, "group").value_or(1);
  if (weight == nullptr || weight->sizes.size() < 3 || weight->sizes[0] <= 0 ||
      weight->sizes[1] <= 0 || group <= 0 || weight->sizes[0] % group != 0) {
    return false;
  }
  const size_t rank = weight->sizes.size();
  const int64_t per_group = weight->sizes[1], channels = per_group * group;
  // x * t or t * x, x / t: the constant t scales input channels (not t / x).
  int x = -1;
  std::optional<std::vector<double>> t;
  for (size_t side = 0; side < 2 && !t; ++side) {
    if (scale.op == "Div" && side == 0) continue;
    t = c.per_channel(scale.inputs[side], rank, channels);
    if (t) x = scale.inputs[1 - side];
  }
  if (!t || c.constant(x, ScalarType::Float32) != nullptr) return false;
  std::vector<double> factor(static_cast<size_t>(channels));
  for (size_t ch = 0; ch < factor.size(); ++ch) {
    factor[ch] = scale.op == "Mul" ? (*t)[ch] : 1.0 / (*t)[ch];
  }
  if (!all_finite(factor)) return false;

  std::vector<float> w = f32_values(*weight);
  const size_t plane = w.size() / static_cast<size_t>(weight->sizes[0] * per_group);
  const auto out_per_group = static_cast<size_t>(weight->sizes[0] / group);
  for (size_t e = 0; e < w.size(); ++e) {
    // W[m][j] reads input channel (m / (M / group)) * (C / group) + j.
    const size_t m = e / plane / static_cast<size_t>(per_group);
    const size_t j = e / plane % static_cast<size_t>(per_group);
    const size_t channel = m / out_per_group * static_cast<size_t>(per_group) + j;
    w[e] = static_cast<float>(w[e] * factor[channel]);
  }
  const std::string name = c.value(conv->inputs[1]).name;
  const std::vector<int64_t> w_sizes = weight->sizes;
  const int old_w = conv->inputs[1];
  const int scaled_w = c.add_constant(f32_weight(name + ":input_scaled", w_sizes, w), conv_index);
  g.nodes[conv_index].inputs[1] = scaled_w;  // (add_constant counted its read)
  c.drop_read(old_w);
  for (int input : g.nodes[n].inputs) c.drop_read(input);
  c.remove(n);
  c.replace_input(conv_index, 0, x);
  return true;
}

}  // namespace kiln::engine::passes
