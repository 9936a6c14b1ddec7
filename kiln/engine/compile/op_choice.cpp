// Which op runs a node of a plan: oneDNN's (or kiln's loops behind cpu::CpuOp) for known
// shapes, kiln's run-time-shape loops in a shape-generic plan (plan_builder.h).
#include <kiln/engine/compile/plan_builder.h>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;

cpu::OpDesc PlanBuilder::op_desc(const ir::Node& node) const {
  cpu::OpDesc desc;
  desc.op = node.op;
  desc.attributes = node.attributes;
  desc.num_threads = options_.num_threads;
  desc.packed = options_.packed.get();
  desc.small_ops_own_loops = options_.small_ops_own_loops;
  desc.proofs_recorded = options_.proofs_recorded;
  desc.avoid_generated_code = avoid_generated_code_;
  return desc;
}

Result<std::unique_ptr<cpu::CpuOp>> PlanBuilder::try_cpu_op(const ir::Node& node,
                                                            const FusionGroup* group, Step& step,
                                                            std::string& why) {
  cpu::OpDesc desc = op_desc(node);
  if (node.op == "Conv" && blocked_convs_ && !has_large_weights(node, impl_->slots)) {
    // (A Conv of large weights stays in the layout oneDNN prefers: see has_large_weights.)
    desc.activation_layout = cpu::ActivationLayout::Blocked;
    desc.winograd =
        winograd_convs_ && winograd_fit(node, impl_->slots, own_winograd_) == WinogradFit::Yes;
  }
  std::vector<int> inputs = node.inputs;
  std::vector<const Tensor*> constants(inputs.size(), nullptr);
  if (group != nullptr && group->bias) {
    inputs.resize(std::max<size_t>(inputs.size(), 2), -1);
    if (inputs.size() > 2) inputs.resize(2);
    inputs.push_back(*group->bias);
    constants.assign(inputs.size(), nullptr);
    const Tensor& bias = slot(*group->bias).tensor();
    step.views.push_back(
        std::make_unique<Tensor>(bias.dtype(), group->bias_sizes, const_cast<void*>(bias.data())));
    constants.back() = step.views.back().get();
  }
  if (group != nullptr && group->residual) {
    inputs.push_back(*group->residual);
    constants.push_back(nullptr);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    int v = inputs[i];
    desc.inputs_present.push_back(v >= 0);
    bool is_bias = group != nullptr && group->bias && i == 2;
    desc.inputs.push_back(cpu::TensorDesc{v >= 0 ? slot(v).dtype : ScalarType::Float32,
                                          is_bias  ? group->bias_sizes
                                          : v >= 0 ? *slot(v).sizes
                                                   : std::vector<int64_t>{}});
    if (constants[i] == nullptr && v >= 0 && slot(v).kind == Slot::Kind::Constant) {
      constants[i] = &slot(v).tensor();
    }
    // The layout the value's producer computes it in, so the op can offer to read it so.
    desc.input_layouts.push_back(options_.propagate_layouts && v >= 0 && constants[i] == nullptr
                                     ? producer_layout(*impl_, v)
                                     : std::string());
    // A model weight's content hash (verified when the package was read) names it for the
    // packed-constant store, which then need not hash the bytes again.
    int weight = v >= 0 ? graph_.values[static_cast<size_t>(v)].weight : -1;
    desc.constant_hashes.push_back(constants[i] != nullptr && !is_bias && weight >= 0
                                       ? model_.weights[static_cast<size_t>(weight)].content_hash
                                       : 0);
  }
  if (transposed_b_ >= 0 && node.op == "MatMul" && inputs.size() >= 2) {
    // B is the deferred Transpose's input, read transposed: the op sees B's sizes.
    inputs[1] = transposed_b_;
    desc.b_transposed = true;
    desc.input_layouts[1].clear();
  }
  desc.constants = constants;
  if (group != nullptr) desc.post_ops = group->post_ops;
  std::vector<int> outputs =
      group != nullptr ? std::vector<int>{group->output} : read_outputs(node);
  desc.num_outputs = static_cast<int>(outputs.size());
  for (int v : outputs) {
    if (v < 0 || !slot(v).sizes) {
      desc.output_sizes.clear();  // unknown: not checked
      break;
    }
    desc.output_sizes.push_back(*slot(v).sizes);
  }
  if (options_.verify_weight) {
    desc.verify_constant = [this, inputs](size_t input) -> Status {
      int v = input < inputs.size() ? inputs[input] : -1;
      bool value = v >= 0 && static_cast<size_t>(v) < graph_.values.size();
      int w = value ? graph_.values[static_cast<size_t>(v)].weight : -1;
      return w >= 0 ? options_.verify_weight(static_cast<size_t>(w)) : Status();
    };
  }
  auto op = cpu::CpuOp::create(desc);
  if (!op.ok()) {
    why = "no oneDNN implementation: " + op.status().message();
    return op.status();
  }
  const auto& made = (*op)->outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] < 0 || i >= made.size() || made[i].dtype != slot(outputs[i]).dtype ||
        made[i].sizes != *slot(outputs[i]).sizes) {
      why = "the oneDNN op's output " + std::to_string(i) + " differs from the model's type";
      return Status(Error::NotSupported, why);
    }
  }
  note_threads((*op)->run_threads());
  read_transposed_ = read_transposed_ || desc.b_transposed;
  step.inputs = inputs;
  step.outputs = outputs;
  return op;
}

