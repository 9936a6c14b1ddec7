// Constant folding and the shapes a model left symbolic (plan_builder.h).
#include <kiln/engine/compile/plan_builder.h>
#include <kiln/engine/compile/shape_resolution.h>

#include <algorithm>
#include <cstring>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;

namespace {

bool is_random(const std::string& op) {
  return op.rfind("Random", 0) == 0 || op == "Multinomial" || op == "Bernoulli";
}

}  // namespace

Result<bool> PlanBuilder::fold_shape_of(const ir::Node& node) {
  if ((node.op != "Shape" && node.op != "Size") || node.inputs.empty() || node.inputs[0] < 0 ||
      !slot(node.inputs[0]).sizes || node.outputs.size() != 1 || node.outputs[0] < 0) {
    return false;
  }
  const std::vector<int64_t>& sizes = *slot(node.inputs[0]).sizes;
  std::vector<int64_t> out;
  if (node.op == "Size") {
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    out = {numel};
  } else {
    auto rank = static_cast<int64_t>(sizes.size());
    int64_t start = 0, end = rank;
    if (const auto* a = node.attribute("start")) start = std::get<int64_t>(a->value);
    if (const auto* a = node.attribute("end")) end = std::get<int64_t>(a->value);
    start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
    end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
    for (int64_t i = start; i < end; ++i) out.push_back(sizes[static_cast<size_t>(i)]);
  }
  Slot& s = slot(node.outputs[0]);
  s.kind = Slot::Kind::Constant;
  s.dtype = ScalarType::Int64;
  s.sizes = node.op == "Shape" ? std::vector<int64_t>{static_cast<int64_t>(out.size())}
                               : std::vector<int64_t>{};
  s.storage.resize(std::max<size_t>(out.size() * sizeof(int64_t), 1));
  if (!out.empty()) std::memcpy(s.storage.data(), out.data(), out.size() * sizeof(int64_t));
  s.value = runtime::EValue(Tensor(s.dtype, *s.sizes, s.storage.data()));
  return true;
}

Result<bool> PlanBuilder::fold(const ir::Node& node) {
  if (!node.regions.empty()) return false;
  KILN_ASSIGN_OR_RETURN(bool shape_folded, fold_shape_of(node));
  if (shape_folded) return true;
  if (node.inputs.empty() || is_random(node.op) || !node.domain.empty() ||
      runtime::get_kernel(node.op) == nullptr) {
    return false;
  }
  for (int input : node.inputs) {
    if (input >= 0 && slot(input).kind != Slot::Kind::Constant) return false;
  }
  for (int output : node.outputs) {
    if (output < 0) return false;
  }
  KILN_RETURN_IF_ERROR(verify_inputs(node));
  for (int output : node.outputs) make_dynamic(slot(output));
  KILN_ASSIGN_OR_RETURN(Step step, make_reference_step(*impl_, node, weights_, node.outputs));
  Status status = run_step(*impl_, step);
  if (!status.ok()) return status.with_context("specialize: fold");
  for (int output : node.outputs) {
    Slot& s = slot(output);
    const Tensor& t = s.tensor();
    s.kind = Slot::Kind::Constant;
    s.sizes = std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
    s.dtype = t.dtype();
    if (s.storage.empty()) s.storage.resize(1);
    s.value = runtime::EValue(Tensor(s.dtype, *s.sizes, s.storage.data()));
  }
  return true;
}

