// rule_shapes: the output shapes of the common ops from their input shapes (and constant
// inputs), so specialization need not run their kernels on zeros to learn them.
#include <kiln/engine/compile/shape_resolution.h>

#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/conv_geometry.h>
#include <kiln/kernels/image_ops.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>
#include <kiln/runtime/core/tensor.h>

#include <algorithm>
#include <set>
#include <string>

namespace kiln::engine::compile {

namespace {

// Conv's or ConvTranspose's output shape for X of sizes `x` and W of sizes `w`, from the
// kernels' own attribute reading and shape functions; nullopt when they reject them (the
// kernel then reports why) or an attribute is a weight.
std::optional<std::vector<int64_t>> conv_like_shape(const ir::Node& node,
                                                    const std::vector<int64_t>& x,
                                                    const std::vector<int64_t>& w) {
  std::vector<std::pair<std::string, runtime::EValue>> values;
  for (const ir::Attribute& attribute : node.attributes) {
    auto scalar = ir::scalar_attribute(attribute.value);
    if (!scalar) return std::nullopt;
    values.emplace_back(attribute.name, std::move(*scalar));
  }
  runtime::Attributes attributes(std::move(values));
  if (node.op == "Conv") {
    auto options =
        kernels::internal::read_conv_attributes<kernels::ConvOptions>("Conv", attributes);
    if (!options.ok()) return std::nullopt;
    auto shape = kernels::conv_shape(x, w, *options);
    return shape.ok() ? std::optional(*shape) : std::nullopt;
  }
  auto options = kernels::internal::read_conv_attributes<kernels::ConvTransposeOptions>(
      "ConvTranspose", attributes);
  if (!options.ok()) return std::nullopt;
  auto padding = kernels::internal::ints_attribute("ConvTranspose", attributes, "output_padding");
  auto output_shape =
      kernels::internal::ints_attribute("ConvTranspose", attributes, "output_shape");
  if (!padding.ok() || !output_shape.ok()) return std::nullopt;
  options->output_padding = *padding;
  options->output_shape = *output_shape;
  auto shape = kernels::conv_transpose_shape(x, w, *options);
  return shape.ok() ? std::optional(*shape) : std::nullopt;
}

runtime::Attributes attributes_of(const ir::Node& node, bool& ok) {
  std::vector<std::pair<std::string, runtime::EValue>> values;
  ok = true;
  for (const ir::Attribute& attribute : node.attributes) {
    auto scalar = ir::scalar_attribute(attribute.value);
    if (!scalar) {
      ok = false;
      continue;
    }
    values.emplace_back(attribute.name, std::move(*scalar));
  }
  return runtime::Attributes(std::move(values));
}

// The int64 values of constant input `index`, or of int list attribute `name` when that input
// is absent; nullopt when neither is there (or the input is not a constant int64 tensor).
std::optional<std::vector<int64_t>> ints_of(const ir::Node& node, size_t index,
                                            const ConstantInput& constant, const char* name) {
  if (index < node.inputs.size() && node.inputs[index] >= 0) {
    const runtime::Tensor* t = constant ? constant(index) : nullptr;
    if (t == nullptr || t->dtype() != runtime::ScalarType::Int64) return std::nullopt;
    return std::vector<int64_t>(t->data_ptr<int64_t>(), t->data_ptr<int64_t>() + t->numel());
  }
  if (name != nullptr) {
    if (const ir::Attribute* a = node.attribute(name)) {
      const auto* values = std::get_if<std::vector<int64_t>>(&a->value);
      if (values != nullptr) return *values;
    }
  }
  return std::nullopt;
}

std::optional<int64_t> axis_in(int64_t axis, size_t rank) {
  auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return std::nullopt;
  return axis < 0 ? axis + r : axis;
}

std::optional<std::vector<int64_t>> concat_shape(const ir::Node& node,
                                                 const std::vector<std::vector<int64_t>>& inputs) {
  const ir::Attribute* a = node.attribute("axis");
  const auto* axis_value = a != nullptr ? std::get_if<int64_t>(&a->value) : nullptr;
  if (axis_value == nullptr || inputs.empty()) return std::nullopt;
  auto axis = axis_in(*axis_value, inputs[0].size());
  if (!axis) return std::nullopt;
  std::vector<int64_t> out = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].size() != out.size()) return std::nullopt;
    for (size_t d = 0; d < out.size(); ++d) {
      if (static_cast<int64_t>(d) == *axis) {
        out[d] += inputs[i][d];
      } else if (inputs[i][d] != out[d]) {
        return std::nullopt;
      }
    }
  }
  return out;
}

