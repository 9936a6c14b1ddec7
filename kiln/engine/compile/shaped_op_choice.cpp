// Which op runs a node of a shape-generic plan that oneDNN has no run-time-shape form of
// (Conv, ConvTranspose, pools, Resize, Concat, 4-D Add and Mul): a ShapedOp, kiln's loops made
// for each shape (shaped_op.h).
#include <kiln/engine/compile/plan_builder.h>

#include <algorithm>

namespace kiln::engine::compile {

using runtime::Result;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;

namespace {

std::vector<int64_t> ints_attribute(const ir::Node& node, const char* name) {
  const ir::Attribute* a = node.attribute(name);
  const auto* v = a ? std::get_if<std::vector<int64_t>>(&a->value) : nullptr;
  return v ? *v : std::vector<int64_t>{};
}

// A 2-D 3x3 Conv of stride 1, no dilation or groups, and channels in multiples of 16 (from its
// constant weight: a shape-generic plan knows no input size): kiln's Winograd loops take it.
bool generic_winograd(const ir::Node& node, const std::vector<int64_t>& w) {
  auto ones = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t i) { return i == 1; });
  };
  const ir::Attribute* group = node.attribute("group");
  const auto* g = group ? std::get_if<int64_t>(&group->value) : nullptr;
  return node.op == "Conv" && w.size() == 4 && w[2] == 3 && w[3] == 3 && w[0] % 16 == 0 &&
         w[1] % 16 == 0 && (g == nullptr || *g == 1) && ones(ints_attribute(node, "strides")) &&
         ones(ints_attribute(node, "dilations"));
}

}  // namespace

bool PlanBuilder::shaped_op_takes(const ir::Node& node) {
  if (!cpu::own_vector_loops() || !node.domain.empty() || node.inputs.empty() ||
      node.inputs[0] < 0 || slot(node.inputs[0]).dtype != ScalarType::Float32 ||
      node.outputs.empty() || node.outputs[0] < 0) {
    return false;
  }
  if (node.op == "Conv" || node.op == "ConvTranspose") {
    // 2-D, of a constant f32 weight.
    return node.inputs.size() >= 2 && node.inputs[1] >= 0 &&
           slot(node.inputs[1]).kind == Slot::Kind::Constant &&
           slot(node.inputs[1]).dtype == ScalarType::Float32 && slot(node.inputs[1]).sizes &&
           slot(node.inputs[1]).sizes->size() == 4 &&
           std::all_of(node.inputs.begin() + 2, node.inputs.end(),
                       [&](int v) { return v < 0 || slot(v).kind == Slot::Kind::Constant; });
  }
  if (node.op == "MaxPool" || node.op == "AveragePool") return node.outputs.size() == 1;
  if (node.op == "Resize") {
    // Its scales or sizes constant: the output's shape follows from the input's.
    return std::all_of(node.inputs.begin() + 1, node.inputs.end(),
                       [&](int v) { return v < 0 || slot(v).kind == Slot::Kind::Constant; });
  }
  // An Add, Mul or Concat reading a Conv's, pool's, Resize's or Concat's result (a feature
  // pyramid's sums and concatenation): kiln's loops take same-shape nChw16c values as they
  // are, where the run-time element-wise loops and reference Concat read plain ones.
  // (Elsewhere, an attention's scores and mask or a decoder's past keys say, those broadcast or
  // copy at each call without an op made per shape.)
  auto from_image_op = [&](int v) {
    const int p = v >= 0 ? producer_[static_cast<size_t>(v)] : -1;
    if (p < 0) return false;
    const std::string& op = graph_.nodes[static_cast<size_t>(p)].op;
    return op == "Conv" || op == "ConvTranspose" || op == "MaxPool" || op == "AveragePool" ||
           op == "Resize" || op == "Concat" || op == "Relu" || op == "Clip" || op == "Sigmoid";
  };
  if (!std::any_of(node.inputs.begin(), node.inputs.end(), from_image_op)) return false;
  if (node.op == "Add" || node.op == "Mul") {
    // Of two computed 4-D values.
    auto computed_4d = [&](int v) {
      if (v < 0 || slot(v).kind == Slot::Kind::Constant || slot(v).dtype != ScalarType::Float32) {
        return false;
      }
      const ir::TensorType& type = graph_.values[static_cast<size_t>(v)].type;
      return type.rank_known && type.shape.size() == 4;
    };
    return node.inputs.size() == 2 && node.outputs.size() == 1 && computed_4d(node.inputs[0]) &&
           computed_4d(node.inputs[1]);
  }
  return node.op == "Concat";
}

