#include <kiln/engine/passes/rank_completion.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::engine::passes {

namespace {

using Shape = std::vector<ir::Dim>;

// More dims than any model has (a Reshape to a shape of a million elements, an Unsqueeze of a
// million axes) is a corrupt model: left unknown, for the kernel to reject.
constexpr size_t kMostDims = 64;

const std::set<std::string>& same_shape_ops() {
  static const std::set<std::string> ops = {"Abs",
                                            "Acos",
                                            "Asin",
                                            "Atan",
                                            "BatchNormalization",
                                            "Cast",
                                            "Ceil",
                                            "Celu",
                                            "Clip",
                                            "Cos",
                                            "Dropout",
                                            "Elu",
                                            "Erf",
                                            "Exp",
                                            "Floor",
                                            "Gelu",
                                            "GroupNormalization",
                                            "HardSigmoid",
                                            "HardSwish",
                                            "Identity",
                                            "InstanceNormalization",
                                            "IsInf",
                                            "IsNaN",
                                            "LayerNormalization",
                                            "LeakyRelu",
                                            "Log",
                                            "LogSoftmax",
                                            "LpNormalization",
                                            "Neg",
                                            "Not",
                                            "Reciprocal",
                                            "RMSNormalization",
                                            "Relu",
                                            "Round",
                                            "Selu",
                                            "Sigmoid",
                                            "Sign",
                                            "Sin",
                                            "Softmax",
                                            "Softplus",
                                            "Softsign",
                                            "Sqrt",
                                            "Tan",
                                            "Tanh",
                                            "ThresholdedRelu"};
  return ops;
}

const std::set<std::string>& broadcast_ops() {
  static const std::set<std::string> ops = {
      "Add",  "And",         "BitShift", "Div",  "Equal", "Greater", "GreaterOrEqual",
      "Less", "LessOrEqual", "Max",      "Mean", "Min",   "Mod",     "Mul",
      "Or",   "Pow",         "PRelu",    "Sub",  "Sum",   "Where",   "Xor"};
  return ops;
}

bool is_reduction(const std::string& op) {
  return op.rfind("Reduce", 0) == 0 || op == "ArgMax" || op == "ArgMin";
}

bool is_one(const ir::Dim& d) { return d.is_static() && d.value() == 1; }

// The dim of a broadcast of `a` and `b`; nullopt for two static sizes no broadcast allows.
std::optional<ir::Dim> broadcast_dim(const ir::Dim& a, const ir::Dim& b) {
  if (a == b || is_one(b)) return a;
  if (is_one(a)) return b;
  if (a.is_static() && b.is_static()) return std::nullopt;
  // A static size against a dynamic one: the dynamic one must be 1 or that size.
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  return ir::Dim::symbol("");
}

std::optional<Shape> broadcast(const std::vector<const Shape*>& shapes) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, ir::Dim(1));
  for (const Shape* s : shapes) {
    const size_t offset = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      auto d = broadcast_dim(out[offset + i], (*s)[i]);
      if (!d) return std::nullopt;
      out[offset + i] = *d;
    }
  }
  return out;
}

class Completer {
 public:
  Completer(const ir::Model& model, ir::Graph& graph)
      : model_(model), graph_(graph), producer_(graph.values.size(), nullptr) {
    for (const ir::Node& node : graph_.nodes) {
      for (int out : node.outputs) {
        if (out >= 0) producer_[static_cast<size_t>(out)] = &node;
      }
    }
  }

  size_t run() {
    size_t completed = 0;
    for (const ir::Node& node : graph_.nodes) {
      if (!node.regions.empty() || !node.domain.empty() || node.outputs.empty()) continue;
      if (node.op == "Split") {
        completed += split(node);
        continue;
      }
      const int out = node.outputs[0];
      if (out < 0 || type(out).rank_known) continue;
      std::optional<Shape> shape = infer(node);
      if (shape) completed += set_shape(out, std::move(*shape));
    }
    return completed;
  }

 private:
  const ir::TensorType& type(int value) const {
    return graph_.values[static_cast<size_t>(value)].type;
  }
  size_t set_shape(int value, Shape shape) {
    ir::TensorType& t = graph_.values[static_cast<size_t>(value)].type;
    if (t.rank_known) return 0;
    t.shape = std::move(shape);
    t.rank_known = true;
    return 1;
  }

  // The shape of input `i` of `node`, when present and of known rank.
  const Shape* input_shape(const ir::Node& node, size_t i) const {
    if (i >= node.inputs.size() || node.inputs[i] < 0) return nullptr;
    const ir::TensorType& t = type(node.inputs[i]);
    return t.rank_known ? &t.shape : nullptr;
  }

