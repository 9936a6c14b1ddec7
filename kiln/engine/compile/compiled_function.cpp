// The run-time half of a compiled function: steps over slots, input/output checks.
#include <kiln/engine/compile/arena_pool.h>
#include <kiln/engine/compile/function_plan.h>
#include <kiln/engine/compile/shape_resolution.h>
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/compile/work_flops.h>
#include <kiln/engine/cpu/thread_team.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

Result<DynamicPool::Piece> DynamicPool::take(size_t bytes) {
  constexpr size_t kAlignment = 64;
  constexpr size_t kChunk = size_t{8} << 20;
  bytes = std::max<size_t>((bytes + kAlignment - 1) / kAlignment * kAlignment, kAlignment);
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i].bytes >= bytes && (best == free_.size() || free_[i].bytes < free_[best].bytes)) {
      best = i;
    }
  }
  if (best != free_.size()) {
    Piece piece = free_[best];
    free_[best] = free_.back();
    free_.pop_back();
    return piece;
  }
  while (chunk_ < chunks_.size() && used_ + bytes > chunks_[chunk_].size) {
    ++chunk_;
    used_ = 0;
  }
  if (chunk_ == chunks_.size()) {
    size_t size = std::max(kChunk, bytes);
    if (limit_ > 0) {
      if (bytes > limit_ || total_ > limit_ - bytes) {
        return Status(Error::MemoryAllocationFailed,
                      std::to_string(bytes) + " bytes more would bring run-time storage to " +
                          std::to_string(total_ + bytes) + " bytes, over the limit of " +
                          std::to_string(limit_));
      }
      size = std::min<uint64_t>(size, limit_ - total_);  // at least `bytes`
    }
    KILN_ASSIGN_OR_RETURN(runtime::AlignedBuffer data, runtime::allocate_bulk(size));
    chunks_.push_back(Chunk{std::move(data), size});
    total_ += size;
    used_ = 0;
  }
  Chunk& chunk = chunks_[chunk_];
  Piece piece{chunk.data.get() + used_, bytes};
  used_ += bytes;
  if (used_ > chunk.mapped) {
    runtime::prefault_for_write(chunk.data.get() + chunk.mapped, used_ - chunk.mapped);
    chunk.mapped = used_;
  }
  return piece;
}

void DynamicPool::give_back(Piece piece) {
  if (piece.data != nullptr) free_.push_back(piece);
}

void DynamicPool::reset() {
  free_.clear();
  chunk_ = 0;
  used_ = 0;
}

Status CompiledFunctionImpl::over_limit(const EValue& value, Span<const int64_t> sizes,
                                        const Status& why) const {
  std::string name = "a value";
  for (const auto& slot : slots) {
    if (&slot->value == &value) name = "value '" + slot->name + "'";
  }
  return Status(why.code(), name + " of shape " + runtime::shape_to_string(sizes) + ": " +
                                why.message() + " bytes (max_arena_bytes, else the machine's " +
                                "memory; expected data-dependent sizes that fit in memory)");
}

Result<void*> CompiledFunctionImpl::shaped_scratch(uint64_t bytes) {
  if (bytes > shaped_scratch_bytes || shaped_scratch_buffer.get() == nullptr) {
    // A quarter more than asked, so that slowly growing shapes do not allocate at each call;
    // mapped now, since the op is about to write it.
    const uint64_t grown = std::max(bytes, shaped_scratch_bytes + shaped_scratch_bytes / 4);
    shaped_scratch_buffer.reset();
    KILN_ASSIGN_OR_RETURN(shaped_scratch_buffer, runtime::allocate_bulk(grown));
    runtime::prefault_for_write(shaped_scratch_buffer.get(), grown);
    shaped_scratch_bytes = grown;
  }
  return static_cast<void*>(shaped_scratch_buffer.get());
}

