#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>
#include <kiln/runtime/executor/program_verify.h>

#include <set>
#include <string>
#include <vector>

namespace kiln::runtime {

namespace {

template <typename T>
size_t count(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

Status invalid(const std::string& where, const std::string& problem) {
  return Status(Error::InvalidProgram, "load program: " + where + ": " + problem);
}

// flatbuffers' verifier checks the alignment of fields but not of the elements of vectors, so
// 8-byte vectors are checked here before anything reads them.
template <typename T>
bool aligned(const flatbuffers::Vector<T>* v) {
  return v == nullptr || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % alignof(T) == 0;
}

bool fits(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

Status verify_tensor(const std::string& where, const schema::TensorValue& t,
                     const schema::Program& program, const schema::Method& method) {
  if (!is_valid_scalar_type(t.dtype())) {
    return invalid(where, "dtype " + std::to_string(t.dtype()) + " (expected 0..9)");
  }
  if (!aligned(t.sizes())) return invalid(where, "sizes are misaligned");
  if (t.dynamism() < 0 || t.dynamism() > 2) {
    return invalid(where, "shape dynamism " + std::to_string(t.dynamism()) + " (expected 0..2)");
  }
  size_t rank = count(t.sizes());
  if (rank > kMaxTensorRank) {
    return invalid(where, "rank " + std::to_string(rank) + " (expected at most " +
                              std::to_string(kMaxTensorRank) + ")");
  }
  std::vector<int64_t> sizes;
  if (t.sizes() != nullptr) sizes.assign(t.sizes()->begin(), t.sizes()->end());
  auto numel = checked_numel(sizes);
  if (!numel.ok()) return invalid(where, numel.status().message());
  uint64_t element = element_size(static_cast<ScalarType>(t.dtype()));
  if (static_cast<uint64_t>(*numel) > UINT64_MAX / 16 / element) {
    return invalid(where, "shape " + shape_to_string(sizes) + " is too large");
  }
  uint64_t nbytes = static_cast<uint64_t>(*numel) * element;
  if (t.dim_names() != nullptr && t.dim_names()->size() != rank) {
    return invalid(where, "has " + std::to_string(t.dim_names()->size()) + " dim names (expected " +
                              std::to_string(rank) + ", one per dim)");
  }
  if (t.dim_names() != nullptr) {
    for (const auto* name : *t.dim_names()) {
      if (name == nullptr) return invalid(where, "dim name is missing");
    }
  }
  if (t.constant_segment() >= 0 && t.arena() >= 0) {
    return invalid(where, "is both a constant and planned memory (expected one)");
  }
  if (t.constant_segment() >= 0) {
    size_t segments = count(program.segments());
    if (static_cast<size_t>(t.constant_segment()) >= segments) {
      return invalid(where, "constant segment " + std::to_string(t.constant_segment()) +
                                " (expected < " + std::to_string(segments) + ")");
    }
    uint64_t segment_size = program.segments()->Get(t.constant_segment())->size();
    if (!fits(t.constant_offset(), nbytes, segment_size)) {
      return invalid(where, "constant of " + std::to_string(nbytes) + " bytes at offset " +
                                std::to_string(t.constant_offset()) + " ends past segment " +
                                std::to_string(t.constant_segment()) + " (" +
                                std::to_string(segment_size) + " bytes)");
    }
    if (t.dynamism() != 0) return invalid(where, "a constant must be static");
  } else if (t.constant_segment() < -1) {
    return invalid(where, "constant segment " + std::to_string(t.constant_segment()));
  }
  if (t.arena() >= 0) {
    size_t arenas = count(method.arena_sizes());
    if (static_cast<size_t>(t.arena()) >= arenas) {
      return invalid(where, "arena " + std::to_string(t.arena()) + " (expected < " +
                                std::to_string(arenas) + ")");
    }
    uint64_t arena_size = method.arena_sizes()->Get(t.arena());
    if (!fits(t.arena_offset(), nbytes, arena_size)) {
      return invalid(where, "planned tensor of " + std::to_string(nbytes) + " bytes at offset " +
                                std::to_string(t.arena_offset()) + " ends past arena " +
                                std::to_string(t.arena()) + " (" + std::to_string(arena_size) +
                                " bytes)");
    }
    if (t.arena_offset() % 8 != 0) {
      return invalid(
          where, "arena offset " + std::to_string(t.arena_offset()) + " is not a multiple of 8");
    }
  } else if (t.arena() < -1) {
    return invalid(where, "arena " + std::to_string(t.arena()));
  }
  return Status();
}

Status verify_value(const std::string& where, const schema::Value* value,
                    const schema::Program& program, const schema::Method& method) {
  // The verifier accepts a union whose type is set but whose table is absent.
  if (value == nullptr || value->kind_type() == schema::ValueKind::NONE ||
      value->kind() == nullptr) {
    return invalid(where, "has no kind");
  }
  switch (value->kind_type()) {
    case schema::ValueKind::StringValue:
      if (value->kind_as_StringValue()->value() == nullptr) return invalid(where, "string missing");
      break;
    case schema::ValueKind::TensorValue:
      return verify_tensor(where, *value->kind_as_TensorValue(), program, method);
    case schema::ValueKind::IntListValue:
      if (!aligned(value->kind_as_IntListValue()->values())) return invalid(where, "misaligned");
      break;
    case schema::ValueKind::DoubleListValue:
      if (!aligned(value->kind_as_DoubleListValue()->values())) return invalid(where, "misaligned");
      break;
    default:
      if (static_cast<int>(value->kind_type()) > static_cast<int>(schema::ValueKind::MAX)) {
        return invalid(where, "unknown value kind");
      }
  }
  return Status();
}

bool is_constant(const schema::Method& method, int index) {
  const auto* value = method.values()->Get(index);
  const auto* tensor = value->kind_as_TensorValue();
  return tensor != nullptr && tensor->constant_segment() >= 0;
}

Status verify_indices(const std::string& where, const char* what,
                      const flatbuffers::Vector<int32_t>* indices, const schema::Method& method,
                      bool allow_absent, bool writable) {
  size_t num_values = count(method.values());
  for (size_t i = 0; i < count(indices); ++i) {
    int32_t index = indices->Get(i);
    if (index == -1 && allow_absent) continue;
    if (index < 0 || static_cast<size_t>(index) >= num_values) {
      return invalid(where, std::string(what) + " " + std::to_string(i) + " is value " +
                                std::to_string(index) + " (expected 0.." +
                                std::to_string(static_cast<int64_t>(num_values) - 1) +
                                (allow_absent ? " or -1)" : ")"));
    }
    if (writable) {
      const auto* value = method.values()->Get(index);
      if (value->kind_type() != schema::ValueKind::TensorValue) {
        return invalid(where, std::string(what) + " " + std::to_string(i) + " (value " +
                                  std::to_string(index) + ") is not a tensor");
      }
      if (is_constant(method, index)) {
        return invalid(where, std::string(what) + " " + std::to_string(i) + " (value " +
                                  std::to_string(index) + ") is a constant (expected writable)");
      }
    }
  }
  return Status();
}

Status verify_names(const std::string& where, const char* what,
                    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* names,
                    size_t expected) {
  if (names == nullptr) return Status();
  if (names->size() != expected) {
    return invalid(where, std::to_string(names->size()) + " " + what + " names for " +
                              std::to_string(expected) + " " + what + "s");
  }
  for (const auto* name : *names) {
    if (name == nullptr) return invalid(where, std::string(what) + " name missing");
  }
  return Status();
}

// Value `index` as a jump condition: a bool scalar or a tensor (its element count is checked
// when the jump runs).
Status verify_condition(const std::string& where, int32_t index, const schema::Method& method) {
  size_t num_values = count(method.values());
  if (index < 0 || static_cast<size_t>(index) >= num_values) {
    return invalid(where, "condition is value " + std::to_string(index) + " (expected 0.." +
                              std::to_string(static_cast<int64_t>(num_values) - 1) + ")");
  }
  auto kind = method.values()->Get(index)->kind_type();
  if (kind != schema::ValueKind::BoolValue && kind != schema::ValueKind::TensorValue) {
    return invalid(where, "condition (value " + std::to_string(index) +
                              ") is neither a bool nor a tensor");
  }
  return Status();
}

Status verify_move(const std::string& where, const schema::MoveCall& call,
                   const schema::Method& method) {
  size_t num_values = count(method.values());
  for (int32_t index : {call.source(), call.destination()}) {
    if (index < 0 || static_cast<size_t>(index) >= num_values) {
      return invalid(where, "move names value " + std::to_string(index) + " (expected 0.." +
                                std::to_string(static_cast<int64_t>(num_values) - 1) + ")");
    }
  }
  const auto* source = method.values()->Get(call.source())->kind_as_TensorValue();
  const auto* destination = method.values()->Get(call.destination())->kind_as_TensorValue();
  if (source == nullptr || destination == nullptr) {
    return invalid(where, "move between value " + std::to_string(call.source()) + " and value " +
                              std::to_string(call.destination()) + " (expected two tensors)");
  }
  if (is_constant(method, call.destination())) {
    return invalid(where, "move destination (value " + std::to_string(call.destination()) +
                              ") is a constant (expected writable)");
  }
  if (source->dtype() != destination->dtype()) {
    return invalid(where, "move from dtype " + std::to_string(source->dtype()) + " to dtype " +
                              std::to_string(destination->dtype()) + " (expected the same)");
  }
  return Status();
}

Status verify_instruction(const std::string& where, const schema::Instruction* instruction,
                          const schema::Method& method, size_t position) {
  if (instruction == nullptr) return invalid(where, "missing");
  if (const auto* call = instruction->kind_as_JumpFalseCall()) {
    size_t num_instructions = count(method.instructions());
    if (call->destination() <= static_cast<int64_t>(position) ||
        static_cast<size_t>(call->destination()) > num_instructions) {
      return invalid(where, "jumps to instruction " + std::to_string(call->destination()) +
                                " (expected a later one, " + std::to_string(position + 1) + ".." +
                                std::to_string(num_instructions) + ")");
    }
    return verify_condition(where, call->condition(), method);
  }
  if (const auto* call = instruction->kind_as_MoveCall()) return verify_move(where, *call, method);
  if (const auto* call = instruction->kind_as_KernelCall()) {
    if (call->op() == nullptr || call->op()->size() == 0) return invalid(where, "op name missing");
    std::string w = where + " (" + call->op()->str() + ")";
    KILN_RETURN_IF_ERROR(verify_indices(w, "input", call->inputs(), method, true, false));
    KILN_RETURN_IF_ERROR(verify_indices(w, "output", call->outputs(), method, false, true));
    for (size_t i = 0; i < count(call->attributes()); ++i) {
      const auto* attribute = call->attributes()->Get(i);
      if (attribute->name() == nullptr) return invalid(w, "attribute name missing");
      if (attribute->value() < 0 ||
          static_cast<size_t>(attribute->value()) >= count(method.values())) {
        return invalid(w, "attribute '" + attribute->name()->str() + "' is value " +
                              std::to_string(attribute->value()) + " (out of range)");
      }
    }
    return Status();
  }
  if (const auto* call = instruction->kind_as_DelegateCall()) {
    if (call->delegate() < 0 ||
        static_cast<size_t>(call->delegate()) >= count(method.delegates())) {
      return invalid(where, "delegate " + std::to_string(call->delegate()) + " (expected < " +
                                std::to_string(count(method.delegates())) + ")");
    }
    KILN_RETURN_IF_ERROR(verify_indices(where, "input", call->inputs(), method, false, false));
    return verify_indices(where, "output", call->outputs(), method, false, true);
  }
  return invalid(where, "has no kind");
}

Status verify_method(const schema::Method& method, const schema::Program& program) {
  std::string where = "method '" + method.name()->str() + "'";
  if (!aligned(method.arena_sizes())) return invalid(where, "arena sizes are misaligned");
  for (size_t i = 0; i < count(method.values()); ++i) {
    KILN_RETURN_IF_ERROR(verify_value(where + " value " + std::to_string(i),
                                      method.values()->Get(i), program, method));
  }
  KILN_RETURN_IF_ERROR(verify_indices(where, "input", method.inputs(), method, false, false));
  KILN_RETURN_IF_ERROR(verify_indices(where, "output", method.outputs(), method, false, false));
  for (size_t i = 0; i < count(method.inputs()); ++i) {
    if (is_constant(method, method.inputs()->Get(i))) {
      return invalid(where, "input " + std::to_string(i) + " is a constant");
    }
  }
  KILN_RETURN_IF_ERROR(verify_names(where, "input", method.input_names(), count(method.inputs())));
  KILN_RETURN_IF_ERROR(
      verify_names(where, "output", method.output_names(), count(method.outputs())));
  for (size_t i = 0; i < count(method.delegates()); ++i) {
    const auto* delegate = method.delegates()->Get(i);
    std::string w = where + " delegate " + std::to_string(i);
    if (delegate == nullptr || delegate->backend_id() == nullptr ||
        delegate->backend_id()->size() == 0) {
      return invalid(w, "backend id missing");
    }
    int segment = delegate->processed_segment();
    if (segment < -1 || segment >= static_cast<int64_t>(count(program.segments()))) {
      return invalid(w, "processed segment " + std::to_string(segment) + " (expected -1.." +
                            std::to_string(static_cast<int64_t>(count(program.segments())) - 1) +
                            ")");
    }
    for (size_t j = 0; j < count(delegate->compile_specs()); ++j) {
      if (delegate->compile_specs()->Get(j)->key() == nullptr) {
        return invalid(w, "compile spec " + std::to_string(j) + " has no key");
      }
    }
  }
  for (size_t i = 0; i < count(method.instructions()); ++i) {
    KILN_RETURN_IF_ERROR(verify_instruction(where + " instruction " + std::to_string(i),
                                            method.instructions()->Get(i), method, i));
  }
  return Status();
}

}  // namespace

size_t tensor_value_nbytes(const schema::TensorValue& tensor) {
  size_t numel = 1;
  if (tensor.sizes() != nullptr) {
    for (int64_t size : *tensor.sizes()) numel *= static_cast<size_t>(size);
  }
  return numel * element_size(static_cast<ScalarType>(tensor.dtype()));
}

Status verify_program_contents(const schema::Program& program, const FileHeader& header) {
  if (!aligned(program.segments())) return invalid("segment table", "misaligned");
  for (size_t i = 0; i < count(program.segments()); ++i) {
    const auto* segment = program.segments()->Get(i);
    if (!fits(segment->offset(), segment->size(), header.segment_data_size)) {
      return invalid("segment " + std::to_string(i),
                     "range at offset " + std::to_string(segment->offset()) + " of " +
                         std::to_string(segment->size()) + " bytes ends past the segment area (" +
                         std::to_string(header.segment_data_size) + " bytes)");
    }
  }
  std::set<std::string> keys;
  for (size_t i = 0; i < count(program.named_data()); ++i) {
    const auto* entry = program.named_data()->Get(i);
    if (entry->key() == nullptr) return invalid("named data " + std::to_string(i), "key missing");
    if (entry->segment() >= count(program.segments())) {
      return invalid("named data '" + entry->key()->str() + "'",
                     "segment " + std::to_string(entry->segment()) + " (expected < " +
                         std::to_string(count(program.segments())) + ")");
    }
    if (!keys.insert(entry->key()->str()).second) {
      return invalid("named data '" + entry->key()->str() + "'", "key appears twice");
    }
  }
  std::set<std::string> names;
  for (size_t i = 0; i < count(program.methods()); ++i) {
    const auto* method = program.methods()->Get(i);
    if (method->name() == nullptr || method->name()->size() == 0) {
      return invalid("method " + std::to_string(i), "name missing");
    }
    if (!names.insert(method->name()->str()).second) {
      return invalid("method '" + method->name()->str() + "'", "name appears twice");
    }
    KILN_RETURN_IF_ERROR(verify_method(*method, program));
  }
  return Status();
}

}  // namespace kiln::runtime
