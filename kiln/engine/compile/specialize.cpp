// specialize(): shapes → folding → fusion and placement → memory plan (plan_builder.h).
#include <kiln/engine/compile/plan_builder.h>
#include <kiln/engine/compile/shape_resolution.h>
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/cpu/thread_team.h>
#include <kiln/engine/package/model_check.h>
#include <kiln/engine/plan/memory_planner.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::Result;
using runtime::ShapeDynamism;
using runtime::Status;
using runtime::Tensor;
using specialization::ComputeKind;

namespace {

constexpr uint64_t kArenaAlignment = 64;

/// The machine's physical memory in bytes, or 0 where the system does not say.
uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

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

}  // namespace

Result<std::unique_ptr<CompiledFunctionImpl>> PlanBuilder::build(
    const std::optional<std::vector<std::vector<int64_t>>>& input_sizes) {
  impl_->name = graph_.name;
  impl_->packed = options_.packed;
  impl_->graph = &graph_;
  impl_->max_dynamic_bytes = memory_limit();
  impl_->pool.set_limit(impl_->max_dynamic_bytes);
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
    if (!folded_[n]) KILN_RETURN_IF_ERROR(probe_shapes(graph_.nodes[n]));
  }
  count_uses();
  // Expecting frequent reshapes, kiln's loops take the ops they can whose kernels oneDNN
  // generates per shape, Winograd's Convs among them (`cpu::OpDesc::avoid_generated_code`).
  avoid_generated_code_ =
      frequent_reshapes_ && options_.small_ops_own_loops && cpu::own_vector_loops();
  // kiln's Winograd loops take the large images' Winograd Convs whenever its loops run here.
  own_winograd_ = options_.small_ops_own_loops && cpu::own_vector_loops();
  winograd_convs_ =
      options_.winograd && has_winograd_conv(graph_, impl_->slots, folded_, own_winograd_);
  blocked_convs_ = winograd_convs_ || has_depthwise_conv(graph_, impl_->slots, folded_);
  absorbed_.assign(graph_.nodes.size(), false);
  b_transpose_.assign(graph_.nodes.size(), -1);
  KILN_RETURN_IF_ERROR(check_value_sizes());
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
  if (impl_->generic) plan_shaped_layouts();
  if (options_.propagate_layouts) KILN_RETURN_IF_ERROR(propagate_layouts(*impl_).status());
  clock.phase("layouts");
  KILN_RETURN_IF_ERROR(plan_memory());
  clock.phase("memory plan");
  for (Step& step : impl_->steps) impl_->placement.push_back(step.placement);
  if (impl_->generic) plan_releases();
  return std::move(impl_);
}

void PlanBuilder::make_slots() {
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

void PlanBuilder::make_dynamic(Slot& s) {
  s.kind = Slot::Kind::Dynamic;
  s.storage.clear();
  s.value = runtime::EValue(Tensor(s.dtype, {}, nullptr, ShapeDynamism::Unbounded, 0));
}

int PlanBuilder::add_scratch(const std::string& name) {
  auto s = std::make_unique<Slot>();
  s->name = name;
  impl_->slots.push_back(std::move(s));
  int index = static_cast<int>(impl_->slots.size()) - 1;
  make_dynamic(slot(index));
  return index;
}

std::vector<int> PlanBuilder::read_outputs(const ir::Node& node) {
  std::vector<int> outputs = node.outputs;
  while (outputs.size() > 1 && (outputs.back() < 0 || num_uses_[outputs.back()] == 0)) {
    outputs.pop_back();
  }
  return outputs;
}

std::vector<int> PlanBuilder::outputs_of(const ir::Node& node) {
  std::vector<int> outputs;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    outputs.push_back(node.outputs[i] >= 0
                          ? node.outputs[i]
                          : add_scratch(node.name + ":unused_output_" + std::to_string(i)));
  }
  return outputs;
}