Status CompiledFunctionImpl::resize(EValue& value, Span<const int64_t> sizes, uint64_t min_bytes) {
  Tensor& tensor = value.to_tensor();
  if (tensor.shape_dynamism() != runtime::ShapeDynamism::Unbounded) return tensor.resize(sizes);
  auto numel = runtime::checked_numel(sizes);
  if (!numel.ok()) return numel.status();
  size_t bytes = std::max<size_t>(static_cast<size_t>(*numel) * tensor.element_size(),
                                  static_cast<size_t>(min_bytes));
  if (pooled && (bytes > tensor.capacity_bytes() || tensor.data() == nullptr)) {
    if (place_output) {
      // A function output: the caller's memory where it can take the value (first sizing), and
      // never given to the pool (a value sized again beyond it goes to the pool, and is copied).
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (&slots[static_cast<size_t>(outputs[i])]->value != &value) continue;
        if (tensor.data() == nullptr) {
          if (void* to = place_output(i, sizes, bytes)) {
            placed_outputs[i] = to;
            tensor.set_data(to, bytes);
            return tensor.resize(sizes);
          }
        } else if (tensor.data() == placed_outputs[i]) {
          placed_outputs[i] = nullptr;
          tensor.set_data(nullptr, 0);
        }
        break;
      }
    }
    pool.give_back({static_cast<uint8_t*>(tensor.mutable_data()), tensor.capacity_bytes()});
    size_t chunks = pool.num_chunks();
    auto taken = pool.take(bytes);
    if (!taken.ok()) return over_limit(value, sizes, taken.status());
    DynamicPool::Piece piece = *taken;
    tensor.set_data(piece.data, piece.bytes);
    dynamic_allocations += pool.num_chunks() - chunks;
    return tensor.resize(sizes);
  }
  if (bytes > tensor.capacity_bytes() || tensor.data() == nullptr) {
    for (auto& slot : slots) {
      if (&slot->value != &value) continue;
      // Grow geometrically so a slowly growing shape does not allocate on every call. The old
      // bytes are not kept: the kernel writes the value after sizing it.
      size_t grown = std::max<size_t>({bytes, slot->storage.size() * 2, 64});
      // What the other slots hold, summed at each growth (growth is geometric, so rare): kept
      // as a running count it drifted, the build's shape probes growing stand-ins it then drops.
      uint64_t others = 0;
      for (const auto& other : slots) {
        if (other != slot) others += other->storage.size();
      }
      if (max_dynamic_bytes > 0) {
        if (bytes > max_dynamic_bytes || others > max_dynamic_bytes - bytes) {
          return over_limit(
              value, sizes,
              Status(Error::MemoryAllocationFailed,
                     "run-time storage would reach " + std::to_string(others + bytes) +
                         " bytes, over the limit of " + std::to_string(max_dynamic_bytes)));
        }
        grown = std::min<uint64_t>(grown, max_dynamic_bytes - others);  // at least `bytes`
      }
      decltype(slot->storage)().swap(slot->storage);
      slot->storage.resize(grown);
      tensor.set_data(slot->storage.data(), slot->storage.size());
      ++dynamic_allocations;
      break;
    }
  }
  return tensor.resize(sizes);
}

