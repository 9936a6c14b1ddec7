#include <kiln/runtime/executor/method.h>

#include <kiln/runtime/executor/method_internal.h>
#include <kiln/runtime/executor/program.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::runtime {

Method::Method() = default;

Method::~Method() {
  // Destroy delegates in reverse order of init, like the failure path in load_method.
  for (auto it = delegates_.rbegin(); it != delegates_.rend(); ++it) {
    if (it->backend != nullptr) it->backend->destroy(it->handle);
  }
}

const EValue& Method::get_output(size_t index) const {
  return index < outputs_.size() ? values_[outputs_[index]] : none_;
}

const EValue& Method::get_input(size_t index) const {
  return index < inputs_.size() ? values_[inputs_[index]] : none_;
}

Status Method::resize_value(EValue& value, Span<const int64_t> sizes) {
  if (!value.is_tensor()) {
    return Status(Error::InvalidType, "resize value: it is " + std::string(to_string(value.tag())) +
                                          " (expected tensor)");
  }
  Tensor& tensor = value.to_tensor();
  if (tensor.shape_dynamism() == ShapeDynamism::Unbounded) {
    auto numel = checked_numel(sizes);
    if (!numel.ok()) return numel.status().with_context("resize tensor");
    if (static_cast<uint64_t>(*numel) > SIZE_MAX / tensor.element_size()) {
      return Status(Error::InvalidArgument, "resize tensor: shape " + shape_to_string(sizes) +
                                                " needs more bytes than memory can address");
    }
    size_t needed = static_cast<size_t>(*numel) * tensor.element_size();
    if (needed > tensor.capacity_bytes()) {
      size_t index = static_cast<size_t>(&value - values_.data());
      if (index >= values_.size()) {
        return Status(Error::Internal, "resize tensor: value is not owned by this method");
      }
      size_t grown = std::max(needed, tensor.capacity_bytes() + tensor.capacity_bytes() / 2);
      KILN_ASSIGN_OR_RETURN(AlignedBuffer storage, allocate_aligned(grown));
      if (dynamic_[index] == nullptr) dynamic_indices_.push_back(index);
      dynamic_[index] = std::move(storage);
      dynamic_sizes_[index] = grown;
      tensor.set_data(dynamic_[index].get(), grown);
    }
  }
  return tensor.resize(sizes);
}

Status Method::check_tensor_input(size_t index, const Tensor& source,
                                  const Tensor& target) const {
  const TensorMeta& meta = meta_.inputs[index];
  auto where = [&] { return "set input '" + meta.name + "' of method '" + name() + "'"; };
  if (source.dtype() != target.dtype()) {
    return Status(Error::InvalidType, where() + ": dtype " +
                                          std::string(to_string(source.dtype())) + " (expected " +
                                          std::string(to_string(target.dtype())) + ")");
  }
  if (source.dim() != static_cast<int64_t>(meta.sizes.size())) {
    return Status(Error::InvalidArgument,
                  where() + ": shape " + shape_to_string(source.sizes()) + " has rank " +
                      std::to_string(source.dim()) + " (expected rank " +
                      std::to_string(meta.sizes.size()) + ", shape " +
                      shape_to_string(meta.sizes) + ")");
  }
  if (!source.is_contiguous()) {
    return Status(Error::InvalidArgument,
                  where() + ": tensor is not contiguous (expected row-major)");
  }
  if (meta.dynamism == ShapeDynamism::Bounded) {
    for (size_t d = 0; d < meta.sizes.size(); ++d) {
      if (source.size(static_cast<int64_t>(d)) > meta.sizes[d]) {
        return Status(Error::InvalidArgument,
                      where() + ": shape " + shape_to_string(source.sizes()) +
                          " exceeds the bound " + std::to_string(meta.sizes[d]) + " of dim " +
                          std::to_string(d) + " (expected at most " +
                          shape_to_string(meta.sizes) + ")");
      }
    }
  }
  if (meta.dynamism == ShapeDynamism::Static &&
      !std::equal(meta.sizes.begin(), meta.sizes.end(), source.sizes().begin())) {
    return Status(Error::InvalidArgument, where() + ": shape " + shape_to_string(source.sizes()) +
                                              " (expected " + shape_to_string(meta.sizes) + ")");
  }
  if (source.nbytes() > 0 && source.data() == nullptr) {
    return Status(Error::InvalidArgument, where() + ": tensor has no data");
  }
  return Status();
}

