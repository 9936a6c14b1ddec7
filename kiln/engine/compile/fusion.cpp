// Fusion: Conv/ConvTranspose/MatMul/Gemm followed by a bias Add, one residual Add (not after a
// ConvTranspose) and activations (SiLU's x * sigmoid(x) among them, and Muls by a constant
// scalar) becomes one oneDNN op with a bias and post-ops; an instance or group normalization
// followed by activations, one of kiln's row ops with them. A fused node is one whose input is the
// chain's current result, read by that node alone and not a function output (SiLU's pair reads
// it twice, and nothing else does).
#include <kiln/engine/compile/function_plan.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::engine::compile {

namespace {

using cpu::PostOp;
using cpu::PostOpKind;
using runtime::ScalarType;

bool is_constant(const FusionContext& c, int value) {
  return value >= 0 && c.slots[value]->kind == Slot::Kind::Constant;
}

const std::vector<int64_t>* static_sizes(const FusionContext& c, int value) {
  if (value < 0 || !c.slots[value]->sizes) return nullptr;
  return &*c.slots[value]->sizes;
}

// A constant scalar input of Clip (opset 11+), as float; nullopt when absent or not constant.
std::optional<float> constant_scalar(const FusionContext& c, const ir::Node& node, size_t index,
                                     bool& ok) {
  if (index >= node.inputs.size() || node.inputs[index] < 0) return std::nullopt;
  int value = node.inputs[index];
  const Slot& slot = *c.slots[value];
  if (slot.kind != Slot::Kind::Constant || slot.dtype != ScalarType::Float32 ||
      slot.value.to_tensor().numel() != 1) {
    ok = false;
    return std::nullopt;
  }
  return *slot.value.to_tensor().data_ptr<float>();
}

std::optional<PostOp> activation(const FusionContext& c, const ir::Node& node) {
  if (node.op == "Mul" && node.inputs.size() == 2) {
    // By a constant scalar (a division by one, which the importer makes a Mul): alpha * x.
    for (size_t side = 0; side < 2; ++side) {
      bool ok = true;
      std::optional<float> s = constant_scalar(c, node, side, ok);
      const int other = node.inputs[1 - side];
      if (s && ok && !is_constant(c, other)) return PostOp{PostOpKind::Linear, *s, 0.0f};
    }
    return std::nullopt;
  }
  if (node.op == "Relu") return PostOp{PostOpKind::Relu};
  if (node.op == "Sigmoid") return PostOp{PostOpKind::Sigmoid};
  if (node.op == "Tanh") return PostOp{PostOpKind::Tanh};
  // (Where oneDNN applies a fused GELU slowly, it stays a step: cpu::gelu_post_op_fast.)
  if (node.op == "Gelu" && !cpu::gelu_post_op_fast()) return std::nullopt;
  if (node.op == "Gelu") {
    const ir::Attribute* a = node.attribute("approximate");
    const auto* s = a ? std::get_if<std::string>(&a->value) : nullptr;
    if (a != nullptr && s == nullptr) return std::nullopt;
    if (s != nullptr && *s != "none" && *s != "tanh") return std::nullopt;
    return PostOp{PostOpKind::Gelu, s != nullptr && *s == "tanh" ? 1.0f : 0.0f};
  }
  if (node.op == "Clip") {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    if (const auto* a = node.attribute("min")) lo = static_cast<float>(std::get<double>(a->value));
    if (const auto* a = node.attribute("max")) hi = static_cast<float>(std::get<double>(a->value));
    bool ok = true;
    if (auto v = constant_scalar(c, node, 1, ok)) lo = *v;
    if (auto v = constant_scalar(c, node, 2, ok)) hi = *v;
    if (!ok) return std::nullopt;
    return PostOp{PostOpKind::Clip, lo, hi};
  }
  return std::nullopt;
}

// The sizes the op takes its bias with, when `bias` broadcasts along the channel (Conv) or
// the last dim (MatMul) only; Gemm takes C as it is.
std::optional<std::vector<int64_t>> bias_view(const ir::Node& anchor,
                                              const std::vector<int64_t>& out,
                                              const std::vector<int64_t>& bias) {
  if (anchor.op == "Gemm") return bias;
  if (bias.size() > out.size() || out.empty()) return std::nullopt;
  size_t axis = anchor.op == "Conv" || anchor.op == "ConvTranspose" ? 1 : out.size() - 1;
  if (axis >= out.size()) return std::nullopt;
  size_t pad = out.size() - bias.size();
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t b = d < pad ? 1 : bias[d - pad];
    if (b != (d == axis ? out[axis] : 1)) return std::nullopt;
  }
  return std::vector<int64_t>{out[axis]};
}