std::optional<std::vector<int64_t>> pool_shape_of(const ir::Node& node,
                                                  const std::vector<int64_t>& x) {
  bool ok = true;
  runtime::Attributes attributes = attributes_of(node, ok);
  if (!ok) return std::nullopt;
  auto window = kernels::internal::read_window_attributes(node.op, attributes);
  auto ceil_mode = kernels::internal::int_attribute(node.op, attributes, "ceil_mode", 0);
  if (!window.ok() || !ceil_mode.ok()) return std::nullopt;
  kernels::PoolOptions options;
  options.kernel_shape = window->kernel_shape;
  options.strides = window->strides;
  options.dilations = window->dilations;
  options.pads = window->pads;
  options.auto_pad = window->auto_pad;
  options.ceil_mode = *ceil_mode != 0;
  auto shape = kernels::pool_shape(x, options);
  return shape.ok() ? std::optional(*shape) : std::nullopt;
}

std::optional<std::vector<int64_t>> squeeze_shape(const ir::Node& node,
                                                  const std::vector<int64_t>& x,
                                                  const ConstantInput& constant) {
  std::vector<bool> drop(x.size(), false);
  auto axes = ints_of(node, 1, constant, "axes");
  if (!axes && node.inputs.size() > 1 && node.inputs[1] >= 0) return std::nullopt;
  if (!axes || axes->empty()) {
    for (size_t d = 0; d < x.size(); ++d) drop[d] = x[d] == 1;
  } else {
    for (int64_t axis : *axes) {
      auto d = axis_in(axis, x.size());
      if (!d || x[static_cast<size_t>(*d)] != 1) return std::nullopt;
      drop[static_cast<size_t>(*d)] = true;
    }
  }
  std::vector<int64_t> out;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!drop[d]) out.push_back(x[d]);
  }
  return out;
}

std::optional<std::vector<int64_t>> unsqueeze_shape(const ir::Node& node,
                                                    const std::vector<int64_t>& x,
                                                    const ConstantInput& constant) {
  auto axes = ints_of(node, 1, constant, "axes");
  if (!axes) return std::nullopt;
  size_t rank = x.size() + axes->size();
  std::vector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    auto d = axis_in(axis, rank);
    if (!d || inserted[static_cast<size_t>(*d)]) return std::nullopt;
    inserted[static_cast<size_t>(*d)] = true;
  }
  std::vector<int64_t> out;
  size_t next = 0;
  for (size_t d = 0; d < rank; ++d) out.push_back(inserted[d] ? 1 : x[next++]);
  return out;
}

std::optional<std::vector<std::vector<int64_t>>> split_shapes(const ir::Node& node,
                                                              const std::vector<int64_t>& x,
                                                              const ConstantInput& constant) {
  const ir::Attribute* a = node.attribute("axis");
  const auto* axis_value = a != nullptr ? std::get_if<int64_t>(&a->value) : nullptr;
  auto axis = axis_in(axis_value != nullptr ? *axis_value : 0, x.size());
  if (!axis) return std::nullopt;
  const int64_t total = x[static_cast<size_t>(*axis)];
  const auto outputs = static_cast<int64_t>(node.outputs.size());
  std::vector<int64_t> parts;
  if (auto split = ints_of(node, 1, constant, "split")) {
    parts = *split;
  } else if (node.inputs.size() > 1 && node.inputs[1] >= 0) {
    return std::nullopt;  // a split computed at run time
  } else {
    // Equal parts; with opset 18's num_outputs the last one may be smaller.
    int64_t chunk = (total + outputs - 1) / outputs;
    if (node.attribute("num_outputs") == nullptr && total % outputs != 0) return std::nullopt;
    for (int64_t i = 0; i < outputs; ++i) parts.push_back(std::min(chunk, total - i * chunk));
  }
  int64_t sum = 0;
  for (int64_t p : parts) {
    if (p < 0) return std::nullopt;
    sum += p;
  }
  if (static_cast<int64_t>(parts.size()) != outputs || sum != total) return std::nullopt;
  std::vector<std::vector<int64_t>> out;
  for (int64_t p : parts) {
    out.push_back(x);
    out.back()[static_cast<size_t>(*axis)] = p;
  }
  return out;
}