Result<Step> make_reference_step(CompiledFunctionImpl& impl, const ir::Node& node,
                                 const std::vector<Tensor>& weights, std::vector<int> outputs) {
  Step step;
  step.kernel = runtime::get_kernel(node.op);
  if (step.kernel == nullptr || !node.domain.empty()) {
    return Status(Error::OperatorMissing, "specialize node '" + node.name + "': no kernel for " +
                                              "operator " + node.op +
                                              (node.domain.empty() ? "" : " of " + node.domain));
  }
  step.placement = PlacementEntry{node.name, node.op, "cpu:reference", {}, {}};
  step.inputs = node.inputs;
  step.outputs = std::move(outputs);
  std::vector<std::pair<std::string, EValue>> attributes;
  for (const auto& attribute : node.attributes) {
    if (auto scalar = ir::scalar_attribute(attribute.value)) {
      attributes.emplace_back(attribute.name, std::move(*scalar));
    } else {
      int w = std::get<ir::WeightRef>(attribute.value).weight;
      attributes.emplace_back(attribute.name, EValue(weights[static_cast<size_t>(w)]));
    }
  }
  step.attributes = runtime::Attributes(std::move(attributes));
  for (int input : step.inputs) {
    step.ref_inputs.push_back(input >= 0 ? &impl.slots[input]->value : &impl.none);
  }
  for (int output : step.outputs) step.ref_outputs.push_back(&impl.slots[output]->value);
  CompiledFunctionImpl* owner = &impl;
  step.context = std::make_unique<runtime::KernelContext>(
      node.op,
      [owner](EValue& value, Span<const int64_t> sizes) { return owner->resize(value, sizes); });
  return step;
}

namespace {

// A run-time-shape MatMul: its result slot (Dynamic) is sized for this run's input first.
Status run_runtime_matmul(CompiledFunctionImpl& impl, Step& step) {
  const Tensor& a = impl.slots[static_cast<size_t>(step.inputs[0])]->tensor();
  const Tensor* b = step.runtime_matmul->constant_b()
                        ? nullptr
                        : &impl.slots[static_cast<size_t>(step.inputs[1])]->tensor();
  EValue& out = impl.slots[static_cast<size_t>(step.outputs[0])]->value;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                        step.runtime_matmul->output_sizes(
                            a.sizes(), b != nullptr ? b->sizes() : Span<const int64_t>()));
  KILN_RETURN_IF_ERROR(impl.resize(out, sizes));
  return step.runtime_matmul->run(a, b, out.to_tensor());
}

// A run-time-shape row op (Softmax, LayerNormalization): its result is sized as its input.
Status run_runtime_rows(CompiledFunctionImpl& impl, Step& step) {
  const Tensor& x = impl.slots[static_cast<size_t>(step.inputs[0])]->tensor();
  EValue& out = impl.slots[static_cast<size_t>(step.outputs[0])]->value;
  KILN_RETURN_IF_ERROR(impl.resize(out, x.sizes()));
  return step.runtime_rows->run(x, out.to_tensor());
}

// A run-time-shape element-wise op: its result is sized as its inputs broadcast.
Status run_runtime_elementwise(CompiledFunctionImpl& impl, Step& step) {
  std::array<const Tensor*, 3> inputs{};
  const size_t count = std::min(step.inputs.size(), inputs.size());
  for (size_t i = 0; i < count; ++i) {
    inputs[i] = &impl.slots[static_cast<size_t>(step.inputs[i])]->tensor();
  }
  Span<const Tensor* const> in(inputs.data(), count);
  EValue& out = impl.slots[static_cast<size_t>(step.outputs[0])]->value;
  KILN_ASSIGN_OR_RETURN(Span<const int64_t> sizes, step.runtime_elementwise->output_sizes(in));
  KILN_RETURN_IF_ERROR(impl.resize(out, sizes));
  return step.runtime_elementwise->run(in, out.to_tensor());
}

}  // namespace

Status run_step(CompiledFunctionImpl& impl, Step& step) {
  Status status = step.cpu_op != nullptr ? step.cpu_op->run(step.cpu_inputs, step.cpu_outputs)
                  : step.runtime_matmul != nullptr      ? run_runtime_matmul(impl, step)
                  : step.runtime_rows != nullptr        ? run_runtime_rows(impl, step)
                  : step.runtime_elementwise != nullptr ? run_runtime_elementwise(impl, step)
                  : step.shaped_op != nullptr           ? step.shaped_op->run(impl, step)
                                              : step.kernel(*step.context, step.ref_inputs,
                                                            step.ref_outputs, step.attributes);
  if (status.ok()) return status;
  return status.with_context("run node '" + step.placement.node + "' (" + step.placement.op + ")");
}