// A Conv (with the bias and activations after it), ConvTranspose, pool, Resize or Concat of a
// shape-generic plan, on ops made for each input shape (`ShapedOp`).
Result<std::unique_ptr<ShapedOp>> PlanBuilder::try_shaped_op(size_t n, Step& step,
                                                             std::string& why) {
  const ir::Node& node = graph_.nodes[n];
  const bool conv = node.op == "Conv" || node.op == "ConvTranspose";
  std::optional<FusionGroup> group;
  if (conv && options_.fuse) {
    FusionContext context{graph_, impl_->slots, num_uses_, consumer_, producer_, absorbed_};
    group = find_generic_conv_fusion(context, n);
  }
  cpu::OpDesc desc = op_desc(node);
  desc.avoid_generated_code = true;  // kiln's loops: no code generated for a new shape
  std::vector<int> inputs = node.inputs;
  std::vector<int> desc_input_of(node.inputs.size());
  for (size_t j = 0; j < desc_input_of.size(); ++j) desc_input_of[j] = static_cast<int>(j);
  std::vector<const Tensor*> constants(inputs.size(), nullptr);
  std::vector<int64_t> bias_sizes;
  if (group && group->bias) {
    inputs.resize(2);
    inputs.push_back(*group->bias);
    constants.assign(inputs.size(), nullptr);
    const Tensor& bias = slot(*group->bias).tensor();
    step.views.push_back(
        std::make_unique<Tensor>(bias.dtype(), group->bias_sizes, const_cast<void*>(bias.data())));
    constants.back() = step.views.back().get();
    bias_sizes = group->bias_sizes;
  }
  if (group && group->residual) {
    inputs.push_back(*group->residual);  // the last input, sized at each call
    constants.push_back(nullptr);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int v = inputs[i];
    desc.inputs_present.push_back(v >= 0);
    if (constants[i] == nullptr && v >= 0 && slot(v).kind == Slot::Kind::Constant) {
      constants[i] = &slot(v).tensor();
    }
    std::vector<int64_t> sizes;
    if (!bias_sizes.empty() && i == 2) {
      sizes = bias_sizes;
    } else if (constants[i] != nullptr) {
      sizes.assign(constants[i]->sizes().begin(), constants[i]->sizes().end());
    }
    desc.inputs.push_back(
        cpu::TensorDesc{v >= 0 ? slot(v).dtype : ScalarType::Float32, std::move(sizes)});
    const int weight = v >= 0 && (bias_sizes.empty() || i != 2)
                           ? graph_.values[static_cast<size_t>(v)].weight
                           : -1;
    desc.constant_hashes.push_back(constants[i] != nullptr && weight >= 0
                                       ? model_.weights[static_cast<size_t>(weight)].content_hash
                                       : 0);
  }
  desc.constants = constants;
  if (group) desc.post_ops = group->post_ops;
  std::vector<int64_t> probe;
  if (conv) {
    const std::vector<int64_t>& w = *slot(node.inputs[1]).sizes;
    int64_t groups = 1;
    if (const ir::Attribute* a = node.attribute("group")) {
      if (const auto* g = std::get_if<int64_t>(&a->value)) groups = *g;
    }
    desc.activation_layout = cpu::ActivationLayout::Blocked;
    desc.winograd = generic_winograd(node, w) && !has_large_weights(node, impl_->slots);
    desc.winograd_one_tile = true;  // one packing for every image size
    // An image of 32 x 32 (more when the kernel's extent needs it), to pack the weights now.
    int64_t extent = 32;
    std::vector<int64_t> dilations = ints_attribute(node, "dilations");
    for (size_t d = 0; d < 2; ++d) {
      const int64_t dilation = d < dilations.size() ? dilations[d] : 1;
      extent = std::max(extent, (w[2 + d] - 1) * dilation + 1);
    }
    probe = {1, node.op == "Conv" ? w[1] * groups : w[0], extent, extent};
  }
  // The weights are checked now (the ops made at run time pack them without checking again),
  // with the fallback's (below).
  const std::vector<int> outputs = group ? std::vector<int>{group->output} : read_outputs(node);
  desc.num_outputs = static_cast<int>(outputs.size());
  auto op = std::make_unique<ShapedOp>(std::move(desc), node, std::move(desc_input_of), false);
  if (!probe.empty()) {
    Status made = op->probe(probe);
    if (!made.ok()) {
      why = "shape known only at run time; no op for it: " + made.message();
      return made;
    }
  }
  // The reference kernels of the node and of what is fused after it, for the calls no op
  // takes: the values between them (fused away otherwise) get run-time storage.
  std::vector<std::unique_ptr<Step>> fallback;
  std::vector<size_t> chain = {n};
  if (group) chain.insert(chain.end(), group->absorbed.begin(), group->absorbed.end());
  for (size_t c : chain) {
    const ir::Node& member = graph_.nodes[c];
    KILN_RETURN_IF_ERROR(verify_inputs(member));
    std::vector<int> member_outputs = outputs_of(member);
    for (int v : member_outputs) {
      if (v != outputs[0] && slot(v).kind != Slot::Kind::Dynamic) make_dynamic(slot(v));
    }
    KILN_ASSIGN_OR_RETURN(Step reference,
                          make_reference_step(*impl_, member, weights_, member_outputs));
    fallback.push_back(std::make_unique<Step>(std::move(reference)));
  }
  op->set_fallback(std::move(fallback));
  note_threads(options_.num_threads);
  step.inputs = inputs;
  step.outputs = outputs;
  step.placement = PlacementEntry{node.name, node.op, "cpu:" + op->provider(), {}, op->describe()};
  if (group) {
    for (size_t a : group->absorbed) {
      absorbed_[a] = true;
      step.placement.fused.push_back(describe_node(graph_.nodes[a]));
    }
  }
  return op;
}

}  // namespace kiln::engine::compile
