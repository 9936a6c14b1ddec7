#pragma once

#include <kiln/runtime/backend/interface.h>
#include <kiln/runtime/core/aligned_buffer.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/executor/kernel_registry.h>
#include <kiln/runtime/executor/method_meta.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

class Program;

/// A loaded, runnable method: its values, planned memory, kernels and initialized delegates.
/// Made by `Program::load_method`.
///
/// Lifetime: shares ownership of its Program. Delegates are destroyed with the Method.
/// Thread-safety: a Method executes on one thread at a time; calls on one Method must not
/// overlap. Different Methods may run concurrently.
class Method {
 public:
  ~Method();
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  const MethodMeta& meta() const { return meta_; }
  const std::string& name() const { return meta_.name; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }

  /// Copies `value` into input `index`. A tensor must have the input's dtype and rank; a
  /// Static input needs equal sizes, a Bounded one sizes within its bounds, an Unbounded one
  /// any sizes. Non-tensor inputs need the same tag. Errors: InvalidArgument naming the input,
  /// what was given and what is expected.
  Status set_input(size_t index, const EValue& value);

  /// Runs every instruction in order. Errors carry the instruction index and its op or
  /// delegate. Static-shape methods do not allocate here.
  Status execute();

  /// Output `index` after `execute`. Tensors alias the method's memory: their data stays valid
  /// until the next `execute`, `set_input` or the Method's destruction.
  const EValue& get_output(size_t index) const;
  /// Input `index` as currently set.
  const EValue& get_input(size_t index) const;

 private:
  friend class Program;
  struct Instruction;
  struct Delegate;
  Method();
  Status resize_value(EValue& value, Span<const int64_t> sizes);
  // Copies tensor `source` into `destination`, resizing it (a MoveCall).
  Status move_value(const EValue& source, EValue& destination);
  Status run_instruction(size_t index);

  std::shared_ptr<const Program> program_;
  MethodMeta meta_;
  std::vector<EValue> values_;
  std::vector<size_t> inputs_;
  std::vector<size_t> outputs_;
  std::vector<AlignedBuffer> arenas_;
  /// Run-time storage of Unbounded tensors (and unplanned inputs), by value index.
  std::vector<AlignedBuffer> dynamic_;
  std::vector<Instruction> instructions_;
  std::vector<Delegate> delegates_;
  EValue none_;
};

}  // namespace kiln::runtime