namespace {

// The sizes value `v` has in this run: resolved at compile time, else its tensor's (empty
// when neither: a value fused away in a shape-generic plan).
std::vector<int64_t> run_sizes(const CompiledFunctionImpl& impl, int v) {
  if (v < 0) return {};
  const Slot& s = *impl.slots[static_cast<size_t>(v)];
  if (s.sizes) return *s.sizes;
  if (!s.value.is_tensor()) return {};
  auto sizes = s.value.to_tensor().sizes();
  return {sizes.begin(), sizes.end()};
}

// The work of the step just run (work_flops of its node at this run's sizes).
double step_flops(const CompiledFunctionImpl& impl, const Step& step) {
  if (step.node < 0 || impl.graph == nullptr) return 0.0;
  const ir::Node& node = impl.graph->nodes[static_cast<size_t>(step.node)];
  if (!counts_work(node.op)) return 0.0;
  std::vector<std::vector<int64_t>> inputs;
  for (int v : node.inputs) inputs.push_back(run_sizes(impl, v));
  if (node.op == "MatMul" && inputs.size() > 1 && inputs[1].empty() && step.inputs.size() > 1 &&
      step.inputs[1] != node.inputs[1]) {
    // B read transposed from the folded Transpose's input (a shape-generic plan: the
    // Transpose's result has no sizes): its sizes with the last two axes swapped.
    inputs[1] = run_sizes(impl, step.inputs[1]);
    if (inputs[1].size() >= 2)
      std::swap(inputs[1][inputs[1].size() - 1], inputs[1][inputs[1].size() - 2]);
  }
  return work_flops(
      node, inputs,
      node.outputs.empty() ? std::vector<int64_t>{} : run_sizes(impl, node.outputs[0]));
}

// execute() with each step timed for profiling::add_run.
Status execute_profiled(CompiledFunctionImpl& impl) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms, flops;
  ms.reserve(impl.steps.size());
  for (size_t i = 0; i < impl.steps.size(); ++i) {
    auto start = Clock::now();
    KILN_RETURN_IF_ERROR(run_step(impl, impl.steps[i]));
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    flops.push_back(step_flops(impl, impl.steps[i]));  // before its values go back to the pool
    if (impl.pooled) impl.release_values(i);
  }
  std::vector<profiling::StepTime> names(impl.steps.size());
  std::vector<const profiling::StepTime*> pointers;
  for (size_t i = 0; i < impl.steps.size(); ++i) {
    const PlacementEntry& p = impl.steps[i].placement;
    names[i].node = p.node;
    names[i].op = p.op;
    names[i].device = p.device;
    pointers.push_back(&names[i]);
  }
  profiling::add_run(impl.name, pointers, ms, flops);
  return Status();
}

}  // namespace

Status CompiledFunctionImpl::execute() {
  if (team_threads > 1)
    cpu::rejoin_thread_team(team_threads);  // started, or spread again after rest
  if (pooled) renew_pool();
  if (profiling::enabled()) return execute_profiled(*this);
  for (size_t i = 0; i < steps.size(); ++i) {
    KILN_RETURN_IF_ERROR(run_step(*this, steps[i]));
    if (pooled) release_values(i);
  }
  return Status();
}

void CompiledFunctionImpl::renew_pool() {
  pool.reset();
  for (auto& slot : slots) {
    if (slot->kind == Slot::Kind::Dynamic) slot->tensor().set_data(nullptr, 0);
  }
}

void CompiledFunctionImpl::release_values(size_t step) {
  for (int v : release_after[step]) {
    Tensor& tensor = slots[static_cast<size_t>(v)]->tensor();
    pool.give_back({static_cast<uint8_t*>(tensor.mutable_data()), tensor.capacity_bytes()});
    tensor.set_data(nullptr, 0);
  }
}