void PlanBuilder::count_uses() {
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

bool PlanBuilder::shapes_static(const std::vector<int>& values) {
  for (int v : values) {
    if (v >= 0 && !slot(v).sizes) return false;
  }
  return true;
}

bool PlanBuilder::defer_to_matmul(size_t n) {
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

Status PlanBuilder::place(size_t n) {
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

Status PlanBuilder::place_node(size_t n) {
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
      } else if (shaped_op_takes(node)) {
        auto op = try_shaped_op(n, step, why);
        if (op.ok()) step.shaped_op = std::move(*op);
      } else if (cpu::RuntimeRows::handles(node.op) && cpu::own_vector_loops()) {
        auto op = try_runtime_rows(n, step, why);
        if (op.ok()) step.runtime_rows = std::move(*op);
      } else if (cpu::RuntimeElementwise::handles(node.op) && cpu::own_vector_loops()) {
        auto op = try_runtime_elementwise(n, step, why);
        if (op.ok()) step.runtime_elementwise = std::move(*op);
      }
      if (step.runtime_matmul != nullptr || step.runtime_rows != nullptr ||
          step.runtime_elementwise != nullptr || step.shaped_op != nullptr) {
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

void PlanBuilder::plan_shaped_layouts() {
  std::vector<bool> plain(impl_->slots.size(), false);  // read by a step of another kind
  for (int v : impl_->outputs) plain[static_cast<size_t>(v)] = true;
  for (const Step& step : impl_->steps) {
    if (step.shaped_op != nullptr) continue;
    for (int v : step.inputs) {
      if (v >= 0) plain[static_cast<size_t>(v)] = true;
    }
  }
  for (Step& step : impl_->steps) {
    if (step.shaped_op == nullptr || step.outputs.empty()) continue;
    step.shaped_op->set_native_output(!plain[static_cast<size_t>(step.outputs[0])]);
  }
}

uint64_t PlanBuilder::memory_limit() const {
  return options_.max_arena_bytes > 0 ? options_.max_arena_bytes : physical_memory_bytes();
}

Status PlanBuilder::check_value_sizes() const {
  const uint64_t limit = memory_limit();
  for (const auto& s : impl_->slots) {
    if (s->kind == Slot::Kind::Constant || !s->sizes) continue;
    auto numel = runtime::checked_numel(*s->sizes);
    const uint64_t element = std::max<uint64_t>(runtime::element_size(s->dtype), 1);
    const bool counted = numel.ok() && static_cast<uint64_t>(*numel) <=
                                           std::numeric_limits<uint64_t>::max() / element;
    const uint64_t bytes = counted ? static_cast<uint64_t>(*numel) * element : 0;
    if (counted && (limit == 0 || bytes <= limit)) continue;
    return Status(
        Error::MemoryAllocationFailed,
        "value '" + s->name + "' of shape " + runtime::shape_to_string(*s->sizes) + " for inputs " +
            profiling::shapes_text(impl_->input_sizes) + " needs " +
            (counted ? std::to_string(bytes) + " bytes"
                     : std::string("more bytes than 64 bits count")) +
            ", more than " +
            (options_.max_arena_bytes > 0 ? "max_arena_bytes (" : "this machine's memory (") +
            std::to_string(limit) + " bytes; expected input shapes whose values fit in memory)");
  }
  return Status();
}

Status PlanBuilder::plan_memory() {
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
  // Untouched pages can be allocated beyond the machine's memory; a run would then fail only
  // when it first writes them (or the system ends the process): refuse such a plan here.
  const uint64_t limit = memory_limit();
  if (limit > 0 && memory.arena_size > limit) {
    return Status(
        Error::MemoryAllocationFailed,
        "plan memory for inputs " + profiling::shapes_text(impl_->input_sizes) +
            ": the values alive at once need " + std::to_string(memory.arena_size) +
            " bytes, more than " +
            (options_.max_arena_bytes > 0 ? "max_arena_bytes (" : "this machine's memory (") +
            std::to_string(limit) + " bytes; expected input shapes whose values fit in memory)");
  }
  impl_->arena_bytes = memory.arena_size;
  // Not zero-filled: every step writes its outputs before anything reads them.
  // With a pool, each run takes an arena there and places the values in it (bind_arena).
  impl_->arena_pool = options_.arena_pool;
  if (impl_->arena_pool == nullptr) {
    KILN_ASSIGN_OR_RETURN(impl_->arena, runtime::allocate_bulk(memory.arena_size + 1));
    // Mapped now in one call, cheaper than the first run's faults of each page.
    runtime::prefault_for_write(impl_->arena.get(), memory.arena_size + 1);
  }
  for (size_t k = 0; k < planned.size(); ++k) {
    Slot& s = slot(planned[k]);
    s.offset = memory.offsets[k];
    s.value = runtime::EValue(Tensor(s.dtype, *s.sizes, nullptr));
    impl_->arena_slots.push_back(planned[k]);
  }
  for (const Alias& a : aliases) {
    Slot& s = slot(a.slot);
    s.offset = slot(a.within).offset + a.offset;
    s.value = runtime::EValue(Tensor(s.dtype, *s.sizes, nullptr));
    impl_->arena_slots.push_back(a.slot);
  }
  for (size_t k = 0; k < scratch_steps.size(); ++k) {
    impl_->scratch_offsets.emplace_back(scratch_steps[k], memory.offsets[planned.size() + k]);
  }
  if (impl_->arena_pool == nullptr) impl_->bind_arena(impl_->arena.get());
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

void PlanBuilder::plan_releases() {
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

void PlanBuilder::note_threads(int num_threads) {
  impl_->team_threads = std::max(impl_->team_threads, cpu::team_size(num_threads));
}

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
  // The model's indices and dataflow (a package was checked when it was opened; a model made
  // in memory was not): a node reading a value nothing writes would leave its slot empty.
  KILN_RETURN_IF_ERROR(package::check_model(model, Error::InvalidArgument, action));
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
  PlanBuilder builder(model, *graph, std::move(weights), compile, options.expect_frequent_reshapes);
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