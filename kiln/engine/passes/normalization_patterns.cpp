#include <kiln/engine/passes/normalization_patterns.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kiln::engine::passes {

namespace {

using runtime::ScalarType;

// How many trailing axes of a rank-`rank` input the ReduceMean `node` averages over with
// keepdims=1 (axes from the attribute or, from opset 18, a constant input); nullopt when it
// averages over anything else.
std::optional<size_t> trailing_axes(const RewriteContext& c, const ir::Node& node, size_t rank) {
  if (node.op != "ReduceMean" || !node.domain.empty() || !node.regions.empty() ||
      node.inputs.empty() || node.outputs.size() != 1 ||
      int_attribute(node, "keepdims").value_or(1) != 1) {
    return std::nullopt;
  }
  std::vector<int64_t> axes;
  if (const ir::Attribute* a = node.attribute("axes")) {
    const auto* list = std::get_if<std::vector<int64_t>>(&a->value);
    if (list == nullptr) return std::nullopt;
    axes = *list;
  } else if (node.inputs.size() > 1) {
    const ir::Weight* w = c.constant(node.inputs[1], ScalarType::Int64);
    if (w == nullptr) return std::nullopt;
    axes.resize(w->data.size() / sizeof(int64_t));
    std::memcpy(axes.data(), w->data.data(), axes.size() * sizeof(int64_t));
  }
  if (axes.empty() || axes.size() > rank) return std::nullopt;
  const auto r = static_cast<int64_t>(rank);
  for (int64_t& a : axes) {
    if (a < -r || a >= r) return std::nullopt;
    if (a < 0) a += r;
  }
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != r - static_cast<int64_t>(axes.size() - i)) return std::nullopt;
  }
  return axes.size();
}

bool is_plain(const ir::Node& node, const char* op, size_t inputs) {
  return node.op == op && node.domain.empty() && node.regions.empty() &&
         node.inputs.size() == inputs && node.outputs.size() == 1 && node.outputs[0] >= 0;
}

// The constant other operand of the binary `node` (`op` of `value` and it, either order) when
// it is f32 of exactly `sizes`; else -1.
int constant_operand(const RewriteContext& c, const ir::Node& node, const char* op, int value,
                     const std::optional<std::vector<int64_t>>& sizes) {
  if (!sizes || !is_plain(node, op, 2) || !RewriteContext::reads(node, value)) return -1;
  int other = RewriteContext::other_input(node, value);
  const ir::Weight* w = c.constant(other, ScalarType::Float32);
  return w != nullptr && other != value && w->sizes == *sizes ? other : -1;
}

// The static sizes of the trailing `k` axes of `type`, when they are static.
std::optional<std::vector<int64_t>> trailing_sizes(const ir::TensorType& type, size_t k) {
  std::vector<int64_t> out;
  for (size_t d = type.shape.size() - k; d < type.shape.size(); ++d) {
    if (!type.shape[d].is_static()) return std::nullopt;
    out.push_back(type.shape[d].value());
  }
  return out;
}

// When the only reader of `current` is `op` of it and a constant f32 of exactly `sizes` (a
// normalization's scale or bias), absorbs that node: `current` becomes its output. Returns the
// constant's value, or -1 (nothing absorbed).
int absorb_constant_step(const RewriteContext& c, const char* op,
                         const std::optional<std::vector<int64_t>>& sizes, int& current,
                         std::vector<size_t>& absorbed) {
  size_t i = 0;
  const ir::Node* node = c.sole_consumer(current, i);
  if (node == nullptr) return -1;
  const int constant = constant_operand(c, *node, op, current, sizes);
  if (constant < 0) return -1;
  absorbed.push_back(i);
  current = node->outputs[0];
  return constant;
}

// Adds an f32 constant of ones of `sizes`, read by node `reader`: the scale a normalization
// spelled without one gets.
int add_ones(RewriteContext& c, std::string name, const std::vector<int64_t>& sizes,
             size_t reader) {
  size_t count = 1;
  for (int64_t s : sizes) count *= static_cast<size_t>(s);
  return c.add_constant(f32_weight(std::move(name), sizes, std::vector<float>(count, 1.0f)),
                        reader);
}