  // The int64 values of constant input `i`, or of the ints attribute `name` when that input
  // is absent.
  std::optional<std::vector<int64_t>> ints(const ir::Node& node, size_t i, const char* name) {
    if (i < node.inputs.size() && node.inputs[i] >= 0) {
      const ir::Value& v = graph_.values[static_cast<size_t>(node.inputs[i])];
      if (v.weight < 0) return std::nullopt;
      const ir::Weight& w = model_.weights[static_cast<size_t>(v.weight)];
      if (w.dtype != runtime::ScalarType::Int64 || w.data.size() % sizeof(int64_t) != 0) {
        return std::nullopt;
      }
      std::vector<int64_t> out(w.data.size() / sizeof(int64_t));
      if (!out.empty()) std::memcpy(out.data(), w.data.data(), w.data.size());
      return out;
    }
    if (const ir::Attribute* a = node.attribute(name)) {
      if (const auto* values = std::get_if<std::vector<int64_t>>(&a->value)) return *values;
    }
    return std::nullopt;
  }

  // `axes` made non-negative against `rank`, sorted and distinct; nullopt when one is out of
  // range or repeated.
  static std::optional<std::vector<int64_t>> normalized(std::vector<int64_t> axes, size_t rank) {
    const auto r = static_cast<int64_t>(rank);
    for (int64_t& a : axes) {
      if (a < -r || a >= r) return std::nullopt;
      if (a < 0) a += r;
    }
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
    return axes;
  }

