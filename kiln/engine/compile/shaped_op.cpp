// ShapedOp: a shape-generic plan's Conv, ConvTranspose, pool, Resize, Concat or 4-D Add or Mul
// on ops made for each input shape it meets (shaped_op.h).
#include <kiln/engine/compile/function_plan.h>
#include <kiln/engine/compile/shape_resolution.h>
#include <kiln/engine/compile/shaped_op.h>

#include <algorithm>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr cpu::HandOver kHandOvers[] = {cpu::HandOver::Blocked16, cpu::HandOver::Nhwc};

}  // namespace

struct ShapedOp::Made {
  std::vector<std::vector<int64_t>> in_sizes;      ///< Per desc input (constants: empty).
  std::vector<std::optional<cpu::HandOver>> held;  ///< Per desc input: its native layout.
  std::unique_ptr<cpu::CpuOp> op;                  ///< Null: the fallback runs these shapes.
  std::vector<bool> convert;  ///< Per desc input: held natively, read as plain.
  std::vector<std::vector<int64_t>> out_sizes;
  std::optional<cpu::HandOver> out_held;  ///< Output 0's native layout, if left so.
  uint64_t out_bytes = 0;                 ///< Output 0's bytes then.
  void* scratch_at = nullptr;
};

ShapedOp::ShapedOp(cpu::OpDesc desc, const ir::Node& node, std::vector<int> desc_input_of,
                   bool native_output)
    : desc_(std::move(desc)),
      node_(node),
      desc_input_of_(std::move(desc_input_of)),
      native_output_(native_output),
      plain_(desc_.inputs.size()) {
  desc_.input_layouts.assign(desc_.inputs.size(), std::string());
}

ShapedOp::~ShapedOp() = default;

void ShapedOp::set_fallback(std::vector<std::unique_ptr<Step>> fallback) {
  fallback_ = std::move(fallback);
}

Status ShapedOp::probe(const std::vector<int64_t>& probe) {
  cpu::OpDesc desc = desc_;
  desc.inputs[0].sizes = probe;
  // As an op after another ShapedOp step sees it: nChw16c (what kiln's ConvTranspose loops read).
  if (auto layout = cpu::hand_over_layout(cpu::HandOver::Blocked16, probe)) {
    desc.input_layouts[0] = layout->id;
  }
  // A residual (the other computed input) of the output's sizes.
  std::vector<std::optional<std::vector<int64_t>>> node_sizes(node_.inputs.size());
  for (size_t j = 0; j < node_.inputs.size(); ++j) {
    const int d = j < desc_input_of_.size() ? desc_input_of_[j] : -1;
    if (node_.inputs[j] < 0 || d < 0) continue;
    node_sizes[j] = d == 0 ? probe : desc.inputs[static_cast<size_t>(d)].sizes;
  }
  auto out = rule_shapes(node_, node_sizes);
  if (!out || out->empty()) {
    return Status(Error::NotSupported,
                  "no shape rule for a probe of " + runtime::shape_to_string(probe));
  }
  for (size_t i = 1; i < desc.inputs.size(); ++i) {
    if (desc.constants[i] == nullptr && desc.inputs_present[i]) desc.inputs[i].sizes = (*out)[0];
  }
  // The rule's output shape: an op that computes another (a rule and a kernel that disagree)
  // is refused now, and the node runs on its reference kernel.
  desc.output_sizes = {(*out)[0]};
  desc.num_outputs = 1;
  auto op = cpu::CpuOp::create(desc);
  if (!op.ok()) return op.status();
  probe_describe_ = (*op)->describe();
  probe_provider_ = (*op)->provider();
  return Status();
}

std::string ShapedOp::describe() const {
  std::string text = "ops made for each input shape (" + node_.op + ")";
  return probe_describe_.empty() ? text : text + ", e.g. " + probe_describe_;
}

std::string ShapedOp::provider() const { return probe_provider_; }