// The tail of an instance normalization: `current` normalized over the spatial axes of x
// ([N, channels, spatial...], rank `rank`), then a Mul by and an Add of constants of one value
// per channel (one of them at least). Replaces `absorbed` and those steps by
// InstanceNormalization(x, scale, B); false (nothing changed) when no such step follows.
bool rewrite_instance_tail(RewriteContext& c, int x, int64_t channels, size_t rank, float eps,
                           int current, std::vector<size_t> absorbed) {
  std::vector<double> scale(static_cast<size_t>(channels), 1.0);
  std::vector<double> bias(static_cast<size_t>(channels), 0.0);
  bool stepped = false;
  for (const char* op : {"Mul", "Add"}) {
    size_t i = 0;
    const ir::Node* next = c.sole_consumer(current, i);
    if (next == nullptr || !is_plain(*next, op, 2) || !RewriteContext::reads(*next, current)) {
      continue;
    }
    auto values = c.per_channel(RewriteContext::other_input(*next, current), rank, channels);
    if (!values) continue;
    (op[0] == 'M' ? scale : bias) = std::move(*values);
    absorbed.push_back(i);
    current = next->outputs[0];
    stepped = true;
  }
  if (!stepped) return false;
  const size_t last = *std::max_element(absorbed.begin(), absorbed.end());
  auto floats = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const std::string name = c.value(x).name;
  const int s =
      c.add_constant(f32_weight(name + ":instance_norm_scale", {channels}, floats(scale)), last);
  const int b =
      c.add_constant(f32_weight(name + ":instance_norm_bias", {channels}, floats(bias)), last);
  ir::Node norm;
  norm.op = "InstanceNormalization";
  norm.inputs = {x, s, b};
  norm.outputs = {current};
  norm.attributes.push_back(ir::Attribute{"epsilon", static_cast<double>(eps)});
  c.replace(absorbed, std::move(norm));
  return true;
}

}  // namespace

bool rewrite_layer_norm(RewriteContext& c, size_t n) {
  const ir::Graph& g = c.graph();
  const ir::Node& mean = g.nodes[n];
  if (mean.op != "ReduceMean" || mean.inputs.empty() || mean.inputs[0] < 0) return false;
  const int x = mean.inputs[0];
  const ir::TensorType& x_type = c.value(x).type;
  if (x_type.dtype != ScalarType::Float32 || !x_type.rank_known || x_type.shape.empty()) {
    return false;
  }
  const std::optional<size_t> k = trailing_axes(c, mean, x_type.shape.size());
  if (!k) return false;
  std::vector<size_t> absorbed = {n};
  size_t i = 0;
  const ir::Node* sub = c.sole_consumer(mean.outputs[0], i);
  if (sub == nullptr || !is_plain(*sub, "Sub", 2) || sub->inputs[0] != x ||
      sub->inputs[1] != mean.outputs[0]) {
    return false;
  }
  absorbed.push_back(i);
  const int d = sub->outputs[0];
  // d is read by the square and by the division only (twice by a Mul(d, d)).
  std::vector<size_t> readers = c.readers(d);
  if (readers.size() != 2) return false;
  size_t square_i = SIZE_MAX, divide_i = SIZE_MAX;
  int reads = 0;
  for (size_t r : readers) {
    const ir::Node& node = g.nodes[r];
    reads += static_cast<int>(std::count(node.inputs.begin(), node.inputs.end(), d));
    bool squares = (is_plain(node, "Pow", 2) && c.binary_with(node, "Pow", d, 2.0, false)) ||
                   (is_plain(node, "Mul", 2) && node.inputs[0] == d && node.inputs[1] == d);
    (squares ? square_i : divide_i) = r;
  }
  if (reads != c.uses(d) || square_i == SIZE_MAX || divide_i == SIZE_MAX) return false;
  absorbed.push_back(square_i);
  const ir::Node* var = c.sole_consumer(g.nodes[square_i].outputs[0], i);
  if (var == nullptr || var->inputs[0] != g.nodes[square_i].outputs[0] ||
      trailing_axes(c, *var, x_type.shape.size()) != k) {
    return false;
  }
  absorbed.push_back(i);
  const ir::Node* add = c.sole_consumer(var->outputs[0], i);
  if (add == nullptr || !is_plain(*add, "Add", 2)) return false;
  const std::optional<float> eps = c.scalar(RewriteContext::other_input(*add, var->outputs[0]));
  if (!eps || !std::isfinite(*eps) || *eps < 0.0f) return false;
  absorbed.push_back(i);
  const ir::Node* sqrt = c.sole_consumer(add->outputs[0], i);
  if (sqrt == nullptr || !is_plain(*sqrt, "Sqrt", 1)) return false;
  absorbed.push_back(i);
  const ir::Node* divide = c.sole_consumer(sqrt->outputs[0], i);
  if (divide != nullptr && is_plain(*divide, "Reciprocal", 1)) {
    absorbed.push_back(i);
    divide = c.sole_consumer(divide->outputs[0], i);
    if (divide == nullptr || !is_plain(*divide, "Mul", 2) || !RewriteContext::reads(*divide, d)) {
      return false;
    }
  } else if (divide == nullptr || !is_plain(*divide, "Div", 2) || divide->inputs[0] != d) {
    return false;
  }
  if (i != divide_i) return false;
  absorbed.push_back(i);
  int current = divide->outputs[0];
  // Over the spatial axes of [N, C, ...] with per-channel steps after: an instance
  // normalization (the layer normalization takes a scale of the normalized shape only).
  const size_t rank = x_type.shape.size();
  if (rank >= 3 && *k == rank - 2 && x_type.shape[1].is_static() &&
      rewrite_instance_tail(c, x, x_type.shape[1].value(), rank, *eps, current, absorbed)) {
    return true;
  }
  const std::optional<std::vector<int64_t>> normalized = trailing_sizes(x_type, *k);
  int scale = absorb_constant_step(c, "Mul", normalized, current, absorbed);
  const int bias = absorb_constant_step(c, "Add", normalized, current, absorbed);
  const size_t last = *std::max_element(absorbed.begin(), absorbed.end());
  const auto axis = static_cast<int64_t>(x_type.shape.size() - *k);  // x_type moves below
  if (scale < 0) {
    if (!normalized) return false;  // a scale of ones needs the normalized shape
    scale = add_ones(c, c.value(x).name + ":layer_norm_scale", *normalized, last);
  }
  ir::Node norm;
  norm.op = "LayerNormalization";
  norm.inputs = {x, scale};
  if (bias >= 0) norm.inputs.push_back(bias);
  norm.outputs = {current};
  norm.attributes.push_back(ir::Attribute{"axis", axis});
  norm.attributes.push_back(ir::Attribute{"epsilon", static_cast<double>(*eps)});
  c.replace(absorbed, std::move(norm));
  return true;
}