Status Method::set_input(size_t index, const EValue& value) {
  if (index >= inputs_.size()) {
    return Status(Error::InvalidArgument, "set input " + std::to_string(index) + " of method '" +
                                              name() + "': out of range (expected < " +
                                              std::to_string(inputs_.size()) + ")");
  }
  EValue& slot = values_[inputs_[index]];
  if (value.tag() != slot.tag()) {
    return Status(Error::InvalidType, "set input '" + meta_.inputs[index].name + "' of method '" +
                                          name() + "': got " + std::string(to_string(value.tag())) +
                                          " (expected " + std::string(to_string(slot.tag())) + ")");
  }
  if (!slot.is_tensor()) {
    slot = value;
    return Status();
  }
  const Tensor& source = value.to_tensor();
  Tensor& target = slot.to_tensor();
  KILN_RETURN_IF_ERROR(check_tensor_input(index, source, target));
  Status resized = resize_value(slot, source.sizes());
  if (!resized.ok()) {
    return resized.with_context("set input '" + meta_.inputs[index].name + "' of method '" +
                                name() + "'");
  }
  if (source.nbytes() > 0 && source.data() != target.data()) {
    std::memmove(target.mutable_data(), source.data(), source.nbytes());
  }
  return Status();
}

void Method::find_read_only_inputs() {
  read_only_inputs_.assign(inputs_.size(), false);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const EValue* value = &values_[inputs_[i]];
    bool read_only = value->is_tensor() &&
                     std::count(inputs_.begin(), inputs_.end(), inputs_[i]) == 1 &&
                     std::find(outputs_.begin(), outputs_.end(), inputs_[i]) == outputs_.end();
    for (const Instruction& instruction : instructions_) {
      if (!read_only) break;
      read_only = std::find(instruction.outputs.begin(), instruction.outputs.end(), value) ==
                  instruction.outputs.end();
    }
    read_only_inputs_[i] = read_only;
  }
}

bool Method::overlaps_own_memory(const void* data, size_t bytes) const {
  if (data == nullptr || bytes == 0) return false;
  // As addresses: no pointer arithmetic past what each buffer holds.
  const auto begin = reinterpret_cast<uintptr_t>(data);
  auto overlaps = [&](const void* other, size_t other_bytes) {
    const auto start = reinterpret_cast<uintptr_t>(other);
    return other != nullptr && other_bytes > 0 && begin < start + other_bytes &&
           start < begin + bytes;
  };
  for (size_t i = 0; i < arenas_.size(); ++i) {
    if (overlaps(arenas_[i].get(), arena_sizes_[i])) return true;
  }
  for (size_t i : dynamic_indices_) {
    if (overlaps(dynamic_[i].get(), dynamic_sizes_[i])) return true;
  }
  return false;
}

bool Method::reads_input_in_place(size_t index) const {
  return index < read_only_inputs_.size() && read_only_inputs_[index];
}

Status Method::execute(Span<const EValue> inputs) {
  if (inputs.size() != inputs_.size()) {
    return Status(Error::InvalidArgument, "execute method '" + name() + "': " +
                                              std::to_string(inputs.size()) + " inputs given " +
                                              "(expected " + std::to_string(inputs_.size()) + ")");
  }
  // Whatever happens, the inputs pointed at the caller's data get their own storage back.
  struct Restore {
    Method& method;
    ~Restore() {
      for (const OwnStorage& own : method.borrowed_) {
        Tensor& t = method.values_[method.inputs_[own.input]].to_tensor();
        t.set_data(own.data, own.capacity);
        // Sizes the own storage cannot hold (an unbounded input) become empty ones.
        if (t.nbytes() > own.capacity) {
          std::vector<int64_t> zeros(static_cast<size_t>(t.dim()), 0);
          (void)t.resize(zeros);
        }
      }
      method.borrowed_.clear();
    }
  } restore{*this};
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!reads_input_in_place(i) || !inputs[i].is_tensor() ||
        overlaps_own_memory(inputs[i].to_tensor().data(), inputs[i].to_tensor().nbytes())) {
      KILN_RETURN_IF_ERROR(set_input(i, inputs[i]));
      continue;
    }
    const Tensor& source = inputs[i].to_tensor();
    Tensor& target = values_[inputs_[i]].to_tensor();
    KILN_RETURN_IF_ERROR(check_tensor_input(i, source, target));
    borrowed_.push_back(OwnStorage{i, target.mutable_data(), target.capacity_bytes()});
    target.set_data(const_cast<void*>(source.data()), source.nbytes());
    Status resized = target.resize(source.sizes());
    if (!resized.ok()) {
      return resized.with_context("set input '" + meta_.inputs[i].name + "' of method '" +
                                  name() + "'");
    }
  }
  return execute();
}