  std::optional<Shape> infer(const ir::Node& node) {
    const std::string& op = node.op;
    if (same_shape_ops().count(op) != 0) {
      const Shape* x = input_shape(node, 0);
      return x ? std::optional<Shape>(*x) : std::nullopt;
    }
    if (broadcast_ops().count(op) != 0) {
      std::vector<const Shape*> shapes;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const Shape* s = input_shape(node, i);
        if (s == nullptr) return std::nullopt;
        shapes.push_back(s);
      }
      if (shapes.empty()) return std::nullopt;
      return broadcast(shapes);
    }
    if (op == "MatMul") return matmul(node);
    if (op == "Transpose") return transpose(node);
    if (op == "Reshape") return reshape(node);
    if (op == "Conv") return conv(node);
    if (is_reduction(op)) return reduction(node);
    if (op == "Unsqueeze") return unsqueeze(node);
    if (op == "Squeeze") return squeeze(node);
    return std::nullopt;
  }

  // Each output: the input's dims, the split axis's the part's size when the sizes are
  // constant, else unknown.
  size_t split(const ir::Node& node) {
    const Shape* x = input_shape(node, 0);
    if (x == nullptr || x->empty()) return 0;
    const ir::Attribute* a = node.attribute("axis");
    const auto* axis_value = a ? std::get_if<int64_t>(&a->value) : nullptr;
    auto axis = normalized({axis_value ? *axis_value : 0}, x->size());
    if (!axis) return 0;
    const auto d = static_cast<size_t>(axis->front());
    std::optional<std::vector<int64_t>> sizes = ints(node, 1, "split");
    const auto parts = static_cast<int64_t>(node.outputs.size());
    if (sizes) {
      int64_t sum = 0;
      for (int64_t size : *sizes) {
        if (size < 0 || size > INT64_MAX - sum) return 0;  // sizes the kernel rejects
        sum += size;
      }
      if (static_cast<int64_t>(sizes->size()) != parts ||
          ((*x)[d].is_static() && (*x)[d].value() != sum)) {
        return 0;
      }
    } else if ((*x)[d].is_static() && node.attribute("num_outputs") == nullptr &&
               (*x)[d].value() % parts == 0) {
      sizes = std::vector<int64_t>(static_cast<size_t>(parts), (*x)[d].value() / parts);
    }
    size_t completed = 0;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] < 0) continue;
      Shape out = *x;
      out[d] = sizes ? ir::Dim((*sizes)[i]) : ir::Dim::symbol("");
      completed += set_shape(node.outputs[i], std::move(out));
    }
    return completed;
  }

  std::optional<Shape> matmul(const ir::Node& node) {
    const Shape* a = input_shape(node, 0);
    const Shape* b = input_shape(node, 1);
    if (a == nullptr || b == nullptr || a->empty() || b->empty()) return std::nullopt;
    // A vector operand gains a dim of 1 that the result then drops.
    Shape pa = a->size() == 1 ? Shape{ir::Dim(1), (*a)[0]} : *a;
    Shape pb = b->size() == 1 ? Shape{(*b)[0], ir::Dim(1)} : *b;
    const Shape batch_a(pa.begin(), pa.end() - 2), batch_b(pb.begin(), pb.end() - 2);
    std::optional<Shape> out = broadcast({&batch_a, &batch_b});
    if (!out) return std::nullopt;
    if (a->size() != 1) out->push_back(pa[pa.size() - 2]);
    if (b->size() != 1) out->push_back(pb.back());
    return out;
  }

  std::optional<Shape> transpose(const ir::Node& node) {
    const Shape* x = input_shape(node, 0);
    if (x == nullptr) return std::nullopt;
    std::vector<int64_t> perm;
    if (const ir::Attribute* a = node.attribute("perm")) {
      const auto* values = std::get_if<std::vector<int64_t>>(&a->value);
      if (values == nullptr || values->size() != x->size()) return std::nullopt;
      perm = *values;
    } else {
      for (size_t i = x->size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    }
    auto sorted = normalized(perm, x->size());
    if (!sorted) return std::nullopt;
    Shape out;
    const auto rank = static_cast<int64_t>(x->size());
    for (int64_t p : perm) out.push_back((*x)[static_cast<size_t>(p < 0 ? p + rank : p)]);
    return out;
  }

  // [N, C_out, unknown spatial...]: the batch of X, the output channels of W.
  std::optional<Shape> conv(const ir::Node& node) {
    const Shape* x = input_shape(node, 0);
    const Shape* w = input_shape(node, 1);
    if (x == nullptr || w == nullptr || x->size() < 3 || w->size() != x->size()) {
      return std::nullopt;
    }
    Shape out = {(*x)[0], (*w)[0]};
    for (size_t d = 2; d < x->size(); ++d) out.push_back(ir::Dim::symbol(""));
    return out;
  }

  std::optional<Shape> reshape(const ir::Node& node) {
    // To the shape of a value (Reshape(y, Shape(v)), as PyTorch restores a shape): v's dims.
    const int target = node.inputs.size() > 1 ? node.inputs[1] : -1;
    const ir::Node* from = target >= 0 ? producer_[static_cast<size_t>(target)] : nullptr;
    if (input_shape(node, 0) != nullptr && from != nullptr && from->op == "Shape" &&
        from->domain.empty() && from->attributes.empty() && from->inputs.size() == 1) {
      if (const Shape* v = input_shape(*from, 0)) return *v;
    }
    const Shape* shape = input_shape(node, 1);
    if (input_shape(node, 0) == nullptr || shape == nullptr || shape->size() != 1 ||
        !(*shape)[0].is_static() || (*shape)[0].value() > static_cast<int64_t>(kMostDims)) {
      return std::nullopt;
    }
    Shape out;
    for (int64_t i = 0; i < (*shape)[0].value(); ++i) out.push_back(ir::Dim::symbol(""));
    return out;
  }

  std::optional<Shape> reduction(const ir::Node& node) {
    const Shape* x = input_shape(node, 0);
    if (x == nullptr) return std::nullopt;
    const bool arg = node.op == "ArgMax" || node.op == "ArgMin";
    const ir::Attribute* keep = node.attribute("keepdims");
    const auto* keep_value = keep ? std::get_if<int64_t>(&keep->value) : nullptr;
    const bool keepdims = keep_value == nullptr || *keep_value != 0;
    std::optional<std::vector<int64_t>> axes;
    if (arg) {
      const ir::Attribute* a = node.attribute("axis");
      const auto* axis = a ? std::get_if<int64_t>(&a->value) : nullptr;
      axes = std::vector<int64_t>{axis ? *axis : 0};
    } else {
      axes = ints(node, 1, "axes");
    }
    // Without axes a reduction takes every axis (or none, with noop_with_empty_axes).
    if (!axes || axes->empty()) return std::nullopt;
    auto sorted = normalized(*axes, x->size());
    if (!sorted) return std::nullopt;
    Shape out;
    for (size_t i = 0; i < x->size(); ++i) {
      const bool reduced = std::binary_search(sorted->begin(), sorted->end(), i);
      if (!reduced) {
        out.push_back((*x)[i]);
      } else if (keepdims) {
        out.push_back(ir::Dim(1));
      }
    }
    return out;
  }

  std::optional<Shape> unsqueeze(const ir::Node& node) {
    const Shape* x = input_shape(node, 0);
    std::optional<std::vector<int64_t>> axes = ints(node, 1, "axes");
    if (x == nullptr || !axes || axes->empty()) return std::nullopt;
    const size_t rank = x->size() + axes->size();
    if (rank > kMostDims) return std::nullopt;
    auto sorted = normalized(*axes, rank);
    if (!sorted) return std::nullopt;
    Shape out;
    size_t next = 0;
    for (size_t i = 0; i < rank; ++i) {
      if (std::binary_search(sorted->begin(), sorted->end(), i)) {
        out.push_back(ir::Dim(1));
      } else {
        out.push_back((*x)[next++]);
      }
    }
    return out;
  }

  std::optional<Shape> squeeze(const ir::Node& node) {
    const Shape* x = input_shape(node, 0);
    std::optional<std::vector<int64_t>> axes = ints(node, 1, "axes");
    // Without axes, Squeeze drops the dims that are 1 at run time: unknowable here.
    if (x == nullptr || !axes || axes->empty()) return std::nullopt;
    auto sorted = normalized(*axes, x->size());
    if (!sorted) return std::nullopt;
    Shape out;
    for (size_t i = 0; i < x->size(); ++i) {
      const bool dropped = std::binary_search(sorted->begin(), sorted->end(), i);
      if (dropped && (*x)[i].is_static() && (*x)[i].value() != 1) return std::nullopt;
      if (!dropped) out.push_back((*x)[i]);
    }
    return out;
  }

  const ir::Model& model_;
  ir::Graph& graph_;
  std::vector<const ir::Node*> producer_;  ///< Of each value, its top-level node (or null).
};

}  // namespace

size_t complete_ranks(const ir::Model& model, ir::Graph& graph) {
  return Completer(model, graph).run();
}

}  // namespace kiln::engine::passes