// The node reading `current` when a chain may go on through it: `current`'s only reader, not
// absorbed yet, of one output in the default domain and without regions; else null.
const ir::Node* chain_next(const FusionContext& c, int current, size_t& index) {
  if (c.num_uses[current] != 1 || c.consumer[current] < 0) return nullptr;
  index = static_cast<size_t>(c.consumer[current]);
  const ir::Node& next = c.graph.nodes[index];
  if (c.absorbed[index] || !next.regions.empty() || next.outputs.size() != 1 ||
      next.outputs[0] < 0 || !next.domain.empty()) {
    return nullptr;
  }
  return &next;
}

// SiLU as exporters write it, x * sigmoid(x): `current` read exactly twice, by a Sigmoid of it
// (whose output only the Mul reads) and by the Mul of `current` and that, in either order; both
// after `anchor`, of one output, in the default domain, not absorbed yet. Sets their indices and
// returns the Mul's output, or -1.
int silu_next(const FusionContext& c, size_t anchor, int current, size_t& sigmoid_index,
              size_t& mul_index) {
  if (c.num_uses[current] != 2) return -1;
  std::vector<size_t> readers;
  for (size_t i = anchor + 1; i < c.graph.nodes.size() && readers.size() <= 2; ++i) {
    for (int input : c.graph.nodes[i].inputs) {
      if (input == current) readers.push_back(i);
    }
  }
  if (readers.size() != 2 || readers[0] == readers[1]) return -1;  // Mul(x, x) is x squared
  auto plain = [&](size_t i, const char* op, size_t inputs) {
    const ir::Node& n = c.graph.nodes[i];
    return !c.absorbed[i] && n.op == op && n.domain.empty() && n.regions.empty() &&
           n.inputs.size() == inputs && n.outputs.size() == 1 && n.outputs[0] >= 0;
  };
  sigmoid_index = readers[0];
  mul_index = readers[1];
  if (!plain(sigmoid_index, "Sigmoid", 1) || !plain(mul_index, "Mul", 2)) return -1;
  const int s = c.graph.nodes[sigmoid_index].outputs[0];
  const ir::Node& mul = c.graph.nodes[mul_index];
  const bool reads_both = (mul.inputs[0] == current && mul.inputs[1] == s) ||
                          (mul.inputs[0] == s && mul.inputs[1] == current);
  if (!reads_both || c.num_uses[s] != 1 || c.consumer[s] != static_cast<int>(mul_index)) {
    return -1;
  }
  return mul.outputs[0];
}

// Shape-generic chains: a SiLU pair reading `current` (silu_next) joins `group` as a Swish
// post-op, `current` then its result; Stop for one of another type than f32.
enum class SiluStep { None, Absorbed, Stop };
SiluStep absorb_silu(const FusionContext& c, size_t anchor, int& current, FusionGroup& group) {
  size_t sigmoid_index = 0, mul_index = 0;
  const int silu = silu_next(c, anchor, current, sigmoid_index, mul_index);
  if (silu < 0) return SiluStep::None;
  if (c.slots[silu]->dtype != ScalarType::Float32) return SiluStep::Stop;
  group.post_ops.push_back(PostOp{PostOpKind::Swish});
  group.absorbed.push_back(sigmoid_index);
  group.absorbed.push_back(mul_index);
  current = silu;
  return SiluStep::Absorbed;
}

// `group` ending at `current`, or nullopt when nothing was absorbed.
std::optional<FusionGroup> finished(FusionGroup group, int current) {
  if (group.absorbed.empty()) return std::nullopt;
  group.output = current;
  return group;
}