Status PlanBuilder::probe_shapes(const ir::Node& node) {
  bool unresolved = false, declared_symbolic = false;
  for (int output : node.outputs) {
    if (output < 0) continue;
    unresolved |= !slot(output).sizes;
    for (const ir::Dim& dim : graph_.values[static_cast<size_t>(output)].type.shape) {
      declared_symbolic |= !dim.is_static();
    }
  }
  std::vector<std::optional<std::vector<int64_t>>> input_sizes;
  for (int input : node.inputs) {
    input_sizes.push_back(input >= 0 ? slot(input).sizes : std::nullopt);
  }
  if (!unresolved && !declared_symbolic) {
    // A static declared shape passed ONNX's strict shape inference when the model was
    // imported, but a package is untrusted bytes: where a rule gives the shape, it must agree
    // (a Conv's op is made for the shape its geometry gives, and oneDNN allocates by it).
    auto shapes = rule_shapes(node, input_sizes);
    for (size_t i = 0; shapes && i < node.outputs.size() && i < shapes->size(); ++i) {
      const int output = node.outputs[i];
      if (output < 0 || *slot(output).sizes == (*shapes)[i]) continue;
      return Status(Error::InvalidArgument,
                    "node '" + node.name + "' (" + node.op + "): output " + std::to_string(i) +
                        " '" + slot(output).name + "' is declared " +
                        runtime::shape_to_string(*slot(output).sizes) + ", but its inputs give " +
                        runtime::shape_to_string((*shapes)[i]) +
                        " (expected declared shapes that follow from the inputs)");
    }
    return Status();
  }
  auto is_constant = [&](int v) { return slot(v).kind == Slot::Kind::Constant; };
  auto dtype_of = [&](int v) { return slot(v).dtype; };
  if (!shape_is_data_independent(node, is_constant, dtype_of)) return Status();
  // The common ops' shapes follow from their inputs' by a rule: no kernel run needed.
  if (!unresolved) {
    // A symbolic shape the model declares (an output's annotation) can hold only for some inputs,
    // as a detector's [batch, 1, height, width] for heights that are multiples of 32: the
    // rule's shape, from the inputs' actual ones, is what the kernel will produce.
    auto shapes = rule_shapes(node, input_sizes);
    for (size_t i = 0; shapes && i < node.outputs.size() && i < shapes->size(); ++i) {
      if (node.outputs[i] >= 0) slot(node.outputs[i]).sizes = (*shapes)[i];
    }
    return Status();
  }
  // Constant inputs the rules read (Reshape's shape, Resize's sizes, ...), checked first.
  ConstantInput constant = [&](size_t index) -> const Tensor* {
    if (index >= node.inputs.size() || node.inputs[index] < 0) return nullptr;
    Slot& s = slot(node.inputs[index]);
    if (s.kind != Slot::Kind::Constant) return nullptr;
    int weight = graph_.values[static_cast<size_t>(node.inputs[index])].weight;
    if (weight >= 0 && options_.verify_weight &&
        !options_.verify_weight(static_cast<size_t>(weight)).ok()) {
      return nullptr;  // placing the node reports it
    }
    return &s.tensor();
  };
  if (auto shapes = rule_shapes(node, input_sizes, constant)) {
    for (size_t i = 0; i < node.outputs.size() && i < shapes->size(); ++i) {
      if (node.outputs[i] >= 0) slot(node.outputs[i]).sizes = (*shapes)[i];
    }
    return Status();
  }
  if (!verify_inputs(node).ok()) return Status();  // placing the node reports it
  std::vector<std::unique_ptr<Slot>> saved;
  std::vector<int> inputs;
  for (int input : node.inputs) {
    if (input < 0 || slot(input).kind == Slot::Kind::Constant) continue;
    if (!slot(input).sizes) return Status();
    // Once each: a value read twice (Einsum(x, x), PRelu(x, x)) swapped out twice would come
    // back as its stand-in, and the function input it was would have no tensor to run with.
    if (std::find(inputs.begin(), inputs.end(), input) == inputs.end()) inputs.push_back(input);
  }
  // Swap in zero-filled stand-ins for the non-constant inputs and fresh outputs.
  std::vector<int> touched = inputs;
  for (int output : node.outputs) {
    if (output >= 0 && std::find(touched.begin(), touched.end(), output) == touched.end()) {
      touched.push_back(output);
    }
  }
  for (int v : touched) {
    saved.push_back(std::move(impl_->slots[static_cast<size_t>(v)]));
    auto s = std::make_unique<Slot>();
    s->name = saved.back()->name;
    s->dtype = saved.back()->dtype;
    s->sizes = saved.back()->sizes;
    impl_->slots[static_cast<size_t>(v)] = std::move(s);
  }
  bool ok = true;
  for (int v : inputs) {
    Slot& s = slot(v);
    auto numel = runtime::checked_numel(*s.sizes);
    if (!numel.ok() || *numel > (int64_t{1} << 24)) ok = false;
    if (!ok) break;
    s.storage.assign(static_cast<size_t>(*numel) * runtime::element_size(s.dtype) + 1, 0);
    s.value = runtime::EValue(Tensor(s.dtype, *s.sizes, s.storage.data()));
  }
  std::vector<std::optional<std::vector<int64_t>>> learned;
  if (ok) {
    std::vector<int> outputs = outputs_of(node);
    for (int output : node.outputs) {
      if (output >= 0) make_dynamic(slot(output));
    }
    auto step = make_reference_step(*impl_, node, weights_, outputs);
    ok = step.ok() && run_step(*impl_, *step).ok();
    for (int output : node.outputs) {
      if (output < 0) continue;
      const Tensor& t = slot(output).tensor();
      learned.emplace_back(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
    }
  }
  for (size_t i = 0; i < touched.size(); ++i) {
    impl_->slots[static_cast<size_t>(touched[i])] = std::move(saved[i]);
  }
  if (!ok) return Status();
  size_t k = 0;
  for (int output : node.outputs) {
    if (output >= 0) slot(output).sizes = learned[k++];
  }
  return Status();
}

}  // namespace kiln::engine::compile