bool rewrite_rms_norm(RewriteContext& c, size_t n) {
  const ir::Graph& g = c.graph();
  const ir::Node& mean = g.nodes[n];
  if (mean.op != "ReduceMean" || mean.inputs.empty() || mean.inputs[0] < 0) return false;
  const int sq = mean.inputs[0];
  const size_t square_i = c.producer(sq);
  if (square_i == SIZE_MAX || c.uses(sq) != 1) return false;
  const ir::Node& square = g.nodes[square_i];
  int x = -1;
  if (is_plain(square, "Mul", 2) && square.inputs[0] == square.inputs[1]) {
    x = square.inputs[0];
  } else if (is_plain(square, "Pow", 2) &&
             c.binary_with(square, "Pow", square.inputs[0], 2.0, false)) {
    x = square.inputs[0];
  }
  if (x < 0) return false;
  const ir::TensorType& x_type = c.value(x).type;
  if (x_type.dtype != ScalarType::Float32 || !x_type.rank_known || x_type.shape.empty()) {
    return false;
  }
  const std::optional<size_t> k = trailing_axes(c, mean, x_type.shape.size());
  if (!k) return false;
  std::vector<size_t> absorbed = {square_i, n};
  size_t i = 0;
  const ir::Node* add = c.sole_consumer(mean.outputs[0], i);
  if (add == nullptr || !is_plain(*add, "Add", 2)) return false;
  const std::optional<float> eps = c.scalar(RewriteContext::other_input(*add, mean.outputs[0]));
  if (!eps || !std::isfinite(*eps) || *eps < 0.0f) return false;
  absorbed.push_back(i);
  const ir::Node* sqrt = c.sole_consumer(add->outputs[0], i);
  if (sqrt == nullptr || !is_plain(*sqrt, "Sqrt", 1)) return false;
  absorbed.push_back(i);
  const int rms = sqrt->outputs[0];
  // x / rms, x * Reciprocal(rms) or x * (1 / rms), the product in either order.
  const ir::Node* divide = c.sole_consumer(rms, i);
  if (divide == nullptr) return false;
  int inverse = -1;
  if (is_plain(*divide, "Reciprocal", 1)) {
    inverse = divide->outputs[0];
  } else if (is_plain(*divide, "Div", 2) && divide->inputs[1] == rms &&
             c.scalar(divide->inputs[0]).value_or(0.0f) == 1.0f) {
    inverse = divide->outputs[0];
  } else if (!is_plain(*divide, "Div", 2) || divide->inputs[0] != x || divide->inputs[1] != rms) {
    return false;
  }
  absorbed.push_back(i);
  if (inverse >= 0) {
    divide = c.sole_consumer(inverse, i);
    if (divide == nullptr || !is_plain(*divide, "Mul", 2) || !RewriteContext::reads(*divide, x) ||
        RewriteContext::other_input(*divide, x) != inverse) {
      return false;
    }
    absorbed.push_back(i);
  }
  int current = divide->outputs[0];
  const std::optional<std::vector<int64_t>> normalized = trailing_sizes(x_type, *k);
  int scale = absorb_constant_step(c, "Mul", normalized, current, absorbed);
  const size_t last = *std::max_element(absorbed.begin(), absorbed.end());
  const auto axis = static_cast<int64_t>(x_type.shape.size() - *k);
  if (scale < 0) {
    if (!normalized) return false;  // a scale of ones needs the normalized shape
    scale = add_ones(c, c.value(x).name + ":rms_norm_scale", *normalized, last);
  }
  ir::Node norm;
  norm.op = "RMSNormalization";
  norm.inputs = {x, scale};
  norm.outputs = {current};
  norm.attributes.push_back(ir::Attribute{"axis", axis});
  norm.attributes.push_back(ir::Attribute{"epsilon", static_cast<double>(*eps)});
  c.replace(absorbed, std::move(norm));
  return true;
}