bool has_bias_input(const ir::Node& anchor) {
  if (anchor.op == "MatMul") return false;
  return anchor.inputs.size() > 2 && anchor.inputs[2] >= 0;
}

}  // namespace

std::optional<FusionGroup> find_fusion(const FusionContext& c, size_t anchor_index) {
  const ir::Node& anchor = c.graph.nodes[anchor_index];
  // An instance or group normalization takes the activations after it (kiln's row loops apply
  // them); no bias or residual.
  const bool norm = anchor.op == "InstanceNormalization" || anchor.op == "GroupNormalization";
  if (anchor.op != "Conv" && anchor.op != "ConvTranspose" && anchor.op != "MatMul" &&
      anchor.op != "Gemm" && !norm) {
    return std::nullopt;
  }
  if (anchor.outputs.size() != 1 || anchor.outputs[0] < 0) return std::nullopt;
  FusionGroup group;
  int current = anchor.outputs[0];
  const std::vector<int64_t>* out = static_sizes(c, current);
  if (out == nullptr || c.slots[current]->dtype != ScalarType::Float32) return std::nullopt;
  bool bias_done = has_bias_input(anchor);
  size_t next_index = 0;
  for (;;) {
    size_t sigmoid_index = 0, mul_index = 0;
    const int silu = silu_next(c, anchor_index, current, sigmoid_index, mul_index);
    if (silu >= 0) {
      const std::vector<int64_t>* silu_out = static_sizes(c, silu);
      if (silu_out == nullptr || *silu_out != *out) break;
      group.post_ops.push_back(PostOp{PostOpKind::Swish});
      group.absorbed.push_back(sigmoid_index);
      group.absorbed.push_back(mul_index);
      bias_done = true;
      current = silu;
      continue;
    }
    const ir::Node* next_node = chain_next(c, current, next_index);
    if (next_node == nullptr) break;
    const ir::Node& next = *next_node;
    const std::vector<int64_t>* next_out = static_sizes(c, next.outputs[0]);
    if (next_out == nullptr || *next_out != *out) break;
    if (next.op == "Add" && next.inputs.size() == 2) {
      if (next.inputs[0] == next.inputs[1] || norm) break;
      int other = next.inputs[0] == current ? next.inputs[1] : next.inputs[0];
      const std::vector<int64_t>* other_sizes = static_sizes(c, other);
      if (other_sizes == nullptr || c.slots[other]->dtype != ScalarType::Float32) break;
      if (is_constant(c, other)) {
        if (bias_done || group.residual || !group.post_ops.empty()) break;
        auto view = bias_view(anchor, *out, *other_sizes);
        if (!view) break;
        group.bias = other;
        group.bias_sizes = *view;
        bias_done = true;
      } else {
        // The residual is read at the anchor's place, so it must exist by then.
        bool ready = c.producer[other] < 0 || c.producer[other] < static_cast<int>(anchor_index);
        // Not into a ConvTranspose: the matrix product that runs an upsampling one (kernel =
        // strides) takes no residual, and oneDNN's deconvolution runs such layers 20x slower.
        if (group.residual || !group.post_ops.empty() || *other_sizes != *out || !ready ||
            anchor.op == "ConvTranspose") {
          break;
        }
        group.residual = other;
        group.post_ops.push_back(PostOp{PostOpKind::AddResidual});
        bias_done = true;
      }
    } else if (auto post_op = activation(c, next)) {
      group.post_ops.push_back(*post_op);
      bias_done = true;
    } else {
      break;
    }
    group.absorbed.push_back(next_index);
    current = next.outputs[0];
  }
  return finished(std::move(group), current);
}

