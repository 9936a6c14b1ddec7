// Where a run's outputs are written: a static plan points the slots of its direct outputs at
// the caller's tensors before the run; a shape-generic plan gives each output the caller's
// tensor when the step computing it first sizes it. Either keeps an output elsewhere (and
// copies it after the run) when the caller's memory overlaps what the run still reads.
#include <kiln/engine/compile/function_plan.h>

#include <algorithm>

namespace kiln::engine::compile {

using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// Whether `bytes` at `to` (output `i`'s memory) overlap no input and no other output.
bool apart_from_arguments(const void* to, size_t bytes, Span<const Tensor* const> inputs,
                          Span<Tensor* const> outputs, size_t i) {
  for (const Tensor* in : inputs) {
    if (overlaps(to, bytes, in->data(), in->nbytes())) return false;
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (k != i && overlaps(to, bytes, outputs[k]->data(), outputs[k]->nbytes())) return false;
  }
  return true;
}

}  // namespace

void place_generic_outputs(CompiledFunctionImpl& impl, Span<const Tensor* const> inputs,
                           Span<Tensor* const> outputs,
                           std::function<Status(size_t, Span<const int64_t>)> size) {
  impl.placed_outputs.assign(outputs.size(), nullptr);
  impl.place_output = [&impl, inputs, outputs, size = std::move(size)](
                          size_t i, Span<const int64_t> sizes, size_t bytes) -> void* {
    const int slot = impl.outputs[i];
    if (std::count(impl.outputs.begin(), impl.outputs.end(), slot) != 1 ||
        std::count(impl.inputs.begin(), impl.inputs.end(), slot) != 0 || bytes == 0 ||
        !size(i, sizes).ok()) {
      return nullptr;
    }
    void* to = outputs[i]->mutable_data();
    if (to == nullptr || outputs[i]->nbytes() != bytes) return nullptr;
    return apart_from_arguments(to, bytes, inputs, outputs, i) ? to : nullptr;
  };
}

Status CompiledFunction::point_outputs_at_caller(Span<const Tensor* const> inputs,
                                                 Span<Tensor* const> outputs,
                                                 const OutputResizer& resize_output,
                                                 std::vector<void*>& own_storage) {
  CompiledFunctionImpl& impl = *impl_;
  if (impl.generic || !impl.is_static) return Status();
  // Bytes the run reads or writes elsewhere: a caller's output overlapping them is copied into
  // after the run instead, so that no step writes where another still reads.
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!impl.direct_outputs[i]) continue;
    Tensor& t = impl.slots[impl.outputs[i]]->tensor();
    KILN_RETURN_IF_ERROR(size_output(i, t.sizes(), outputs, resize_output));
    void* to = outputs[i]->mutable_data();
    const size_t bytes = t.nbytes();
    if (to == nullptr || bytes == 0 || outputs[i]->nbytes() != bytes) continue;
    if (overlaps(to, bytes, impl.arena_base, impl.arena_bytes) ||
        !apart_from_arguments(to, bytes, inputs, outputs, i)) {
      continue;
    }
    own_storage[i] = t.mutable_data();
    t.set_data(to, bytes);
  }
  return Status();
}

}  // namespace kiln::engine::compile
