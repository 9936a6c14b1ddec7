// specialize(): shapes → folding → fusion and placement → memory plan.
#include <kiln/engine/compile/function_plan.h>
#include <kiln/engine/compile/shape_resolution.h>
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/cpu/thread_team.h>
#include <kiln/engine/plan/memory_planner.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::ShapeDynamism;
using runtime::Status;
using runtime::Tensor;
using specialization::ComputeKind;

namespace {

constexpr uint64_t kArenaAlignment = 64;

bool is_random(const std::string& op) {
  return op.rfind("Random", 0) == 0 || op == "Multinomial" || op == "Bernoulli";
}

std::string describe_node(const ir::Node& node) { return node.name + " (" + node.op + ")"; }

/// Times a build's phases for `profiling::builds` when profiling is on (else does nothing).
class BuildClock {
 public:
  BuildClock(const std::string& function,
             const std::optional<std::vector<std::vector<int64_t>>>& input_sizes)
      : on_(profiling::enabled()), function_(function) {
    if (!on_) return;
    shapes_ = input_sizes ? profiling::shapes_text(*input_sizes) : "any";
    phase_start_ = lap_start_ = Clock::now();
  }
  bool on() const { return on_; }
  /// Ends the phase begun at the previous call (or at construction).
  void phase(const char* name) {
    if (!on_) return;
    profiling::add_build_phase(function_, shapes_, name, since(phase_start_),
                               first_ ? profiling::PhaseAt::NewBuild : profiling::PhaseAt::End);
    first_ = false;
  }
  /// Milliseconds since the previous lap (or construction); phases are timed apart.
  double lap() { return since(lap_start_); }
  void step(const PlacementEntry& placement, double ms) {
    profiling::add_build_step(function_, shapes_,
                              {placement.node, placement.op, placement.device, ms});
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double since(Clock::time_point& start) {
    auto now = Clock::now();
    double ms = std::chrono::duration<double, std::milli>(now - start).count();
    start = now;
    return ms;
  }
  bool on_;
  bool first_ = true;
  std::string function_, shapes_;
  Clock::time_point phase_start_, lap_start_;
};

class Builder {
 public:
  Builder(const ir::Model& model, const ir::Graph& graph, std::vector<Tensor> weights,
          const CompileOptions& options)
      : model_(model),
        graph_(graph),
        weights_(std::move(weights)),
        options_(options),
        impl_(std::make_unique<CompiledFunctionImpl>()) {}

  /// Builds the plan for `input_sizes`, or (nullopt) a shape-generic one: no value but the
  /// constants has a known shape, so every step is placed for any shape.
  Result<std::unique_ptr<CompiledFunctionImpl>> build(
      const std::optional<std::vector<std::vector<int64_t>>>& input_sizes) {
    impl_->name = graph_.name;
    impl_->packed = options_.packed;
    impl_->graph = &graph_;
    BuildClock clock(graph_.name, input_sizes);
    KILN_RETURN_IF_ERROR(verify_read_weights(model_, graph_, options_));
    clock.phase("weight checks");
    make_slots();
    if (input_sizes) {
      KILN_ASSIGN_OR_RETURN(auto sizes, resolve_shapes(graph_, *input_sizes));
      for (size_t v = 0; v < sizes.size(); ++v) {
        if (impl_->slots[v]->kind != Slot::Kind::Constant) impl_->slots[v]->sizes = sizes[v];
      }
      impl_->input_sizes = *input_sizes;
    } else {
      impl_->generic = true;
      impl_->input_sizes.assign(graph_.inputs.size(), {});
    }
    folded_.assign(graph_.nodes.size(), false);
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      KILN_ASSIGN_OR_RETURN(folded_[n], fold(graph_.nodes[n]));
      if (!folded_[n]) probe_shapes(graph_.nodes[n]);
    }
    count_uses();
    winograd_convs_ = options_.winograd && has_winograd_conv(graph_, impl_->slots, folded_);
    blocked_convs_ = winograd_convs_ || has_depthwise_conv(graph_, impl_->slots, folded_);
    absorbed_.assign(graph_.nodes.size(), false);
    b_transpose_.assign(graph_.nodes.size(), -1);
    clock.phase("shapes and folding");
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      if (folded_[n] || absorbed_[n]) continue;
      if (defer_to_matmul(n)) continue;  // placed with the MatMul that reads it
      const size_t first_step = impl_->steps.size();
      if (clock.on()) clock.lap();
      KILN_RETURN_IF_ERROR(place(n));
      const double place_ms = clock.on() ? clock.lap() : 0.0;
      for (size_t i = first_step; i < impl_->steps.size(); ++i) {
        if (impl_->steps[i].node < 0) impl_->steps[i].node = static_cast<int>(n);
        if (clock.on()) clock.step(impl_->steps[i].placement, i == first_step ? place_ms : 0.0);
      }
    }
    clock.phase("steps");
    if (options_.propagate_layouts) KILN_RETURN_IF_ERROR(propagate_layouts(*impl_).status());
    clock.phase("layouts");
    KILN_RETURN_IF_ERROR(plan_memory());
    clock.phase("memory plan");
    for (Step& step : impl_->steps) impl_->placement.push_back(step.placement);
    if (impl_->generic) plan_releases();
    return std::move(impl_);
  }