std::optional<FusionGroup> find_generic_fusion(const FusionContext& c, size_t anchor_index) {
  const ir::Node& anchor = c.graph.nodes[anchor_index];
  if (anchor.op != "MatMul" || anchor.inputs.size() != 2 || !is_constant(c, anchor.inputs[1]) ||
      anchor.outputs.size() != 1 || anchor.outputs[0] < 0) {
    return std::nullopt;
  }
  const std::vector<int64_t>* b = static_sizes(c, anchor.inputs[1]);
  if (b == nullptr || b->size() != 2) return std::nullopt;
  const int64_t n = (*b)[1];
  FusionGroup group;
  int current = anchor.outputs[0];
  size_t next_index = 0;
  for (;;) {
    const SiluStep silu = absorb_silu(c, anchor_index, current, group);
    if (silu == SiluStep::Stop) break;
    if (silu == SiluStep::Absorbed) continue;
    const ir::Node* next_node = chain_next(c, current, next_index);
    if (next_node == nullptr) break;
    const ir::Node& next = *next_node;
    if (c.slots[next.outputs[0]]->dtype != ScalarType::Float32) break;
    if (next.op == "Add" && next.inputs.size() == 2 && next.inputs[0] != next.inputs[1]) {
      int other = next.inputs[0] == current ? next.inputs[1] : next.inputs[0];
      const std::vector<int64_t>* bias = static_sizes(c, other);
      // A bias along the last dim only ([N] or [1, ..., 1, N]), first in the chain.
      if (group.bias || !group.post_ops.empty() || !is_constant(c, other) || bias == nullptr ||
          bias->empty() || bias->back() != n || c.slots[other]->dtype != ScalarType::Float32 ||
          !std::all_of(bias->begin(), bias->end() - 1, [](int64_t d) { return d == 1; })) {
        break;
      }
      group.bias = other;
      group.bias_sizes = {n};
    } else if (auto post_op = activation(c, next)) {
      group.post_ops.push_back(*post_op);
    } else {
      break;
    }
    group.absorbed.push_back(next_index);
    current = next.outputs[0];
  }
  return finished(std::move(group), current);
}

std::optional<FusionGroup> find_generic_conv_fusion(const FusionContext& c, size_t anchor_index) {
  const ir::Node& anchor = c.graph.nodes[anchor_index];
  if ((anchor.op != "Conv" && anchor.op != "ConvTranspose") || anchor.inputs.size() < 2 ||
      !is_constant(c, anchor.inputs[1]) || anchor.outputs.size() != 1 || anchor.outputs[0] < 0 ||
      c.slots[anchor.outputs[0]]->dtype != ScalarType::Float32) {
    return std::nullopt;
  }
  const std::vector<int64_t>* w = static_sizes(c, anchor.inputs[1]);
  if (w == nullptr || w->size() < 3) return std::nullopt;
  int64_t groups = 1;
  if (const ir::Attribute* a = anchor.attribute("group")) {
    if (const auto* g = std::get_if<int64_t>(&a->value)) groups = *g;
  }
  // The output's sizes as far as a bias sees them: its channels, 1 elsewhere.
  std::vector<int64_t> out(w->size(), 1);
  out[1] = anchor.op == "Conv" ? (*w)[0] : (*w)[1] * groups;
  FusionGroup group;
  bool bias_done = has_bias_input(anchor);
  int current = anchor.outputs[0];
  size_t next_index = 0;
  for (;;) {
    const SiluStep silu = absorb_silu(c, anchor_index, current, group);
    if (silu == SiluStep::Stop) break;
    if (silu == SiluStep::Absorbed) {
      bias_done = true;
      continue;
    }
    const ir::Node* next_node = chain_next(c, current, next_index);
    if (next_node == nullptr) break;
    const ir::Node& next = *next_node;
    if (c.slots[next.outputs[0]]->dtype != ScalarType::Float32) break;
    if (next.op == "Add" && next.inputs.size() == 2 && next.inputs[0] != next.inputs[1]) {
      int other = next.inputs[0] == current ? next.inputs[1] : next.inputs[0];
      if (c.slots[other]->dtype != ScalarType::Float32) break;
      if (!is_constant(c, other)) {
        // A residual, only where the model's types say it has the result's shape (dims equal
        // as expressions; the op made at run time checks the sizes): one that broadcasts
        // would not fit the op.
        const auto& types = c.graph.values;
        const ir::TensorType& mine = types[static_cast<size_t>(anchor.outputs[0])].type;
        auto same = [&](int v) {
          const ir::TensorType& type = types[static_cast<size_t>(v)].type;
          return type.rank_known && mine.rank_known && type.shape == mine.shape;
        };
        bool ready = c.producer[other] < 0 || c.producer[other] < static_cast<int>(anchor_index);
        if (group.residual || !group.post_ops.empty() || !ready || anchor.op != "Conv" ||
            !same(other) || !same(next.outputs[0])) {
          break;
        }
        group.residual = other;
        group.post_ops.push_back(PostOp{PostOpKind::AddResidual});
        bias_done = true;
        group.absorbed.push_back(next_index);
        current = next.outputs[0];
        continue;
      }
      // A bias along the channels only.
      const std::vector<int64_t>* bias = static_sizes(c, other);
      if (bias_done || bias == nullptr) break;
      auto view = bias_view(anchor, out, *bias);
      if (!view) break;
      group.bias = other;
      group.bias_sizes = *view;
      bias_done = true;
    } else if (auto post_op = activation(c, next)) {
      group.post_ops.push_back(*post_op);
      bias_done = true;
    } else {
      break;
    }
    group.absorbed.push_back(next_index);
    current = next.outputs[0];
  }
  return finished(std::move(group), current);
}