std::optional<std::vector<int64_t>> resize_shape(const ir::Node& node,
                                                 const std::vector<int64_t>& x,
                                                 const ConstantInput& constant) {
  // Opset 10: X, scales; 11 and later: X, roi, scales, sizes (roi, scales, sizes optional).
  auto present = [&](size_t i) { return i < node.inputs.size() && node.inputs[i] >= 0; };
  const size_t scales_index = node.inputs.size() == 2 ? 1 : 2;
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
  if (present(3)) {
    sizes = ints_of(node, 3, constant, nullptr);
    if (!sizes) return std::nullopt;
  } else if (present(scales_index)) {
    const runtime::Tensor* t = constant ? constant(scales_index) : nullptr;
    if (t == nullptr || t->dtype() != runtime::ScalarType::Float32) return std::nullopt;
    scales = std::vector<double>(t->data_ptr<float>(), t->data_ptr<float>() + t->numel());
  } else {
    return std::nullopt;
  }
  kernels::ResizeOptions options;
  if (const ir::Attribute* a = node.attribute("coordinate_transformation_mode")) {
    const auto* mode = std::get_if<std::string>(&a->value);
    if (mode == nullptr || *mode == "tf_crop_and_resize") return std::nullopt;  // needs roi
  }
  if (auto axes = ints_of(node, node.inputs.size(), constant, "axes")) options.axes = *axes;
  if (const ir::Attribute* a = node.attribute("keep_aspect_ratio_policy")) {
    const auto* policy = std::get_if<std::string>(&a->value);
    if (policy == nullptr) return std::nullopt;
    auto aspect = kernels::parse_resize_aspect(*policy);
    if (!aspect.ok()) return std::nullopt;
    options.aspect = *aspect;
  }
  auto plan = kernels::resize_plan(x, nullptr, scales ? &*scales : nullptr,
                                   sizes ? &*sizes : nullptr, options);
  return plan.ok() ? std::optional(plan->sizes) : std::nullopt;
}

}  // namespace