// A MatMul of a shape-generic plan by a constant 2-D B, with the bias Add and activations
// that follow it fused (`find_generic_fusion`), on a cpu::RuntimeMatMul.
Result<std::unique_ptr<cpu::RuntimeMatMul>> PlanBuilder::try_runtime_matmul(size_t n, Step& step,
                                                                            std::string& why) {
  const ir::Node& node = graph_.nodes[n];
  if (node.inputs.size() != 2 || node.inputs[0] < 0 || node.inputs[1] < 0 ||
      node.outputs.size() != 1 || node.outputs[0] < 0 ||
      slot(node.inputs[0]).dtype != ScalarType::Float32 ||
      slot(node.inputs[1]).dtype != ScalarType::Float32) {
    why = "shape known only at run time (a run-time-shape MatMul takes two f32 inputs)";
    return Status(Error::NotSupported, why);
  }
  cpu::OpDesc desc;
  desc.op = node.op;
  desc.num_threads = options_.num_threads;
  desc.packed = options_.packed.get();
  if (slot(node.inputs[1]).kind != Slot::Kind::Constant) {
    // Both computed (attention's products): a primitive per rank, made at run time.
    desc.inputs = {cpu::TensorDesc{ScalarType::Float32, {}},
                   cpu::TensorDesc{ScalarType::Float32, {}}};
    std::vector<int> inputs = node.inputs;
    if (transposed_b_ >= 0) {
      // B is the deferred Transpose's input, read transposed (its declared rank: the perm's).
      desc.b_transposed = true;
      desc.inputs[1].sizes.assign(
          graph_.values[static_cast<size_t>(transposed_b_)].type.shape.size(), 0);
      inputs[1] = transposed_b_;
    }
    std::optional<FusionGroup> scale;
    if (options_.fuse) {
      FusionContext context{graph_, impl_->slots, num_uses_, consumer_, producer_, absorbed_};
      scale = find_generic_scale(context, n);
      if (scale) desc.post_ops = scale->post_ops;
    }
    auto op = cpu::RuntimeMatMul::create(desc);
    if (!op.ok()) {
      why =
          "shape known only at run time; no run-time-shape oneDNN MatMul: " + op.status().message();
      return op.status();
    }
    note_threads(desc.num_threads);
    read_transposed_ = read_transposed_ || desc.b_transposed;
    step.inputs = inputs;
    step.outputs = {scale ? scale->output : node.outputs[0]};
    step.placement =
        PlacementEntry{node.name, node.op, "cpu:" + (*op)->provider(), {}, (*op)->describe()};
    if (scale) {
      for (size_t a : scale->absorbed) {
        absorbed_[a] = true;
        step.placement.fused.push_back(describe_node(graph_.nodes[a]));
      }
    }
    return op;
  }
  std::optional<FusionGroup> group;
  if (options_.fuse) {
    FusionContext context{graph_, impl_->slots, num_uses_, consumer_, producer_, absorbed_};
    group = find_generic_fusion(context, n);
  }
  std::vector<int> inputs = node.inputs;
  const Tensor& b = slot(node.inputs[1]).tensor();
  desc.inputs = {cpu::TensorDesc{ScalarType::Float32, {}},
                 cpu::TensorDesc{b.dtype(), {b.sizes().begin(), b.sizes().end()}}};
  desc.constants = {nullptr, &b};
  int weight = graph_.values[static_cast<size_t>(node.inputs[1])].weight;
  desc.constant_hashes = {
      0, weight >= 0 ? model_.weights[static_cast<size_t>(weight)].content_hash : 0};
  if (group && group->bias) {
    const Tensor& bias = slot(*group->bias).tensor();
    step.views.push_back(
        std::make_unique<Tensor>(bias.dtype(), group->bias_sizes, const_cast<void*>(bias.data())));
    desc.inputs.push_back(cpu::TensorDesc{bias.dtype(), group->bias_sizes});
    desc.constants.push_back(step.views.back().get());
    desc.constant_hashes.push_back(0);
    inputs.push_back(*group->bias);
  }
  if (group) desc.post_ops = group->post_ops;
  if (options_.verify_weight) {
    desc.verify_constant = [this, inputs](size_t input) -> Status {
      int v = input < inputs.size() ? inputs[input] : -1;
      int w = v >= 0 ? graph_.values[static_cast<size_t>(v)].weight : -1;
      return w >= 0 ? options_.verify_weight(static_cast<size_t>(w)) : Status();
    };
  }
  auto op = cpu::RuntimeMatMul::create(desc);
  if (!op.ok()) {
    why = "shape known only at run time; no run-time-shape oneDNN MatMul: " + op.status().message();
    return op.status();
  }
  note_threads(desc.num_threads);
  KILN_RETURN_IF_ERROR((*op)->warm_up().with_context("specialize node '" + node.name + "'"));
  step.inputs = inputs;
  step.outputs = {group ? group->output : node.outputs[0]};
  step.placement =
      PlacementEntry{node.name, node.op, "cpu:" + (*op)->provider(), {}, (*op)->describe()};
  if (group) {
    for (size_t a : group->absorbed) {
      absorbed_[a] = true;
      step.placement.fused.push_back(describe_node(graph_.nodes[a]));
    }
  }
  return op;
}