void CompiledFunctionImpl::bind_arena(uint8_t* base) {
  if (base == arena_base) return;
  arena_base = base;
  for (int v : arena_slots) {
    Slot& s = *slots[static_cast<size_t>(v)];
    s.tensor().set_data(base + s.offset, s.tensor().capacity_bytes());
  }
  for (const auto& [step, offset] : scratch_offsets)
    steps[step].cpu_op->use_scratchpad(base + offset);
}

namespace {
std::atomic<uint64_t> arena_bytes_alive{0};

// The bytes of the plan's own arena (none when it takes one from a pool, which counts its own).
uint64_t own_arena_bytes(const CompiledFunctionImpl& impl) {
  return impl.arena_pool == nullptr ? impl.arena_bytes : 0;
}
}  // namespace

uint64_t live_activation_bytes() { return arena_bytes_alive.load(std::memory_order_relaxed); }

void detail::count_activation_bytes(int64_t delta) {
  arena_bytes_alive.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
}

CompiledFunction::CompiledFunction(std::unique_ptr<CompiledFunctionImpl> impl)
    : impl_(std::move(impl)) {
  arena_bytes_alive.fetch_add(own_arena_bytes(*impl_), std::memory_order_relaxed);
}
CompiledFunction::~CompiledFunction() {
  arena_bytes_alive.fetch_sub(own_arena_bytes(*impl_), std::memory_order_relaxed);
}

const std::string& CompiledFunction::name() const { return impl_->name; }
size_t CompiledFunction::num_inputs() const { return impl_->inputs.size(); }
size_t CompiledFunction::num_outputs() const { return impl_->outputs.size(); }
const std::string& CompiledFunction::input_name(size_t i) const {
  return impl_->slots[impl_->inputs[i]]->name;
}
const std::string& CompiledFunction::output_name(size_t i) const {
  return impl_->slots[impl_->outputs[i]]->name;
}
runtime::ScalarType CompiledFunction::input_dtype(size_t i) const {
  return impl_->slots[impl_->inputs[i]]->dtype;
}
const std::vector<int64_t>& CompiledFunction::input_sizes(size_t i) const {
  return impl_->input_sizes[i];
}
runtime::ScalarType CompiledFunction::output_dtype(size_t i) const {
  return impl_->slots[impl_->outputs[i]]->dtype;
}
const std::optional<std::vector<int64_t>>& CompiledFunction::output_sizes(size_t i) const {
  return impl_->slots[impl_->outputs[i]]->sizes;
}
bool CompiledFunction::writes_output_directly(size_t i) const {
  return !impl_->generic && impl_->is_static && impl_->direct_outputs[i];
}
const std::vector<PlacementEntry>& CompiledFunction::placement() const { return impl_->placement; }
uint64_t CompiledFunction::arena_bytes() const { return impl_->arena_bytes; }
uint64_t CompiledFunction::scratchpad_bytes() const { return impl_->scratchpad_bytes; }
bool CompiledFunction::is_static() const { return impl_->is_static; }
bool CompiledFunction::is_generic() const { return impl_->generic; }
int CompiledFunction::team_threads() const { return impl_->team_threads; }
uint64_t CompiledFunction::num_dynamic_allocations() const { return impl_->dynamic_allocations; }

