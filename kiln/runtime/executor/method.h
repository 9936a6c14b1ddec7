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

  /// Sets the inputs to `inputs` (one per input, each checked as `set_input` checks it) and
  /// runs, reading every tensor input that no instruction writes and that is not an output
  /// from the caller's data in place, without a copy (as ONNX Runtime's `Run` reads its
  /// inputs); the others, and any whose data lies in the method's own memory (an output of
  /// an earlier run given back), are copied as by `set_input`. `inputs` must stay alive and
  /// unchanged until this returns. Afterwards the inputs read in place are the method's own memory
  /// again, with the sizes given and undefined values: set them before an `execute()`.
  /// Errors: InvalidArgument for a wrong number of inputs; those of `set_input` and `execute`.
  Status execute(Span<const EValue> inputs);

  /// Whether input `index` is read in place by `execute(inputs)`: a tensor that no
  /// instruction writes and that is not an output.
  bool reads_input_in_place(size_t index) const;

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
  // set_input's checks of tensor `source` for input `index` (its slot `target`).
  Status check_tensor_input(size_t index, const Tensor& source, const Tensor& target) const;
  // Marks the inputs `execute(inputs)` reads in place (after the instructions are made).
  void find_read_only_inputs();
  // Whether `bytes` at `data` overlap the method's memory (its arenas or a value's own
  // storage): an output of an earlier run given back as an input, which the run may overwrite.
  bool overlaps_own_memory(const void* data, size_t bytes) const;
  // Copies tensor `source` into `destination`, resizing it (a MoveCall).
  Status move_value(const EValue& source, EValue& destination);
  Status run_instruction(size_t index);

  std::shared_ptr<const Program> program_;
  MethodMeta meta_;
  std::vector<EValue> values_;
  std::vector<size_t> inputs_;
  std::vector<size_t> outputs_;
  std::vector<bool> read_only_inputs_;  ///< By input: read in place by `execute(inputs)`.
  /// Where `execute(inputs)` keeps the own storage of the inputs it points at the caller's
  /// data (reused: no allocation a call).
  struct OwnStorage {
    size_t input = 0;
    void* data = nullptr;
    size_t capacity = 0;
  };
  std::vector<OwnStorage> borrowed_;
  std::vector<AlignedBuffer> arenas_;
  std::vector<size_t> arena_sizes_;
  /// Run-time storage of Unbounded tensors (and unplanned inputs), by value index.
  std::vector<AlignedBuffer> dynamic_;
  std::vector<size_t> dynamic_sizes_;    ///< Bytes of each `dynamic_` buffer.
  std::vector<size_t> dynamic_indices_;  ///< The values that have a `dynamic_` buffer.
  std::vector<Instruction> instructions_;
  std::vector<Delegate> delegates_;
  EValue none_;
};

}  // namespace kiln::runtime