namespace {

// The int64 constant `value` as a vector, or nullopt.
std::optional<std::vector<int64_t>> int64_values(const RewriteContext& c, int value) {
  const ir::Weight* w = c.constant(value, ScalarType::Int64);
  if (w == nullptr || w->data.size() % sizeof(int64_t) != 0) return std::nullopt;
  std::vector<int64_t> out(w->data.size() / sizeof(int64_t));
  if (!out.empty()) std::memcpy(out.data(), w->data.data(), w->data.size());
  return out;
}

// Whether Reshape's allowzero is absent or 0 (a 0 in the shape copies the input's dim).
bool copies_zeros(const ir::Node& reshape) {
  return int_attribute(reshape, "allowzero").value_or(0) == 0;
}

// Whether the shape `s` of Reshape(x to [N, groups, -1]) keeps each sample apart: N copied (0)
// or equal to x's static batch, the groups, then -1 or the static rest.
bool splits_into_groups(const std::vector<int64_t>& s, const ir::TensorType& x, int64_t groups) {
  if (s.size() != 3 || s[1] != groups) return false;
  const bool batch = s[0] == 0 || (x.shape[0].is_static() && s[0] == x.shape[0].value());
  if (!batch) return false;
  if (s[2] == -1) return true;
  int64_t rest = 1;
  for (size_t d = 1; d < x.shape.size(); ++d) {
    if (!x.shape[d].is_static()) return false;
    rest *= x.shape[d].value();
  }
  return s[2] == rest / groups;
}

// Whether the shape `s` of the Reshape back is x's own: each dim x's static one, the batch
// copied (0), or one -1 with the others exact.
bool restores(const std::vector<int64_t>& s, const ir::TensorType& x) {
  if (s.size() != x.shape.size()) return false;
  int inferred = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == -1) {
      ++inferred;
    } else if (!(d == 0 && s[d] == 0) && !(x.shape[d].is_static() && s[d] == x.shape[d].value())) {
      return false;
    }
  }
  return inferred <= 1;
}

}  // namespace