namespace {

Status check_inputs(const CompiledFunctionImpl& impl, Span<const Tensor* const> inputs) {
  // Messages are made only on failure: a run checks every input.
  auto action = [&] { return "run function '" + impl.name + "'"; };
  if (inputs.size() != impl.inputs.size()) {
    return Status(Error::InvalidArgument, action() + ": got " + std::to_string(inputs.size()) +
                                              " inputs (expected " +
                                              std::to_string(impl.inputs.size()) + ")");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Slot& slot = *impl.slots[impl.inputs[i]];
    const Tensor* t = inputs[i];
    auto subject = [&] { return action() + ": input '" + slot.name + "'"; };
    if (t == nullptr) return Status(Error::InvalidArgument, subject() + " is null");
    if (t->dtype() != slot.dtype) {
      return Status(Error::InvalidArgument,
                    subject() + " has dtype " + std::string(runtime::to_string(t->dtype())) +
                        " (expected " + std::string(runtime::to_string(slot.dtype)) + ")");
    }
    if (impl.generic) continue;  // shapes: checked together below
    const std::vector<int64_t>& expected = impl.input_sizes[i];
    if (!std::equal(t->sizes().begin(), t->sizes().end(), expected.begin(), expected.end())) {
      return Status(Error::InvalidArgument, subject() + " has shape " +
                                                runtime::shape_to_string(t->sizes()) +
                                                " (expected " + runtime::shape_to_string(expected) +
                                                ", the shape this function was bound for)");
    }
    if (!t->is_contiguous() || (t->data() == nullptr && t->numel() > 0)) {
      return Status(Error::InvalidArgument, subject() + " is not a contiguous tensor with data");
    }
  }
  if (impl.generic) {
    std::vector<std::vector<int64_t>> sizes;
    for (const Tensor* t : inputs) sizes.emplace_back(t->sizes().begin(), t->sizes().end());
    Status fits = check_input_sizes(*impl.graph, sizes);
    if (!fits.ok()) {
      // "specialize function 'f': input 'x' has shape ..." → "run function 'f': input ...".
      std::string message = fits.message();
      const std::string prefix = "specialize function '" + impl.name + "': ";
      if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
      return Status(fits.code(), action() + " (shape-generic): " + message);
    }
  }
  return Status();
}

Status check_outputs(const CompiledFunctionImpl& impl, Span<Tensor* const> outputs) {
  const std::string action = "run function '" + impl.name + "'";
  if (outputs.size() != impl.outputs.size()) {
    return Status(Error::InvalidArgument, action + ": got " + std::to_string(outputs.size()) +
                                              " outputs (expected " +
                                              std::to_string(impl.outputs.size()) + ")");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Slot& slot = *impl.slots[impl.outputs[i]];
    const std::string subject = action + ": output '" + slot.name + "'";
    if (outputs[i] == nullptr) return Status(Error::InvalidArgument, subject + " is null");
    if (outputs[i]->dtype() != slot.dtype) {
      return Status(Error::InvalidArgument,
                    subject + " has dtype " + std::string(runtime::to_string(outputs[i]->dtype())) +
                        " (expected " + std::string(runtime::to_string(slot.dtype)) + ")");
    }
  }
  return Status();
}

}  // namespace

Status CompiledFunction::accepts(const std::vector<std::vector<int64_t>>& input_sizes) const {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < input_sizes.size() && i < impl_->inputs.size(); ++i) {
    // Metadata only: the checks read no data (a non-empty tensor needs a pointer to pass).
    static float stand_in = 0.0f;
    tensors.emplace_back(impl_->slots[impl_->inputs[i]]->dtype, input_sizes[i], &stand_in);
  }
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : tensors) pointers.push_back(&t);
  if (input_sizes.size() != impl_->inputs.size()) pointers.resize(input_sizes.size(), nullptr);
  return check_inputs(*impl_, pointers);
}

Status CompiledFunction::run(Span<const Tensor* const> inputs, Span<Tensor* const> outputs) {
  return run(inputs, outputs, OutputResizer());
}