 private:
  Slot& slot(int value) { return *impl_->slots[static_cast<size_t>(value)]; }

  void make_slots() {
    for (const ir::Value& value : graph_.values) {
      auto s = std::make_unique<Slot>();
      s->name = value.name;
      s->dtype = value.type.dtype;
      if (value.weight >= 0) {
        const Tensor& w = weights_[static_cast<size_t>(value.weight)];
        s->kind = Slot::Kind::Constant;
        s->dtype = w.dtype();
        s->sizes = std::vector<int64_t>(w.sizes().begin(), w.sizes().end());
        s->value = runtime::EValue(w);
      }
      impl_->slots.push_back(std::move(s));
    }
    for (int input : graph_.inputs) {
      impl_->inputs.push_back(input);
      slot(input).kind = Slot::Kind::Input;
    }
    impl_->outputs = graph_.outputs;
  }

  // A slot that holds whatever a reference kernel writes (storage grows on demand).
  void make_dynamic(Slot& s) {
    s.kind = Slot::Kind::Dynamic;
    s.storage.clear();
    s.value = runtime::EValue(Tensor(s.dtype, {}, nullptr, ShapeDynamism::Unbounded, 0));
  }

  // A scratch slot for an optional output nobody reads.
  int add_scratch(const std::string& name) {
    auto s = std::make_unique<Slot>();
    s->name = name;
    impl_->slots.push_back(std::move(s));
    int index = static_cast<int>(impl_->slots.size()) - 1;
    make_dynamic(slot(index));
    return index;
  }

  // The node's outputs without the trailing ones nobody reads (LayerNormalization's Mean, ...),
  // which an op is not asked for.
  std::vector<int> read_outputs(const ir::Node& node) {
    std::vector<int> outputs = node.outputs;
    while (outputs.size() > 1 && (outputs.back() < 0 || num_uses_[outputs.back()] == 0)) {
      outputs.pop_back();
    }
    return outputs;
  }