bool rewrite_group_norm(RewriteContext& c, size_t n) {
  const ir::Graph& g = c.graph();
  const ir::Node& inst = g.nodes[n];
  if (!is_plain(inst, "InstanceNormalization", 3) || inst.inputs[0] < 0) return false;
  const int r = inst.inputs[0];
  const size_t into_i = c.producer(r);
  if (into_i == SIZE_MAX || c.uses(r) != 1) return false;
  const ir::Node& into = g.nodes[into_i];
  if (!is_plain(into, "Reshape", 2) || !copies_zeros(into) || into.inputs[0] < 0) return false;
  const int x = into.inputs[0];
  const ir::TensorType& x_type = c.value(x).type;
  if (x_type.dtype != ScalarType::Float32 || !x_type.rank_known || x_type.shape.size() < 3 ||
      !x_type.shape[1].is_static()) {
    return false;
  }
  const int64_t channels = x_type.shape[1].value();
  const ir::Weight* s = c.constant(inst.inputs[1], ScalarType::Float32);
  const ir::Weight* b = c.constant(inst.inputs[2], ScalarType::Float32);
  if (s == nullptr || b == nullptr || s->sizes.size() != 1 || s->sizes != b->sizes) return false;
  const int64_t groups = s->sizes[0];
  if (groups <= 0 || channels % groups != 0) return false;
  const std::optional<std::vector<int64_t>> split = int64_values(c, into.inputs[1]);
  if (!split || !splits_into_groups(*split, x_type, groups)) return false;
  const std::optional<double> eps = [&]() -> std::optional<double> {
    const ir::Attribute* a = inst.attribute("epsilon");
    if (a == nullptr) return 1e-5;
    const auto* v = std::get_if<double>(&a->value);
    return v != nullptr ? std::optional<double>(*v) : std::nullopt;
  }();
  if (!eps || !std::isfinite(*eps) || *eps < 0.0) return false;
  std::vector<size_t> absorbed = {into_i, n};

  // Back to x's shape: Reshape by Shape(x) or by a constant of x's shape.
  size_t i = 0;
  const ir::Node* back = c.sole_consumer(inst.outputs[0], i);
  if (back == nullptr || !is_plain(*back, "Reshape", 2) || back->inputs[0] != inst.outputs[0] ||
      !copies_zeros(*back)) {
    return false;
  }
  const size_t back_i = i;
  const int target = back->inputs[1];
  const size_t shape_i = c.producer(target);
  const bool of_x = shape_i != SIZE_MAX && is_plain(g.nodes[shape_i], "Shape", 1) &&
                    g.nodes[shape_i].inputs[0] == x && g.nodes[shape_i].attributes.empty();
  if (of_x) {
    if (c.uses(target) == 1) absorbed.push_back(shape_i);
  } else {
    const std::optional<std::vector<int64_t>> shape = int64_values(c, target);
    if (!shape || !restores(*shape, x_type)) return false;
  }
  absorbed.push_back(back_i);
  int current = back->outputs[0];

  // The per-channel steps after it: scale_c = gamma_c * s_g, bias_c = gamma_c * b_g + beta_c.
  const size_t rank = x_type.shape.size();
  const std::vector<float> group_scale = f32_values(*s), group_bias = f32_values(*b);
  const int64_t per_group = channels / groups;
  std::vector<double> gamma(static_cast<size_t>(channels), 1.0);
  std::vector<double> beta(static_cast<size_t>(channels), 0.0);
  for (const char* op : {"Mul", "Add"}) {
    const ir::Node* next = c.sole_consumer(current, i);
    if (next == nullptr || !is_plain(*next, op, 2) || !RewriteContext::reads(*next, current)) {
      continue;
    }
    auto values = c.per_channel(RewriteContext::other_input(*next, current), rank, channels);
    if (!values) continue;
    (op[0] == 'M' ? gamma : beta) = std::move(*values);
    absorbed.push_back(i);
    current = next->outputs[0];
  }
  std::vector<float> scale(static_cast<size_t>(channels)), bias(static_cast<size_t>(channels));
  for (int64_t ch = 0; ch < channels; ++ch) {
    const auto k = static_cast<size_t>(ch / per_group), o = static_cast<size_t>(ch);
    scale[o] = static_cast<float>(gamma[o] * group_scale[k]);
    bias[o] = static_cast<float>(gamma[o] * group_bias[k] + beta[o]);
  }
  const size_t last = *std::max_element(absorbed.begin(), absorbed.end());
  const std::string name = c.value(x).name;
  const int scale_value =
      c.add_constant(f32_weight(name + ":group_norm_scale", {channels}, scale), last);
  const int bias_value =
      c.add_constant(f32_weight(name + ":group_norm_bias", {channels}, bias), last);
  ir::Node norm;
  norm.op = "GroupNormalization";
  norm.inputs = {x, scale_value, bias_value};
  norm.outputs = {current};
  norm.attributes.push_back(ir::Attribute{"epsilon", *eps});
  norm.attributes.push_back(ir::Attribute{"num_groups", groups});
  c.replace(absorbed, std::move(norm));
  return true;
}

}  // namespace kiln::engine::passes