// A Softmax, LogSoftmax or LayerNormalization of a shape-generic plan, on cpu::RuntimeRows
// (kiln's own row loops). LayerNormalization's Scale and B constants are checked against
// their content hashes now and read at each run.
Result<std::unique_ptr<cpu::RuntimeRows>> PlanBuilder::try_runtime_rows(size_t n, Step& step,
                                                                        std::string& why) {
  const ir::Node& node = graph_.nodes[n];
  if (node.inputs.empty() || node.inputs[0] < 0 || node.outputs.empty() || node.outputs[0] < 0) {
    why = "shape known only at run time (run-time-shape rows take input 0 and output 0)";
    return Status(Error::NotSupported, why);
  }
  cpu::OpDesc desc;
  desc.op = node.op;
  desc.attributes = node.attributes;
  desc.num_threads = options_.num_threads;
  desc.num_outputs = static_cast<int>(read_outputs(node).size());
  // The input's rank when the model knows it (sizes of 1: only the rank counts), else none.
  const ir::TensorType& x_type = graph_.values[static_cast<size_t>(node.inputs[0])].type;
  desc.inputs.push_back(
      cpu::TensorDesc{slot(node.inputs[0]).dtype,
                      std::vector<int64_t>(x_type.rank_known ? x_type.shape.size() : 0, 1)});
  desc.constants.push_back(nullptr);
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    const int v = node.inputs[i];
    const bool constant = v >= 0 && slot(v).kind == Slot::Kind::Constant;
    std::vector<int64_t> sizes;
    if (constant) sizes.assign(slot(v).tensor().sizes().begin(), slot(v).tensor().sizes().end());
    desc.inputs.push_back(cpu::TensorDesc{v >= 0 ? slot(v).dtype : ScalarType::Float32, sizes});
    desc.inputs_present.resize(i, true);
    desc.inputs_present.push_back(v >= 0);
    desc.constants.push_back(constant ? &slot(v).tensor() : nullptr);
  }
  auto op = cpu::RuntimeRows::create(desc);
  if (!op.ok()) {
    why = "shape known only at run time; no run-time-shape rows: " + op.status().message();
    return op.status();
  }
  note_threads(desc.num_threads);
  // The constants are read at each run, never packed: check their bytes once, here.
  KILN_RETURN_IF_ERROR(verify_inputs(node));
  step.inputs = node.inputs;
  step.outputs = {node.outputs[0]};
  step.placement = PlacementEntry{node.name, node.op, "cpu:kiln", {}, (*op)->describe()};
  return op;
}

// An Add, Sub, Mul, Div, Where or Transpose of a shape-generic plan, on cpu::RuntimeElementwise
// (kiln's own loops, broadcast or planned at each run).
Result<std::unique_ptr<cpu::RuntimeElementwise>> PlanBuilder::try_runtime_elementwise(
    size_t n, Step& step, std::string& why) {
  const ir::Node& node = graph_.nodes[n];
  cpu::OpDesc desc;
  desc.op = node.op;
  desc.attributes = node.attributes;  // Transpose's perm
  desc.num_threads = options_.num_threads;
  desc.num_outputs = static_cast<int>(node.outputs.size());
  for (int v : node.inputs) {
    desc.inputs.push_back(cpu::TensorDesc{v >= 0 ? slot(v).dtype : ScalarType::Float32, {}});
    desc.inputs_present.push_back(v >= 0);
  }
  if (node.outputs.size() != 1 || node.outputs[0] < 0 ||
      slot(node.outputs[0]).dtype != ScalarType::Float32) {
    why = "shape known only at run time (run-time-shape element-wise ops write one f32 output)";
    return Status(Error::NotSupported, why);
  }
  auto op = cpu::RuntimeElementwise::create(desc);
  if (!op.ok()) {
    why = "shape known only at run time; no run-time-shape loops: " + op.status().message();
    return op.status();
  }
  if (node.op == "Transpose") note_threads(desc.num_threads);  // over a megabyte, split
  // Constant inputs (a mask, a scale) are read at each run, never packed: check them once, here.
  KILN_RETURN_IF_ERROR(verify_inputs(node));
  step.inputs = node.inputs;
  step.outputs = {node.outputs[0]};
  step.placement = PlacementEntry{node.name, node.op, "cpu:kiln", {}, (*op)->describe()};
  return op;
}

}  // namespace kiln::engine::compile
