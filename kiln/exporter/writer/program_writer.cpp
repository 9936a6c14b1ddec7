#include <kiln/exporter/writer/program_writer.h>

#include <kiln/runtime/executor/file_format.h>
#include <kiln/runtime/schema/program_generated.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace kiln::exporter {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Status;
namespace fb = ::kiln::schema;

namespace {

flatbuffers::Offset<fb::Value> write_scalar(flatbuffers::FlatBufferBuilder& b, const EValue& v) {
  using runtime::Tag;
  switch (v.tag()) {
    case Tag::Bool:
      return fb::CreateValue(b, fb::ValueKind::BoolValue,
                             fb::CreateBoolValue(b, v.to_bool()).Union());
    case Tag::Int:
      return fb::CreateValue(b, fb::ValueKind::IntValue, fb::CreateIntValue(b, v.to_int()).Union());
    case Tag::Double:
      return fb::CreateValue(b, fb::ValueKind::DoubleValue,
                             fb::CreateDoubleValue(b, v.to_double()).Union());
    case Tag::String:
      return fb::CreateValue(b, fb::ValueKind::StringValue,
                             fb::CreateStringValueDirect(b, v.to_string().c_str()).Union());
    case Tag::IntList:
      return fb::CreateValue(b, fb::ValueKind::IntListValue,
                             fb::CreateIntListValueDirect(b, &v.to_int_list()).Union());
    case Tag::DoubleList:
      return fb::CreateValue(b, fb::ValueKind::DoubleListValue,
                             fb::CreateDoubleListValueDirect(b, &v.to_double_list()).Union());
    default:
      return fb::CreateValue(b, fb::ValueKind::NoneValue, fb::CreateNoneValue(b).Union());
  }
}

Status check_index(const std::string& where, const char* what, int index, size_t limit,
                   bool allow_absent) {
  if ((index == -1 && allow_absent) || (index >= 0 && static_cast<size_t>(index) < limit)) {
    return Status();
  }
  return Status(Error::InvalidArgument, where + ": " + what + " index " + std::to_string(index) +
                                            " (expected 0.." + std::to_string(limit) + ")");
}

Status check_method(const MethodSpec& m, size_t num_segments) {
  std::string where = "write method '" + m.name + "'";
  size_t n = m.values.size();
  for (int i : m.inputs) KILN_RETURN_IF_ERROR(check_index(where, "input", i, n, false));
  for (int i : m.outputs) KILN_RETURN_IF_ERROR(check_index(where, "output", i, n, false));
  for (size_t k = 0; k < m.instructions.size(); ++k) {
    const InstructionSpec& ins = m.instructions[k];
    if (ins.kind == InstructionSpec::Kind::JumpFalse) {
      if (ins.inputs.size() != 1 || !ins.outputs.empty()) {
        return Status(Error::InvalidArgument,
                      where + ": jump " + std::to_string(k) + " needs exactly one condition");
      }
      if (ins.destination <= static_cast<int>(k) ||
          static_cast<size_t>(ins.destination) > m.instructions.size()) {
        return Status(Error::InvalidArgument,
                      where + ": jump " + std::to_string(k) + " to " +
                          std::to_string(ins.destination) + " (expected a later instruction, " +
                          std::to_string(k + 1) + ".." + std::to_string(m.instructions.size()) +
                          ")");
      }
    }
    if (ins.kind == InstructionSpec::Kind::Move && (ins.inputs.size() != 1 || ins.outputs.size() != 1)) {
      return Status(Error::InvalidArgument,
                    where + ": move " + std::to_string(k) + " needs one source and one destination");
    }
    for (int i : ins.inputs) KILN_RETURN_IF_ERROR(check_index(where, "input", i, n, true));
    for (int i : ins.outputs) KILN_RETURN_IF_ERROR(check_index(where, "output", i, n, false));
    for (const auto& a : ins.attributes) {
      KILN_RETURN_IF_ERROR(check_index(where, "attribute", a.second, n, false));
    }
    if (ins.is_delegate) {
      KILN_RETURN_IF_ERROR(check_index(where, "delegate", ins.delegate, m.delegates.size(), false));
    }
  }
  for (const auto& v : m.values) {
    if (!v.is_tensor) continue;
    if (v.tensor.constant_segment >= 0) {
      KILN_RETURN_IF_ERROR(
          check_index(where, "constant segment", v.tensor.constant_segment, num_segments, false));
    }
    if (v.tensor.arena >= 0) {
      KILN_RETURN_IF_ERROR(check_index(where, "arena", v.tensor.arena, m.arena_sizes.size(), false));
    }
  }
  return Status();
}

flatbuffers::Offset<fb::Method> write_method(flatbuffers::FlatBufferBuilder& b,
                                             const MethodSpec& m) {
  std::vector<flatbuffers::Offset<fb::Value>> values;
  for (const auto& v : m.values) {
    if (!v.is_tensor) {
      values.push_back(write_scalar(b, v.scalar));
      continue;
    }
    const TensorSpec& t = v.tensor;
    std::vector<flatbuffers::Offset<flatbuffers::String>> dim_names;
    for (const auto& name : t.dim_names) dim_names.push_back(b.CreateString(name));
    auto tensor = fb::CreateTensorValue(
        b, static_cast<int8_t>(t.dtype), b.CreateVector(t.sizes), static_cast<int8_t>(t.dynamism),
        t.dim_names.empty() ? 0 : b.CreateVector(dim_names), t.constant_segment, t.constant_offset,
        t.arena, t.arena_offset);
    values.push_back(fb::CreateValue(b, fb::ValueKind::TensorValue, tensor.Union()));
  }
  std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
  for (const auto& ins : m.instructions) {
    if (ins.kind == InstructionSpec::Kind::JumpFalse) {
      auto call = fb::CreateJumpFalseCall(b, ins.inputs.empty() ? -1 : ins.inputs[0],
                                          ins.destination);
      instructions.push_back(
          fb::CreateInstruction(b, fb::InstructionKind::JumpFalseCall, call.Union()));
      continue;
    }
    if (ins.kind == InstructionSpec::Kind::Move) {
      auto call = fb::CreateMoveCall(b, ins.inputs.empty() ? -1 : ins.inputs[0],
                                     ins.outputs.empty() ? -1 : ins.outputs[0]);
      instructions.push_back(fb::CreateInstruction(b, fb::InstructionKind::MoveCall, call.Union()));
      continue;
    }
    if (ins.is_delegate || ins.kind == InstructionSpec::Kind::Delegate) {
      auto call = fb::CreateDelegateCallDirect(b, ins.delegate, &ins.inputs, &ins.outputs);
      instructions.push_back(
          fb::CreateInstruction(b, fb::InstructionKind::DelegateCall, call.Union()));
      continue;
    }
    std::vector<flatbuffers::Offset<fb::Attribute>> attributes;
    for (const auto& [name, index] : ins.attributes) {
      attributes.push_back(fb::CreateAttributeDirect(b, name.c_str(), index));
    }
    auto call = fb::CreateKernelCallDirect(b, ins.op.c_str(), &ins.inputs, &ins.outputs,
                                           &attributes);
    instructions.push_back(fb::CreateInstruction(b, fb::InstructionKind::KernelCall, call.Union()));
  }
  auto strings = [&](const std::vector<std::string>& names) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> out;
    for (const auto& name : names) out.push_back(b.CreateString(name));
    return out;
  };
  auto in_names = strings(m.input_names);
  auto out_names = strings(m.output_names);
  std::vector<flatbuffers::Offset<fb::Delegate>> delegates;
  for (const auto& d : m.delegates) {
    std::vector<flatbuffers::Offset<fb::CompileSpec>> specs;
    for (const auto& [key, value] : d.compile_specs) {
      specs.push_back(fb::CreateCompileSpecDirect(b, key.c_str(), &value));
    }
    delegates.push_back(fb::CreateDelegateDirect(b, d.id.c_str(), d.backend_id.c_str(),
                                                 &d.processed, d.processed_segment, &specs));
  }
  return fb::CreateMethodDirect(b, m.name.c_str(), &values, &m.inputs, &m.outputs,
                                m.input_names.empty() ? nullptr : &in_names,
                                m.output_names.empty() ? nullptr : &out_names, &instructions,
                                &delegates, &m.arena_sizes);
}

}  // namespace