namespace {

// A jump condition: a bool, or a one-element tensor of any dtype (nonzero is true).
Result<bool> read_condition(const EValue& value) {
  if (value.is_bool()) return value.to_bool();
  if (!value.is_tensor()) {
    return Status(Error::InvalidType, "condition is " + std::string(to_string(value.tag())) +
                                          " (expected a bool or a one-element tensor)");
  }
  const Tensor& t = value.to_tensor();
  if (t.numel() != 1 || t.data() == nullptr) {
    return Status(Error::InvalidArgument, "condition has shape " + shape_to_string(t.sizes()) +
                                              " (expected one element)");
  }
  const auto* bytes = static_cast<const uint8_t*>(t.data());
  for (size_t i = 0; i < t.element_size(); ++i) {
    if (bytes[i] != 0) {
      // -0.0 is false too.
      if (t.dtype() == ScalarType::Float32) return t.data_ptr<float>()[0] != 0.0f;
      if (t.dtype() == ScalarType::Float64) return t.data_ptr<double>()[0] != 0.0;
      return true;
    }
  }
  return false;
}

}  // namespace

Status Method::move_value(const EValue& source, EValue& destination) {
  if (!source.is_tensor() || !destination.is_tensor()) {
    return Status(Error::InvalidType, "move needs two tensors");
  }
  const Tensor& from = source.to_tensor();
  if (from.dtype() != destination.to_tensor().dtype()) {
    return Status(Error::InvalidType,
                  "move from dtype " + std::string(to_string(from.dtype())) + " to dtype " +
                      std::string(to_string(destination.to_tensor().dtype())));
  }
  if (&source == &destination) return Status();
  KILN_RETURN_IF_ERROR(resize_value(destination, from.sizes()));
  Tensor& to = destination.to_tensor();
  if (from.nbytes() > 0 && from.data() != to.data()) {
    std::memmove(to.mutable_data(), from.data(), from.nbytes());
  }
  return Status();
}

Status Method::run_instruction(size_t index) {
  Instruction& instruction = instructions_[index];
  if (instruction.kind == Instruction::Kind::Move) {
    return move_value(*instruction.inputs[0], *instruction.outputs[0]);
  }
  if (instruction.kind == Instruction::Kind::Delegate) {
    Delegate& delegate = delegates_[instruction.delegate];
    BackendExecutionContext context(
        name(), [this](EValue& value, Span<const int64_t> sizes) {
          return resize_value(value, sizes);
        });
    return delegate.backend->execute(context, delegate.handle, instruction.inputs,
                                     instruction.outputs);
  }
  return instruction.kernel(*instruction.context, instruction.inputs, instruction.outputs,
                            instruction.attributes);
}

Status Method::execute() {
  // Jumps only go forward (verified at load), so this loop ends.
  size_t next = 0;
  for (size_t i = 0; i < instructions_.size(); i = next) {
    next = i + 1;
    Status status;
    if (instructions_[i].kind == Instruction::Kind::JumpFalse) {
      auto condition = read_condition(*instructions_[i].inputs[0]);
      if (condition.ok() && !*condition) next = instructions_[i].destination;
      status = condition.status();
    } else {
      status = run_instruction(i);
    }
    if (!status.ok()) {
      const Instruction& instruction = instructions_[i];
      std::string what = instruction.kind == Instruction::Kind::Delegate
                             ? "delegate '" + instruction.name + "' (" +
                                   delegates_[instruction.delegate].backend_id + ")"
                         : instruction.kind == Instruction::Kind::Kernel ? "kernel " + instruction.name
                                                                         : instruction.name;
      return status.with_context("execute method '" + name() + "' instruction " +
                                 std::to_string(i) + ", " + what);
    }
  }
  return Status();
}

}  // namespace kiln::runtime