Status CompiledFunction::run(Span<const Tensor* const> inputs, Span<Tensor* const> outputs,
                             const OutputResizer& resize_output) {
  CompiledFunctionImpl& impl = *impl_;
  KILN_RETURN_IF_ERROR(check_inputs(impl, inputs));
  KILN_RETURN_IF_ERROR(check_outputs(impl, outputs));
  std::lock_guard<std::mutex> lock(run_mutex_);
  ArenaPool::Lease arena;  // held until the outputs are copied out of it
  if (impl.arena_pool != nullptr) {
    KILN_ASSIGN_OR_RETURN(arena, impl.arena_pool->take(impl.arena_bytes + 1));
    impl.bind_arena(arena.base());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& input = impl.slots[impl.inputs[i]]->tensor();
    input.set_data(const_cast<void*>(inputs[i]->data()), inputs[i]->nbytes());
    if (impl.generic) KILN_RETURN_IF_ERROR(input.resize(inputs[i]->sizes()));
  }
  // Outputs of known sizes are written by their steps straight into the caller's tensors
  // (direct_outputs), the others copied after the run; a shape-generic plan's are placed in
  // the caller's tensors when first sized (place_generic_outputs).
  std::vector<void*> own_storage(outputs.size(), nullptr);
  Status ran = point_outputs_at_caller(inputs, outputs, resize_output, own_storage);
  if (impl.pooled)
    place_generic_outputs(impl, inputs, outputs, [&](size_t i, Span<const int64_t> s) {
      return size_output(i, s, outputs, resize_output);
    });
  if (ran.ok()) ran = impl.execute();
  impl.place_output = nullptr;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (own_storage[i] == nullptr) continue;
    Tensor& t = impl.slots[impl.outputs[i]]->tensor();
    t.set_data(own_storage[i], t.nbytes());
  }
  KILN_RETURN_IF_ERROR(ran);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (own_storage[i] != nullptr) continue;
    const Tensor& result = impl.slots[impl.outputs[i]]->tensor();
    if (impl.pooled && impl.placed_outputs[i] != nullptr &&
        result.data() == impl.placed_outputs[i]) {
      continue;  // written in place, sized when placed
    }
    KILN_RETURN_IF_ERROR(size_output(i, result.sizes(), outputs, resize_output));
    if (result.nbytes() > 0) {
      std::memcpy(outputs[i]->mutable_data(), result.data(), result.nbytes());
    }
  }
  return Status();
}

Status CompiledFunction::size_output(size_t i, runtime::Span<const int64_t> sizes,
                                     Span<Tensor* const> outputs,
                                     const OutputResizer& resize_output) const {
  if (resize_output) KILN_RETURN_IF_ERROR(resize_output(i, sizes));
  Status status = outputs[i]->resize(sizes);
  if (status.ok()) return status;
  return Status(Error::InvalidArgument, "run function '" + impl_->name + "': output '" +
                                            impl_->slots[impl_->outputs[i]]->name + "' has shape " +
                                            runtime::shape_to_string(outputs[i]->sizes()) +
                                            " (expected " + runtime::shape_to_string(sizes) +
                                            "): " + status.message());
}

runtime::Result<std::vector<runtime::Tensor>> weight_tensors(const ir::Model& model,
                                                             const CompileOptions& options) {
  bool external = !options.weight_data.empty();
  if (external && options.weight_data.size() != model.weights.size()) {
    return runtime::Status(
        runtime::Error::InvalidArgument,
        "specialize: weight_data has " + std::to_string(options.weight_data.size()) +
            " entries (expected one per weight, " + std::to_string(model.weights.size()) + ")");
  }
  std::vector<runtime::Tensor> tensors;
  for (size_t i = 0; i < model.weights.size(); ++i) {
    const ir::Weight& w = model.weights[i];
    runtime::Span<const uint8_t> bytes =
        external ? options.weight_data[i] : runtime::Span<const uint8_t>(w.data);
    KILN_ASSIGN_OR_RETURN(int64_t numel, runtime::checked_numel(w.sizes));
    if (bytes.size() != static_cast<size_t>(numel) * runtime::element_size(w.dtype)) {
      return runtime::Status(runtime::Error::InvalidArgument,
                             "specialize: weight '" + w.name + "' has " +
                                 std::to_string(bytes.size()) + " bytes (expected " +
                                 std::to_string(numel * runtime::element_size(w.dtype)) + ")");
    }
    tensors.emplace_back(w.dtype, w.sizes, const_cast<uint8_t*>(bytes.data()));
  }
  return tensors;
}

}  // namespace kiln::engine::compile