// Settles the layouts of an op made for these shapes: inputs held natively that it reads so,
// the output left in a hand-over layout when every reader is a ShapedOp step.
Status ShapedOp::settle_layouts(Made& made) {
  cpu::CpuOp& op = *made.op;
  for (size_t i = 0; i < made.held.size(); ++i) {
    if (!made.held[i]) continue;
    auto want = op.native_input_layout(i);
    auto have = cpu::hand_over_layout(*made.held[i], made.in_sizes[i]);
    if (want && have && want->id == have->id) {
      KILN_RETURN_IF_ERROR(op.use_native_input(i));
      made.convert[i] = false;
    }
  }
  if (native_output_) {
    if (auto want = op.native_output_layout(0)) {
      for (cpu::HandOver layout : kHandOvers) {
        auto have = cpu::hand_over_layout(layout, made.out_sizes[0]);
        if (!have || have->id != want->id) continue;
        KILN_RETURN_IF_ERROR(op.use_native_output(0));
        made.out_held = layout;
        made.out_bytes = have->bytes;
        break;
      }
    }
  }
  return op.finish();
}

Result<ShapedOp::Made*> ShapedOp::made_for(CompiledFunctionImpl& impl, Step& step) {
  const size_t count = desc_.inputs.size();
  sizes_.resize(count);
  held_.assign(count, std::nullopt);
  for (size_t i = 0; i < count; ++i) {
    sizes_[i].clear();
    if (desc_.constants[i] != nullptr || i >= step.inputs.size() || step.inputs[i] < 0) continue;
    const Slot& s = *impl.slots[static_cast<size_t>(step.inputs[i])];
    auto at = s.value.to_tensor().sizes();
    sizes_[i].assign(at.begin(), at.end());
    held_[i] = s.held;
  }
  for (size_t k = 0; k < made_.size(); ++k) {
    if (made_[k]->in_sizes != sizes_ || made_[k]->held != held_) continue;
    if (k > 0) {
      std::rotate(made_.begin(), made_.begin() + static_cast<ptrdiff_t>(k),
                  made_.begin() + static_cast<ptrdiff_t>(k) + 1);
    }
    return made_.front().get();
  }

  // The output shapes by the node's rule, from its inputs' sizes (the constants' own).
  std::vector<std::optional<std::vector<int64_t>>> node_sizes(node_.inputs.size());
  for (size_t j = 0; j < node_.inputs.size(); ++j) {
    const int v = node_.inputs[j];
    if (v < 0) continue;
    const int d = j < desc_input_of_.size() ? desc_input_of_[j] : -1;
    if (d >= 0 && !sizes_[static_cast<size_t>(d)].empty()) {
      node_sizes[j] = sizes_[static_cast<size_t>(d)];
    } else {
      auto at = impl.slots[static_cast<size_t>(v)]->value.to_tensor().sizes();
      node_sizes[j] = std::vector<int64_t>(at.begin(), at.end());
    }
  }
  auto constant = [&](size_t j) -> const Tensor* {
    const int v = j < node_.inputs.size() ? node_.inputs[j] : -1;
    if (v < 0) return nullptr;
    Slot& s = *impl.slots[static_cast<size_t>(v)];
    return s.kind == Slot::Kind::Constant ? &s.tensor() : nullptr;
  };
  auto made = std::make_unique<Made>();
  made->in_sizes = sizes_;
  made->held = held_;
  made->convert.resize(count);
  for (size_t i = 0; i < count; ++i) made->convert[i] = held_[i].has_value();
  auto out = rule_shapes(node_, node_sizes, constant);
  Status status;
  if (!out || out->size() < step.outputs.size()) {
    // The sizes do not fit the node (the rules check what they compute from); the reference
    // kernel, when the step has one, says exactly why.
    std::string shapes;
    for (const auto& sizes : node_sizes) {
      shapes += (shapes.empty() ? "" : ", ") +
                (sizes ? runtime::shape_to_string(*sizes) : std::string("(absent)"));
    }
    status = Status(Error::InvalidArgument,
                    "inputs of shapes " + shapes +
                        ": no output shape follows from them (expected shapes that fit the " +
                        node_.op + "'s weights and attributes)");
  } else {
    made->out_sizes.assign(out->begin(),
                           out->begin() + static_cast<ptrdiff_t>(step.outputs.size()));
    cpu::OpDesc desc = desc_;
    for (size_t i = 0; i < count; ++i) {
      if (sizes_[i].empty()) continue;
      desc.inputs[i].sizes = sizes_[i];
      // The layout the input is held in, so that an op may offer to read it so.
      auto layout = held_[i] ? cpu::hand_over_layout(*held_[i], sizes_[i]) : std::nullopt;
      if (layout) desc.input_layouts[i] = layout->id;
    }
    desc.output_sizes = made->out_sizes;
    desc.num_outputs = static_cast<int>(step.outputs.size());
    auto op = cpu::CpuOp::create(desc);
    if (op.ok()) {
      made->op = std::move(*op);
      ++ops_made_;
    } else {
      status = op.status();
    }
  }
  if (made->op != nullptr) {
    KILN_RETURN_IF_ERROR(settle_layouts(*made));
  } else if (fallback_.empty()) {
    return status;
  }
  if (made_.size() >= kShapesKept) made_.pop_back();
  made_.insert(made_.begin(), std::move(made));
  return made_.front().get();
}