std::optional<FusionGroup> find_generic_scale(const FusionContext& c, size_t anchor_index) {
  const ir::Node& anchor = c.graph.nodes[anchor_index];
  if (anchor.op != "MatMul" || anchor.outputs.size() != 1 || anchor.outputs[0] < 0) {
    return std::nullopt;
  }
  size_t next_index = 0;
  const ir::Node* next = chain_next(c, anchor.outputs[0], next_index);
  if (next == nullptr || c.slots[next->outputs[0]]->dtype != ScalarType::Float32) {
    return std::nullopt;
  }
  std::optional<PostOp> scale = activation(c, *next);
  if (!scale || scale->kind != PostOpKind::Linear || scale->beta != 0.0f) return std::nullopt;
  FusionGroup group;
  group.post_ops.push_back(*scale);
  group.absorbed.push_back(next_index);
  return finished(std::move(group), next->outputs[0]);
}

int matmul_reading_transposed(const FusionContext& c, size_t transpose, bool declared_rank) {
  const ir::Node& t = c.graph.nodes[transpose];
  if (t.op != "Transpose" || !t.domain.empty() || t.inputs.size() != 1 || t.outputs.size() != 1 ||
      t.inputs[0] < 0 || t.outputs[0] < 0) {
    return -1;
  }
  const int x = t.inputs[0], y = t.outputs[0];
  const Slot& source = *c.slots[static_cast<size_t>(x)];
  const std::vector<int64_t>* sizes = static_sizes(c, x);
  const ir::TensorType& type = c.graph.values[static_cast<size_t>(x)].type;
  size_t rank = sizes != nullptr ? sizes->size() : 0;
  if (sizes == nullptr && declared_rank && type.rank_known) rank = type.shape.size();
  if (rank < 2 || source.dtype != ScalarType::Float32 || is_constant(c, x) ||
      c.num_uses[static_cast<size_t>(y)] != 1) {
    return -1;
  }
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);  // default
  if (const ir::Attribute* a = t.attribute("perm")) {
    const auto* ints = std::get_if<std::vector<int64_t>>(&a->value);
    if (ints == nullptr) return -1;
    perm = *ints;
  }
  if (perm.size() != rank) return -1;
  for (size_t i = 0; i < rank; ++i) {
    const size_t swapped = i + 2 < rank ? i : (i + 2 == rank ? rank - 1 : rank - 2);
    if (perm[i] != static_cast<int64_t>(swapped)) return -1;
  }
  const int m = c.consumer[static_cast<size_t>(y)];
  if (m < 0 || c.absorbed[static_cast<size_t>(m)]) return -1;
  const ir::Node& matmul = c.graph.nodes[static_cast<size_t>(m)];
  if (matmul.op != "MatMul" || !matmul.domain.empty() || matmul.inputs.size() != 2 ||
      matmul.inputs[1] != y || matmul.inputs[0] == y) {
    return -1;
  }
  return m;
}

}  // namespace kiln::engine::compile