// LSTM, GRU and RNN: Y [seq, directions, batch, hidden] and Y_h (and LSTM's Y_c)
// [directions, batch, hidden], batch-first with layout 1. Probing them on zeros runs the whole
// recurrence: 3-4 ms per LSTM of the OCR recognizer.
std::optional<std::vector<std::vector<int64_t>>> rnn_shapes(
    const ir::Node& node, const std::vector<std::optional<std::vector<int64_t>>>& input_sizes) {
  const int64_t gates = node.op == "LSTM" ? 4 : node.op == "GRU" ? 3 : 1;
  const size_t max_outputs = node.op == "LSTM" ? 3 : 2;
  if (node.outputs.size() > max_outputs) return std::nullopt;
  if (input_sizes.size() < 2 || !input_sizes[1] || node.inputs[1] < 0) return std::nullopt;
  const std::vector<int64_t>& x = *input_sizes[0];
  const std::vector<int64_t>& w = *input_sizes[1];
  if (x.size() != 3 || w.size() != 3 || w[2] != x[2]) return std::nullopt;
  auto int_attribute = [&](const char* name, int64_t fallback) -> std::optional<int64_t> {
    const ir::Attribute* a = node.attribute(name);
    if (a == nullptr) return fallback;
    const auto* value = std::get_if<int64_t>(&a->value);
    return value != nullptr ? std::optional(*value) : std::nullopt;
  };
  auto hidden = int_attribute("hidden_size", w[1] / gates);
  auto layout = int_attribute("layout", 0);
  int64_t directions = 1;
  if (const ir::Attribute* a = node.attribute("direction")) {
    const auto* value = std::get_if<std::string>(&a->value);
    if (value == nullptr) return std::nullopt;
    if (*value == "bidirectional") {
      directions = 2;
    } else if (*value != "forward" && *value != "reverse") {
      return std::nullopt;
    }
  }
  if (!hidden || !layout || *hidden <= 0 || (*layout != 0 && *layout != 1) || w[0] != directions ||
      w[1] != gates * *hidden) {
    return std::nullopt;
  }
  const int64_t seq = *layout == 0 ? x[0] : x[1], batch = *layout == 0 ? x[1] : x[0];
  std::vector<std::vector<int64_t>> out;
  out.push_back(*layout == 0 ? std::vector<int64_t>{seq, directions, batch, *hidden}
                             : std::vector<int64_t>{batch, seq, directions, *hidden});
  const std::vector<int64_t> state = *layout == 0
                                         ? std::vector<int64_t>{directions, batch, *hidden}
                                         : std::vector<int64_t>{batch, directions, *hidden};
  for (size_t i = 1; i < node.outputs.size(); ++i) out.push_back(state);
  return out;
}