Result<std::vector<uint8_t>> write_program(const ProgramSpec& spec) {
  uint32_t alignment = spec.segment_alignment;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Status(Error::InvalidArgument, "write program: segment alignment " +
                                              std::to_string(alignment) +
                                              " (expected a power of two)");
  }
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Method>> methods;
  for (const auto& m : spec.methods) {
    KILN_RETURN_IF_ERROR(check_method(m, spec.segments.size()));
    methods.push_back(write_method(b, m));
  }
  std::vector<fb::Segment> segments;
  uint64_t cursor = 0;
  for (const auto& s : spec.segments) {
    segments.emplace_back(cursor, s.size());
    cursor += (s.size() + alignment - 1) / alignment * alignment;
  }
  std::vector<flatbuffers::Offset<fb::NamedData>> named;
  for (const auto& [key, segment] : spec.named_data) {
    KILN_RETURN_IF_ERROR(
        check_index("write named data '" + key + "'", "segment", segment, spec.segments.size(), false));
    named.push_back(fb::CreateNamedDataDirect(b, key.c_str(), static_cast<uint32_t>(segment)));
  }
  auto program = fb::CreateProgramDirect(b, runtime::FileHeader::kFormatVersion, &methods,
                                         &segments, &named);
  fb::FinishProgramBuffer(b, program);

  runtime::FileHeader header;
  header.segment_alignment = alignment;
  header.program_offset = runtime::FileHeader::kSize + 16;  // 16-byte aligned flatbuffer
  header.program_size = b.GetSize();
  uint64_t end = header.program_offset + header.program_size;
  header.segment_base_offset = (end + alignment - 1) / alignment * alignment;
  header.segment_data_size = cursor;
  std::vector<uint8_t> file(header.segment_base_offset + cursor, 0);
  header.encode(file.data());
  std::memcpy(file.data() + header.program_offset, b.GetBufferPointer(), b.GetSize());
  for (size_t i = 0; i < spec.segments.size(); ++i) {
    if (spec.segments[i].empty()) continue;
    std::memcpy(file.data() + header.segment_base_offset + segments[i].offset(),
                spec.segments[i].data(), spec.segments[i].size());
  }
  return file;
}

Status write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status(Error::AccessFailed, "write file '" + path + "': " + std::strerror(errno));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string reason = std::strerror(errno);
      ::close(fd);
      ::unlink(temp.c_str());
      return Status(Error::AccessFailed, "write file '" + path + "': " + reason);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    return Status(Error::AccessFailed, "write file '" + path + "': " + reason);
  }
  return Status();
}

Status write_program_file(const ProgramSpec& spec, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto bytes, write_program(spec));
  return write_file_atomically(path, bytes);
}

}  // namespace kiln::exporter