  std::vector<int> outputs_of(const ir::Node& node) {
    std::vector<int> outputs;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      outputs.push_back(node.outputs[i] >= 0
                            ? node.outputs[i]
                            : add_scratch(node.name + ":unused_output_" + std::to_string(i)));
    }
    return outputs;
  }

  Result<bool> fold_shape_of(const ir::Node& node) {
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

  // Evaluates a node whose inputs are all constant with its reference kernel, once.
  Result<bool> fold(const ir::Node& node) {
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

  // Learns output shapes the model left symbolic (by a rule, or by running the reference
  // kernel once on zeros) and checks declared ones by the rule, when the node's output shape
  // cannot depend on the values of its non-constant inputs.
  void probe_shapes(const ir::Node& node) {
    bool unresolved = false, declared_symbolic = false;
    for (int output : node.outputs) {
      if (output < 0) continue;
      unresolved |= !slot(output).sizes;
      for (const ir::Dim& dim : graph_.values[static_cast<size_t>(output)].type.shape) {
        declared_symbolic |= !dim.is_static();
      }
    }
    // A static declared shape passed ONNX's strict shape inference when the model was imported.
    if (!unresolved && !declared_symbolic) return;
    auto is_constant = [&](int v) { return slot(v).kind == Slot::Kind::Constant; };
    auto dtype_of = [&](int v) { return slot(v).dtype; };
    if (!shape_is_data_independent(node, is_constant, dtype_of)) return;
    // The common ops' shapes follow from their inputs' by a rule: no kernel run needed.
    std::vector<std::optional<std::vector<int64_t>>> input_sizes;
    for (int input : node.inputs) {
      input_sizes.push_back(input >= 0 ? slot(input).sizes : std::nullopt);
    }
    if (!unresolved) {
      // A symbolic shape the model declares (an output's annotation) can hold only for some inputs,
      // as a detector's [batch, 1, height, width] for heights that are multiples of 32: the
      // rule's shape, from the inputs' actual ones, is what the kernel will produce.
      auto shapes = rule_shapes(node, input_sizes);
      for (size_t i = 0; shapes && i < node.outputs.size() && i < shapes->size(); ++i) {
        if (node.outputs[i] >= 0) slot(node.outputs[i]).sizes = (*shapes)[i];
      }
      return;
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
      return;
    }
    if (!verify_inputs(node).ok()) return;  // placing the node reports it
    std::vector<std::unique_ptr<Slot>> saved;
    std::vector<int> inputs;
    for (int input : node.inputs) {
      if (input < 0 || slot(input).kind == Slot::Kind::Constant) continue;
      if (!slot(input).sizes) return;
      inputs.push_back(input);
    }
    // Swap in zero-filled stand-ins for the non-constant inputs and fresh outputs.
    std::vector<int> touched = inputs;
    for (int output : node.outputs) {
      if (output >= 0) touched.push_back(output);
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
    if (!ok) return;
    size_t k = 0;
    for (int output : node.outputs) {
      if (output >= 0) slot(output).sizes = learned[k++];
    }
  }

  // Checks the weights among `node`'s inputs before a reference kernel reads them.
  Status verify_inputs(const ir::Node& node) { return verify_node_weights(graph_, node, options_); }

  void count_uses() {
    num_uses_.assign(impl_->slots.size(), 0);
    consumer_.assign(impl_->slots.size(), -1);
    producer_.assign(impl_->slots.size(), -1);
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      if (folded_[n]) continue;
      for (int input : graph_.nodes[n].inputs) {
        if (input < 0) continue;
        ++num_uses_[input];
        consumer_[input] = static_cast<int>(n);
      }
      for (int output : graph_.nodes[n].outputs) {
        if (output >= 0) producer_[output] = static_cast<int>(n);
      }
    }
    for (int output : graph_.outputs) ++num_uses_[output];
  }

  bool shapes_static(const std::vector<int>& values) {
    for (int v : values) {
      if (v >= 0 && !slot(v).sizes) return false;
    }
    return true;
  }

  Status place(size_t n);
  Status place_node(size_t n);

  // A Transpose whose result a oneDNN MatMul can read as B in place
  // (`matmul_reading_transposed`): not placed now; the MatMul tries that, else places it first.
  bool defer_to_matmul(size_t n) {
    if (!options_.fuse) return false;
    FusionContext context{graph_, impl_->slots, num_uses_, consumer_, producer_, absorbed_};
    if (impl_->generic) {
      // A shape-generic plan: kiln's run-time MatMul reads a computed B transposed.
      const int m = matmul_reading_transposed(context, n, /*declared_rank=*/true);
      if (m < 0) return false;
      b_transpose_[static_cast<size_t>(m)] = static_cast<int>(n);
      return true;
    }
    if (!shapes_static(graph_.nodes[n].inputs)) return false;
    const int m = matmul_reading_transposed(context, n);
    if (m < 0 || !shapes_static(graph_.nodes[static_cast<size_t>(m)].inputs) ||
        !shapes_static(graph_.nodes[static_cast<size_t>(m)].outputs)) {
      return false;
    }
    b_transpose_[static_cast<size_t>(m)] = static_cast<int>(n);
    return true;
  }
  Result<std::unique_ptr<cpu::RuntimeMatMul>> try_runtime_matmul(size_t n, Step& step,
                                                                 std::string& why);
  Result<std::unique_ptr<cpu::RuntimeElementwise>> try_runtime_elementwise(size_t n, Step& step,
                                                                           std::string& why);
  Result<std::unique_ptr<cpu::RuntimeRows>> try_runtime_rows(size_t n, Step& step,
                                                             std::string& why);
  Result<std::unique_ptr<cpu::CpuOp>> try_cpu_op(const ir::Node& node, const FusionGroup* group,
                                                 Step& step, std::string& why);
  Status plan_memory();

  // Shape-generic plans: each Dynamic value goes back to the pool after the last step that
  // reads or writes it (function outputs are read after the run: never).
  void plan_releases() {
    std::vector<int> last(impl_->slots.size(), -1);
    for (size_t i = 0; i < impl_->steps.size(); ++i) {
      for (int v : impl_->steps[i].inputs) {
        if (v >= 0) last[v] = static_cast<int>(i);
      }
      for (int v : impl_->steps[i].outputs) {
        if (v >= 0) last[v] = static_cast<int>(i);
      }
    }
    for (int v : impl_->outputs) last[v] = -1;
    impl_->release_after.assign(impl_->steps.size(), {});
    for (size_t v = 0; v < impl_->slots.size(); ++v) {
      if (last[v] >= 0 && impl_->slots[v]->kind == Slot::Kind::Dynamic) {
        impl_->release_after[static_cast<size_t>(last[v])].push_back(static_cast<int>(v));
      }
    }
    impl_->pooled = true;
  }

  /// Records that a step runs on `num_threads` intra-op threads (0: OpenMP's count).
  void note_threads(int num_threads) {
    impl_->team_threads = std::max(impl_->team_threads, cpu::team_size(num_threads));
  }

  const ir::Model& model_;
  const ir::Graph& graph_;
  std::vector<Tensor> weights_;
  const CompileOptions& options_;
  std::unique_ptr<CompiledFunctionImpl> impl_;
  std::vector<bool> folded_, absorbed_;
  /// Per MatMul node: the Transpose node deferred to it (`defer_to_matmul`), or -1.
  std::vector<int> b_transpose_;
  /// While a MatMul with a deferred Transpose is placed: the Transpose's input, which
  /// `try_cpu_op` gives the op as B read transposed; `read_transposed_` says whether it did.
  int transposed_b_ = -1;
  bool read_transposed_ = false;
  bool blocked_convs_ = false;   ///< Convs in ActivationLayout::Blocked.
  bool winograd_convs_ = false;  ///< And on Winograd where it fits.
  std::vector<int> num_uses_, consumer_, producer_;
};

Result<std::unique_ptr<cpu::CpuOp>> Builder::try_cpu_op(const ir::Node& node,
                                                        const FusionGroup* group, Step& step,
                                                        std::string& why) {
  cpu::OpDesc desc;
  desc.op = node.op;
  desc.attributes = node.attributes;
  desc.num_threads = options_.num_threads;
  desc.packed = options_.packed.get();
  desc.small_ops_own_loops = options_.small_ops_own_loops;
  desc.proofs_recorded = options_.proofs_recorded;
  if (node.op == "Conv" && blocked_convs_ && !has_large_weights(node, impl_->slots)) {
    // (A Conv of large weights stays in the layout oneDNN prefers: see has_large_weights.)
    desc.activation_layout = cpu::ActivationLayout::Blocked;
    desc.winograd = winograd_convs_ && winograd_fit(node, impl_->slots) == WinogradFit::Yes;
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
Result<std::unique_ptr<cpu::RuntimeMatMul>> Builder::try_runtime_matmul(size_t n, Step& step,
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
Result<std::unique_ptr<cpu::RuntimeRows>> Builder::try_runtime_rows(size_t n, Step& step,
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
Result<std::unique_ptr<cpu::RuntimeElementwise>> Builder::try_runtime_elementwise(
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

Status Builder::place(size_t n) {
  const int t = b_transpose_[n];
  if (t < 0) return place_node(n);
  // The MatMul reading its deferred Transpose's input as B; if no op takes it so, the
  // Transpose is placed after all, and then the MatMul as written.
  const size_t before = impl_->steps.size();
  transposed_b_ = graph_.nodes[static_cast<size_t>(t)].inputs[0];
  read_transposed_ = false;
  Status placed = place_node(n);
  transposed_b_ = -1;
  if (placed.ok() && read_transposed_) {
    impl_->steps.back().placement.fused.insert(
        impl_->steps.back().placement.fused.begin(),
        describe_node(graph_.nodes[static_cast<size_t>(t)]) + " (B read transposed)");
    return placed;
  }
  impl_->steps.resize(before);
  KILN_RETURN_IF_ERROR(place_node(static_cast<size_t>(t)));
  for (size_t i = before; i < impl_->steps.size(); ++i) impl_->steps[i].node = t;
  return place_node(n);
}

Status Builder::place_node(size_t n) {
  const ir::Node& node = graph_.nodes[n];
  std::string why = "no oneDNN implementation";
  if (shapes_static(node.inputs) && shapes_static(node.outputs)) {
    if (options_.fuse) {
      FusionContext context{graph_, impl_->slots, num_uses_, consumer_, producer_, absorbed_};
      if (auto group = find_fusion(context, n)) {
        Step step;
        auto op = try_cpu_op(node, &*group, step, why);
        if (op.ok()) {
          step.cpu_op = std::move(*op);
          step.placement = PlacementEntry{
              node.name, node.op, "cpu:" + step.cpu_op->provider(), {}, step.cpu_op->describe()};
          for (size_t a : group->absorbed) {
            absorbed_[a] = true;
            step.placement.fused.push_back(describe_node(graph_.nodes[a]));
          }
          impl_->steps.push_back(std::move(step));
          return Status();
        }
      }
    }
    Step step;
    auto op = try_cpu_op(node, nullptr, step, why);
    if (op.ok()) {
      step.cpu_op = std::move(*op);
      step.placement = PlacementEntry{
          node.name, node.op, "cpu:" + step.cpu_op->provider(), {}, step.cpu_op->describe()};
      impl_->steps.push_back(std::move(step));
      return Status();
    }
  } else {
    why = "shape known only at run time";
    if (impl_->generic) {
      Step step;
      if (node.op == "MatMul") {
        auto op = try_runtime_matmul(n, step, why);
        if (op.ok()) step.runtime_matmul = std::move(*op);
      } else if (cpu::RuntimeRows::handles(node.op) && cpu::own_vector_loops()) {
        auto op = try_runtime_rows(n, step, why);
        if (op.ok()) step.runtime_rows = std::move(*op);
      } else if (cpu::RuntimeElementwise::handles(node.op) && cpu::own_vector_loops()) {
        auto op = try_runtime_elementwise(n, step, why);
        if (op.ok()) step.runtime_elementwise = std::move(*op);
      }
      if (step.runtime_matmul != nullptr || step.runtime_rows != nullptr ||
          step.runtime_elementwise != nullptr) {
        impl_->steps.push_back(std::move(step));
        return Status();
      }
    }
  }
  KILN_RETURN_IF_ERROR(verify_inputs(node));
  KILN_ASSIGN_OR_RETURN(Step step, make_reference_step(*impl_, node, weights_, outputs_of(node)));
  step.placement.detail = why;
  impl_->steps.push_back(std::move(step));
  return Status();
}

Status Builder::plan_memory() {
  auto num_steps = static_cast<int>(impl_->steps.size());
  std::vector<int> first(impl_->slots.size(), -1), last(impl_->slots.size(), -1);
  for (int i = 0; i < num_steps; ++i) {
    for (int v : impl_->steps[i].inputs) {
      if (v >= 0) last[v] = std::max(last[v], i);
    }
    for (int v : impl_->steps[i].outputs) {
      if (first[v] < 0) first[v] = i;
      last[v] = std::max(last[v], i);
    }
  }
  for (int v : impl_->outputs) last[v] = num_steps;
  // A Concat input placed in the Concat's result: the result lives from the input's producer.
  std::vector<Alias> aliases = concat_aliases(*impl_);
  std::vector<bool> aliased(impl_->slots.size(), false);
  for (const Alias& a : aliases) {
    aliased[a.slot] = true;
    first[a.within] = std::min(first[a.within], first[a.slot]);
  }
  std::vector<plan::Lifetime> lifetimes;
  std::vector<int> planned;
  for (size_t v = 0; v < impl_->slots.size(); ++v) {
    Slot& s = *impl_->slots[v];
    if (s.kind == Slot::Kind::Input) {
      // A shape-generic plan's inputs take their sizes at each run.
      s.value = s.sizes
                    ? runtime::EValue(Tensor(s.dtype, *s.sizes, nullptr))
                    : runtime::EValue(Tensor(s.dtype, {}, nullptr, ShapeDynamism::Unbounded, 0));
      continue;
    }
    if (s.kind == Slot::Kind::Constant || first[v] < 0) continue;
    if (!s.sizes) {
      make_dynamic(s);
      impl_->is_static = false;
      continue;
    }
    s.kind = Slot::Kind::Planned;
    if (aliased[v]) continue;
    KILN_ASSIGN_OR_RETURN(int64_t numel, runtime::checked_numel(*s.sizes));
    uint64_t bytes = static_cast<uint64_t>(numel) * runtime::element_size(s.dtype);
    lifetimes.push_back(
        plan::Lifetime{first[v], std::max(first[v], last[v]), std::max(bytes, s.native_bytes)});
    planned.push_back(static_cast<int>(v));
  }
  // Each oneDNN step's scratch memory (its scratchpad and the buffers of the layout
  // conversions left after the hand-overs) is alive during that step only, so it shares the
  // arena with values dead then, in pages earlier steps have touched: OCR detection's first
  // run wrote 5 MB of fresh pages into conversion buffers that each op had of its own.
  std::vector<size_t> scratch_steps;
  for (size_t i = 0; i < impl_->steps.size(); ++i) {
    cpu::CpuOp* op = impl_->steps[i].cpu_op.get();
    if (op == nullptr) continue;
    KILN_RETURN_IF_ERROR(op->finish());
    if (op->scratchpad_bytes() == 0) continue;
    lifetimes.push_back(
        plan::Lifetime{static_cast<int>(i), static_cast<int>(i), op->scratchpad_bytes()});
    scratch_steps.push_back(i);
    impl_->scratchpad_bytes = std::max(impl_->scratchpad_bytes, op->scratchpad_bytes());
  }
  plan::MemoryPlan memory = plan::plan_memory(lifetimes, kArenaAlignment);
  impl_->arena_bytes = memory.arena_size;
  // Not zero-filled: every step writes its outputs before anything reads them, and touching
  // megabytes of fresh pages here would only move that cost from the first run into the load.
  KILN_ASSIGN_OR_RETURN(impl_->arena, runtime::allocate_bulk(memory.arena_size + 1));
  impl_->arena_base = impl_->arena.get();
  for (size_t k = 0; k < planned.size(); ++k) {
    Slot& s = slot(planned[k]);
    s.offset = memory.offsets[k];
    s.value = runtime::EValue(Tensor(s.dtype, *s.sizes, impl_->arena_base + s.offset));
  }
  for (const Alias& a : aliases) {
    Slot& s = slot(a.slot);
    s.offset = slot(a.within).offset + a.offset;
    s.value = runtime::EValue(Tensor(s.dtype, *s.sizes, impl_->arena_base + s.offset));
  }
  for (size_t k = 0; k < scratch_steps.size(); ++k) {
    impl_->steps[scratch_steps[k]].cpu_op->use_scratchpad(impl_->arena_base +
                                                          memory.offsets[planned.size() + k]);
  }
  // Outputs the caller's tensors may hold during a run: a value of its own storage (not placed
  // inside a Concat's result), plain, and only once among the outputs.
  for (int v : impl_->outputs) {
    Slot& s = slot(v);
    const bool own = s.kind == Slot::Kind::Planned && !aliased[static_cast<size_t>(v)] &&
                     s.native_bytes <= s.tensor().nbytes();
    impl_->direct_outputs.push_back(
        own && std::count(impl_->outputs.begin(), impl_->outputs.end(), v) == 1);
  }
  // Slot tensors are final: point the oneDNN steps at them.
  for (Step& step : impl_->steps) {
    if (step.cpu_op == nullptr) continue;
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      int v = step.inputs[i];
      const Tensor* view = nullptr;
      if (i == 2 && !step.views.empty()) view = step.views.front().get();
      step.cpu_inputs.push_back(view != nullptr ? view : v >= 0 ? &slot(v).tensor() : nullptr);
    }
    for (int v : step.outputs) step.cpu_outputs.push_back(&slot(v).tensor());
  }
  return Status();
}

}  // namespace

namespace {

Result<std::unique_ptr<CompiledFunctionImpl>> build_function(
    const ir::Model& model, std::string_view function,
    const std::optional<std::vector<std::vector<int64_t>>>& input_sizes,
    const specialization::SpecializationOptions& options, const CompileOptions& compile) {
  const std::string action = "specialize function '" + std::string(function) + "'";
  if (!options.allows(ComputeKind::Cpu)) {
    return Status(Error::NotSupported,
                  action + ": options '" + options.identifier() +
                      "' do not allow the CPU (expected units to include cpu, the only kind "
                      "this engine places work on)");
  }
  const ir::Graph* graph = model.find_function(function);
  if (graph == nullptr) return Status(Error::NotFound, action + ": no such function");
  for (const ir::Node& node : graph->nodes) {
    if (!node.regions.empty()) {
      return Status(Error::NotSupported,
                    action + ": node '" + node.name + "' (" + node.op +
                        ") has data-dependent branches, which compiled functions do not run " +
                        "yet (expected none; run this model on the portable path)");
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> weights, weight_tensors(model, compile));
  Builder builder(model, *graph, std::move(weights), compile);
  auto impl = builder.build(input_sizes);
  if (!impl.ok()) {
    const std::string& message = impl.status().message();
    if (message.rfind("specialize", 0) == 0) return impl.status();
    return impl.status().with_context(action);
  }
  return impl;
}

}  // namespace

Result<std::unique_ptr<CompiledFunction>> specialize(
    const ir::Model& model, std::string_view function,
    const std::vector<std::vector<int64_t>>& input_sizes,
    const specialization::SpecializationOptions& options, const CompileOptions& compile) {
  KILN_ASSIGN_OR_RETURN(auto impl, build_function(model, function, input_sizes, options, compile));
  return std::unique_ptr<CompiledFunction>(new CompiledFunction(std::move(impl)));
}

Result<std::unique_ptr<CompiledFunction>> specialize_generic(
    const ir::Model& model, std::string_view function,
    const specialization::SpecializationOptions& options, const CompileOptions& compile) {
  KILN_ASSIGN_OR_RETURN(auto impl, build_function(model, function, std::nullopt, options, compile));
  return std::unique_ptr<CompiledFunction>(new CompiledFunction(std::move(impl)));
}

}  // namespace kiln::engine::compile
