// Concat inputs placed inside the Concat's result (see concat_aliases in function_plan.h).

#include <kiln/engine/compile/function_plan.h>

#include <algorithm>

namespace kiln::engine::compile {

std::vector<Alias> concat_aliases(const CompiledFunctionImpl& impl) {
  const size_t num_slots = impl.slots.size();
  std::vector<int> reads(num_slots, 0), producer(num_slots, -1);
  std::vector<bool> is_output(num_slots, false);
  for (int v : impl.outputs) is_output[static_cast<size_t>(v)] = true;
  for (size_t i = 0; i < impl.steps.size(); ++i) {
    for (int v : impl.steps[i].inputs) {
      if (v >= 0) ++reads[static_cast<size_t>(v)];
    }
    for (int v : impl.steps[i].outputs) {
      if (v >= 0) producer[static_cast<size_t>(v)] = static_cast<int>(i);
    }
  }
  std::vector<Alias> aliases;
  std::vector<bool> placed(num_slots, false), holds(num_slots, false);
  for (size_t i = 0; i < impl.steps.size(); ++i) {
    const Step& step = impl.steps[i];
    if (step.cpu_op == nullptr || step.outputs.size() != 1 || step.outputs[0] < 0) continue;
    auto offsets = step.cpu_op->input_offsets_in_output();
    if (!offsets || offsets->size() != step.inputs.size()) continue;
    int within = step.outputs[0];
    if (placed[static_cast<size_t>(within)]) continue;
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      int v = step.inputs[k];
      if (v < 0) continue;
      const Slot& s = *impl.slots[static_cast<size_t>(v)];
      auto index = static_cast<size_t>(v);
      // Only a value this step alone reads, written by an earlier step into the arena.
      if (s.kind == Slot::Kind::Input || s.kind == Slot::Kind::Constant || !s.sizes ||
          is_output[index] || reads[index] != 1 || producer[index] < 0 ||
          producer[index] >= static_cast<int>(i) || placed[index] || holds[index]) {
        continue;
      }
      aliases.push_back(Alias{v, within, (*offsets)[k]});
      placed[index] = true;
      holds[static_cast<size_t>(within)] = true;
    }
  }
  return aliases;
}

}  // namespace kiln::engine::compile