Status ShapedOp::run(CompiledFunctionImpl& impl, Step& step) {
  KILN_ASSIGN_OR_RETURN(Made * made, made_for(impl, step));
  const size_t count = desc_.inputs.size();
  // Inputs held natively that this shape's op reads plain: converted into plain_.
  views_.clear();
  views_.reserve(count);
  inputs_.assign(count, nullptr);
  for (size_t i = 0; i < count; ++i) {
    if (desc_.constants[i] != nullptr) {
      inputs_[i] = desc_.constants[i];
      continue;
    }
    if (i >= step.inputs.size() || step.inputs[i] < 0) continue;
    Tensor& t = impl.slots[static_cast<size_t>(step.inputs[i])]->tensor();
    inputs_[i] = &t;
    if (!made->convert[i]) continue;
    plain_[i].resize(static_cast<size_t>(t.numel()));
    cpu::hand_over_to_plain(*made->held[i], static_cast<const float*>(t.data()), plain_[i].data(),
                            made->in_sizes[i]);
    views_.emplace_back(t.dtype(), made->in_sizes[i], plain_[i].data());
    inputs_[i] = &views_.back();
  }
  if (made->op == nullptr) return run_fallback(impl, step, *made);

  outputs_.clear();
  for (size_t k = 0; k < step.outputs.size(); ++k) {
    Slot& s = *impl.slots[static_cast<size_t>(step.outputs[k])];
    s.held = k == 0 ? made->out_held : std::nullopt;
    KILN_RETURN_IF_ERROR(impl.resize(s.value, made->out_sizes[k], s.held ? made->out_bytes : 0));
    outputs_.push_back(&s.tensor());
  }
  cpu::CpuOp& op = *made->op;
  if (const uint64_t bytes = op.scratchpad_bytes(); bytes > 0) {
    KILN_ASSIGN_OR_RETURN(void* scratch, impl.shaped_scratch(bytes));
    if (made->scratch_at != scratch) {
      op.use_scratchpad(scratch);
      made->scratch_at = scratch;
    }
  }
  return op.run(Span<const Tensor*>(inputs_.data(), inputs_.size()),
                Span<Tensor*>(outputs_.data(), outputs_.size()));
}

Status ShapedOp::run_fallback(CompiledFunctionImpl& impl, Step& step, Made& made) {
  // The reference kernels read plain tensors: natively held inputs through their plain copies
  // (made by `run`), wherever a step of the chain reads them.
  std::vector<EValue> plain;
  plain.reserve(made.convert.size());
  std::vector<std::pair<const EValue*, EValue*>> swaps;
  for (size_t i = 0; i < made.convert.size() && i < step.inputs.size(); ++i) {
    if (!made.convert[i] || step.inputs[i] < 0) continue;
    plain.emplace_back(Tensor(desc_.inputs[i].dtype, made.in_sizes[i], plain_[i].data()));
    swaps.emplace_back(&impl.slots[static_cast<size_t>(step.inputs[i])]->value, &plain.back());
  }
  for (const auto& reference : fallback_) {
    std::vector<EValue*> saved = reference->ref_inputs;
    for (EValue*& input : reference->ref_inputs) {
      for (const auto& [from, to] : swaps) {
        if (input == from) input = to;
      }
    }
    for (int v : reference->outputs) impl.slots[static_cast<size_t>(v)]->held.reset();
    // (The step's own error names the anchor; a node fused after it is named here.)
    Status status = reference->kernel(*reference->context, reference->ref_inputs,
                                      reference->ref_outputs, reference->attributes);
    if (!status.ok() && reference != fallback_.front()) {
      status = status.with_context("run node '" + reference->placement.node + "' (" +
                                   reference->placement.op + "), fused into it");
    }
    reference->ref_inputs = std::move(saved);
    KILN_RETURN_IF_ERROR(status);
  }
  return Status();
}

}  // namespace kiln::engine::compile