std::optional<std::vector<std::vector<int64_t>>> rule_shapes(
    const ir::Node& node, const std::vector<std::optional<std::vector<int64_t>>>& input_sizes,
    const ConstantInput& constant) {
  static const std::set<std::string> kSameShape = {"Relu",
                                                   "Sigmoid",
                                                   "Tanh",
                                                   "Erf",
                                                   "Exp",
                                                   "Log",
                                                   "Sqrt",
                                                   "Neg",
                                                   "Abs",
                                                   "Reciprocal",
                                                   "Softmax",
                                                   "LogSoftmax",
                                                   "Gelu",
                                                   "HardSwish",
                                                   "LeakyRelu",
                                                   "Elu",
                                                   "Softplus",
                                                   "Cast",
                                                   "Identity",
                                                   "Clip",
                                                   "Sin",
                                                   "Cos",
                                                   "Floor",
                                                   "Ceil",
                                                   "Round",
                                                   "Not",
                                                   "Sign",
                                                   "LayerNormalization",
                                                   "RMSNormalization",
                                                   "BatchNormalization",
                                                   "InstanceNormalization",
                                                   "GroupNormalization"};
  static const std::set<std::string> kBroadcast = {"Add",
                                                   "Sub",
                                                   "Mul",
                                                   "Div",
                                                   "Pow",
                                                   "Where",
                                                   "Equal",
                                                   "Less",
                                                   "Greater",
                                                   "LessOrEqual",
                                                   "GreaterOrEqual",
                                                   "And",
                                                   "Or",
                                                   "Xor",
                                                   "Max",
                                                   "Min",
                                                   "Mod"};
  if (!node.domain.empty() || node.outputs.empty() || node.inputs.empty()) return std::nullopt;
  // Rules over the first input and constant ones (which may leave optional inputs absent).
  if (!input_sizes.empty() && input_sizes[0] && node.inputs[0] >= 0) {
    const std::vector<int64_t>& x = *input_sizes[0];
    std::optional<std::vector<int64_t>> one;
    if (node.op == "Split") return split_shapes(node, x, constant);
    if (node.op == "LSTM" || node.op == "GRU" || node.op == "RNN") {
      return rnn_shapes(node, input_sizes);
    }
    if (node.outputs.size() != 1) {
      // The rules below have one output.
    } else if (node.op == "Reshape") {
      auto shape = ints_of(node, 1, constant, nullptr);
      const ir::Attribute* a = node.attribute("allowzero");
      const auto* allow_zero = a != nullptr ? std::get_if<int64_t>(&a->value) : nullptr;
      if (shape) {
        auto out = kernels::reshape_shape(x, *shape, allow_zero != nullptr && *allow_zero != 0);
        if (out.ok()) one = *out;
      }
      return one ? std::optional(std::vector<std::vector<int64_t>>{*one}) : std::nullopt;
    } else if (node.op == "Squeeze") {
      one = squeeze_shape(node, x, constant);
      return one ? std::optional(std::vector<std::vector<int64_t>>{*one}) : std::nullopt;
    } else if (node.op == "Unsqueeze") {
      one = unsqueeze_shape(node, x, constant);
      return one ? std::optional(std::vector<std::vector<int64_t>>{*one}) : std::nullopt;
    } else if (node.op == "Resize") {
      one = resize_shape(node, x, constant);
      return one ? std::optional(std::vector<std::vector<int64_t>>{*one}) : std::nullopt;
    }
  }
  for (int input : node.inputs) {
    if (input < 0) return std::nullopt;  // optional inputs change some rules: run the kernel
  }
  for (const auto& sizes : input_sizes) {
    if (!sizes) return std::nullopt;
  }
  const std::vector<int64_t>& first = *input_sizes[0];
  std::vector<int64_t> out;
  if (kSameShape.count(node.op) != 0) {
    // Only the first output (LayerNormalization's Mean and InvStdDev differ).
    if (node.outputs.size() != 1) return std::nullopt;
    out = first;
  } else if (kBroadcast.count(node.op) != 0) {
    if (node.outputs.size() != 1) return std::nullopt;
    out = first;
    for (size_t i = 1; i < input_sizes.size(); ++i) {
      auto shape = kernels::broadcast_shape(out, *input_sizes[i]);
      if (!shape.ok()) return std::nullopt;
      out = *shape;
    }
  } else if (node.op == "MatMul") {
    if (input_sizes.size() != 2 || node.outputs.size() != 1) return std::nullopt;
    auto shape = kernels::matmul_shape(first, *input_sizes[1]);
    if (!shape.ok()) return std::nullopt;
    out = *shape;
  } else if (node.op == "Concat") {
    if (node.outputs.size() != 1) return std::nullopt;
    std::vector<std::vector<int64_t>> all;
    for (const auto& sizes : input_sizes) all.push_back(*sizes);
    auto shape = concat_shape(node, all);
    if (!shape) return std::nullopt;
    out = *shape;
  } else if (node.op == "MaxPool" || node.op == "AveragePool") {
    // MaxPool's optional Indices output: left to the kernel.
    if (node.outputs.size() != 1) return std::nullopt;
    auto shape = pool_shape_of(node, first);
    if (!shape) return std::nullopt;
    out = *shape;
  } else if (node.op == "Conv" || node.op == "ConvTranspose") {
    // Probing these on zeros runs the reference convolution: OCR detection spent 300 ms so.
    if (input_sizes.size() < 2 || node.outputs.size() != 1) return std::nullopt;
    auto shape = conv_like_shape(node, first, *input_sizes[1]);
    if (!shape) return std::nullopt;
    out = *shape;
  } else if (node.op == "Transpose") {
    if (node.outputs.size() != 1) return std::nullopt;
    std::vector<int64_t> perm;
    if (const ir::Attribute* a = node.attribute("perm")) {
      const auto* values = std::get_if<std::vector<int64_t>>(&a->value);
      if (values == nullptr) return std::nullopt;
      perm = *values;
    } else {
      for (size_t i = first.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    }
    if (perm.size() != first.size()) return std::nullopt;
    std::vector<bool> seen(first.size(), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(first.size()) || seen[static_cast<size_t>(p)]) {
        return std::nullopt;
      }
      seen[static_cast<size_t>(p)] = true;
      out.push_back(first[static_cast<size_t>(p)]);
    }
  } else {
    return std::nullopt;
  }
  return std::vector<std::vector<int64_t>>{out};
}

}  // namespace kiln::engine::compile
