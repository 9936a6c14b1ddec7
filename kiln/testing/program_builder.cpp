#include <kiln/testing/program_builder.h>

#include <kiln/runtime/executor/file_format.h>
#include <kiln/runtime/schema/program_generated.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace kiln::testing {

using runtime::EValue;
using runtime::Error;
using runtime::Result;
using runtime::Status;

std::vector<uint8_t> to_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

ProgramBuilder::ProgramBuilder() { methods_.push_back(MethodDef{"forward", {}, {}, {}, {}, {}, {}}); }

ProgramBuilder& ProgramBuilder::method(const std::string& name) {
  for (size_t i = 0; i < methods_.size(); ++i) {
    if (methods_[i].name == name) {
      current_ = i;
      return *this;
    }
  }
  // The implicit "forward" is replaced if nothing was put into it yet.
  if (methods_.size() == 1 && methods_[0].values.empty() && methods_[0].nodes.empty() &&
      methods_[0].name == "forward") {
    methods_[0].name = name;
    current_ = 0;
    return *this;
  }
  methods_.push_back(MethodDef{name, {}, {}, {}, {}, {}, {}});
  current_ = methods_.size() - 1;
  return *this;
}

ProgramBuilder::MethodDef& ProgramBuilder::current() { return methods_[current_]; }

ProgramBuilder::ValueDef* ProgramBuilder::find(MethodDef& m, const std::string& name) {
  for (auto& value : m.values) {
    if (value.name == name) return &value;
  }
  return nullptr;
}

int ProgramBuilder::add_segment(std::vector<uint8_t> bytes) {
  segments_.push_back(std::move(bytes));
  return static_cast<int>(segments_.size()) - 1;
}

ProgramBuilder& ProgramBuilder::input(const std::string& name, ScalarType dtype,
                                      std::vector<int64_t> sizes, ShapeDynamism dynamism,
                                      std::vector<std::string> dim_names) {
  tensor(name, dtype, std::move(sizes), dynamism);
  if (auto* v = find(current(), name)) v->dim_names = std::move(dim_names);
  current().inputs.push_back(name);
  return *this;
}

ProgramBuilder& ProgramBuilder::scalar_input(const std::string& name, EValue value) {
  auto& m = current();
  if (find(m, name) != nullptr && m.error.empty()) m.error = "value '" + name + "' defined twice";
  ValueDef v;
  v.name = name;
  v.is_tensor = false;
  v.scalar = std::move(value);
  m.values.push_back(std::move(v));
  m.inputs.push_back(name);
  return *this;
}

ProgramBuilder& ProgramBuilder::tensor(const std::string& name, ScalarType dtype,
                                       std::vector<int64_t> sizes, ShapeDynamism dynamism) {
  auto& m = current();
  if (find(m, name) != nullptr && m.error.empty()) m.error = "value '" + name + "' defined twice";
  ValueDef v;
  v.name = name;
  v.dtype = dtype;
  v.sizes = std::move(sizes);
  v.dynamism = dynamism;
  v.planned = dynamism != ShapeDynamism::Unbounded;
  m.values.push_back(std::move(v));
  return *this;
}

ProgramBuilder& ProgramBuilder::constant(const std::string& name, ScalarType dtype,
                                         std::vector<int64_t> sizes, std::vector<uint8_t> data) {
  tensor(name, dtype, std::move(sizes));
  auto* v = find(current(), name);
  v->planned = false;
  v->constant_segment = add_segment(std::move(data));
  return *this;
}

ProgramBuilder& ProgramBuilder::constant_f32(const std::string& name, std::vector<int64_t> sizes,
                                             const std::vector<float>& data) {
  return constant(name, F32, std::move(sizes), to_bytes(data));
}

ProgramBuilder& ProgramBuilder::node(const std::string& op, std::vector<std::string> inputs,
                                     std::vector<std::string> outputs,
                                     std::vector<std::pair<std::string, EValue>> attributes) {
  auto& m = current();
  for (const auto& output : outputs) {
    if (find(m, output) != nullptr) continue;
    const ValueDef* first = inputs.empty() || inputs[0].empty() ? nullptr : find(m, inputs[0]);
    if (first == nullptr || !first->is_tensor) {
      if (m.error.empty()) m.error = "output '" + output + "' of " + op + " needs a declaration";
      continue;
    }
    ValueDef copy = *first;
    tensor(output, copy.dtype, copy.sizes, copy.dynamism);
  }
  NodeDef n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attributes = std::move(attributes);
  current().nodes.push_back(std::move(n));
  return *this;
}

ProgramBuilder& ProgramBuilder::delegate(
    const std::string& backend_id, std::vector<uint8_t> processed, std::vector<std::string> inputs,
    std::vector<std::string> outputs,
    std::vector<std::pair<std::string, std::vector<uint8_t>>> compile_specs) {
  auto& m = current();
  DelegateDef d;
  d.id = m.name + "_" + std::to_string(m.delegates.size());
  d.backend_id = backend_id;
  d.processed = std::move(processed);
  d.compile_specs = std::move(compile_specs);
  m.delegates.push_back(std::move(d));
  NodeDef n;
  n.is_delegate = true;
  n.delegate = static_cast<int>(m.delegates.size()) - 1;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  for (const auto& output : n.outputs) {
    if (find(m, output) == nullptr && !n.inputs.empty()) {
      if (const ValueDef* first = find(m, n.inputs[0])) {
        ValueDef copy = *first;
        tensor(output, copy.dtype, copy.sizes, copy.dynamism);
      }
    }
  }
  current().nodes.push_back(std::move(n));
  return *this;
}

ProgramBuilder& ProgramBuilder::delegate_segment(const std::string& backend_id,
                                                 std::vector<uint8_t> processed,
                                                 std::vector<std::string> inputs,
                                                 std::vector<std::string> outputs) {
  delegate(backend_id, {}, std::move(inputs), std::move(outputs));
  current().delegates.back().processed_segment = add_segment(std::move(processed));
  return *this;
}

ProgramBuilder& ProgramBuilder::output(const std::string& name) {
  current().outputs.push_back(name);
  return *this;
}

ProgramBuilder& ProgramBuilder::named_data(const std::string& key, std::vector<uint8_t> bytes) {
  named_data_.emplace_back(key, add_segment(std::move(bytes)));
  return *this;
}

ProgramBuilder& ProgramBuilder::segment_alignment(uint32_t alignment) {
  alignment_ = alignment;
  return *this;
}

namespace {

namespace fb = ::kiln::schema;

flatbuffers::Offset<fb::Value> write_scalar(flatbuffers::FlatBufferBuilder& b, const EValue& v) {
  using runtime::Tag;
  switch (v.tag()) {
    case Tag::Bool:
      return fb::CreateValue(b, fb::ValueKind::BoolValue, fb::CreateBoolValue(b, v.to_bool()).Union());
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

}  // namespace

Result<std::vector<uint8_t>> ProgramBuilder::build() const {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Method>> methods;
  for (const auto& m : methods_) {
    std::string where = "build method '" + m.name + "'";
    if (!m.error.empty()) return Status(Error::InvalidArgument, where + ": " + m.error);
    // Attributes become extra values after the named ones.
    std::vector<EValue> attribute_values;
    std::vector<flatbuffers::Offset<fb::Value>> values;
    uint64_t arena_size = 0;
    auto index_of = [&](const std::string& name) -> int {
      for (size_t i = 0; i < m.values.size(); ++i) {
        if (m.values[i].name == name) return static_cast<int>(i);
      }
      return -2;
    };
    for (const auto& v : m.values) {
      if (!v.is_tensor) {
        values.push_back(write_scalar(b, v.scalar));
        continue;
      }
      int arena = -1;
      uint64_t offset = 0;
      if (v.planned) {
        uint64_t numel = 1;
        for (int64_t s : v.sizes) numel *= static_cast<uint64_t>(std::max<int64_t>(s, 0));
        arena = 0;
        offset = arena_size;
        arena_size += (numel * runtime::element_size(v.dtype) + 63) / 64 * 64;
      }
      std::vector<flatbuffers::Offset<flatbuffers::String>> dim_names;
      for (const auto& name : v.dim_names) dim_names.push_back(b.CreateString(name));
      auto tensor = fb::CreateTensorValue(
          b, static_cast<int8_t>(v.dtype), b.CreateVector(v.sizes), static_cast<int8_t>(v.dynamism),
          v.dim_names.empty() ? 0 : b.CreateVector(dim_names), v.constant_segment, 0, arena, offset);
      values.push_back(fb::CreateValue(b, fb::ValueKind::TensorValue, tensor.Union()));
    }
    auto indices = [&](const std::vector<std::string>& names,
                       std::vector<int32_t>& out) -> Status {
      for (const auto& name : names) {
        if (name.empty()) {
          out.push_back(-1);
          continue;
        }
        int index = index_of(name);
        if (index < 0) {
          return Status(Error::InvalidArgument, where + ": value '" + name + "' is not defined");
        }
        out.push_back(index);
      }
      return Status();
    };
    std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
    for (const auto& n : m.nodes) {
      std::vector<int32_t> ins, outs;
      KILN_RETURN_IF_ERROR(indices(n.inputs, ins));
      KILN_RETURN_IF_ERROR(indices(n.outputs, outs));
      if (n.is_delegate) {
        auto call = fb::CreateDelegateCallDirect(b, n.delegate, &ins, &outs);
        instructions.push_back(
            fb::CreateInstruction(b, fb::InstructionKind::DelegateCall, call.Union()));
        continue;
      }
      std::vector<flatbuffers::Offset<fb::Attribute>> attributes;
      for (const auto& [name, value] : n.attributes) {
        int index = static_cast<int>(values.size());
        values.push_back(write_scalar(b, value));
        attributes.push_back(fb::CreateAttributeDirect(b, name.c_str(), index));
      }
      auto call = fb::CreateKernelCallDirect(b, n.op.c_str(), &ins, &outs, &attributes);
      instructions.push_back(fb::CreateInstruction(b, fb::InstructionKind::KernelCall, call.Union()));
    }
    std::vector<int32_t> ins, outs;
    KILN_RETURN_IF_ERROR(indices(m.inputs, ins));
    KILN_RETURN_IF_ERROR(indices(m.outputs, outs));
    std::vector<flatbuffers::Offset<flatbuffers::String>> in_names, out_names;
    for (const auto& name : m.inputs) in_names.push_back(b.CreateString(name));
    for (const auto& name : m.outputs) out_names.push_back(b.CreateString(name));
    std::vector<flatbuffers::Offset<fb::Delegate>> delegates;
    for (const auto& d : m.delegates) {
      std::vector<flatbuffers::Offset<fb::CompileSpec>> specs;
      for (const auto& [key, value] : d.compile_specs) {
        specs.push_back(fb::CreateCompileSpecDirect(b, key.c_str(), &value));
      }
      delegates.push_back(fb::CreateDelegateDirect(b, d.id.c_str(), d.backend_id.c_str(),
                                                   &d.processed, d.processed_segment, &specs));
    }
    std::vector<uint64_t> arenas;
    if (arena_size > 0) arenas.push_back(arena_size);
    methods.push_back(fb::CreateMethodDirect(b, m.name.c_str(), &values, &ins, &outs, &in_names,
                                             &out_names, &instructions, &delegates, &arenas));
  }
  // Segments: each aligned within the segment area.
  std::vector<fb::Segment> segments;
  uint64_t cursor = 0;
  for (const auto& s : segments_) {
    segments.emplace_back(cursor, s.size());
    cursor += (s.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  std::vector<flatbuffers::Offset<fb::NamedData>> named;
  for (const auto& [key, segment] : named_data_) {
    named.push_back(fb::CreateNamedDataDirect(b, key.c_str(), static_cast<uint32_t>(segment)));
  }
  auto program = fb::CreateProgramDirect(b, runtime::FileHeader::kFormatVersion, &methods,
                                         &segments, &named);
  fb::FinishProgramBuffer(b, program);

  runtime::FileHeader header;
  header.segment_alignment = alignment_;
  header.program_offset = runtime::FileHeader::kSize + 16;  // keeps 16-byte alignment
  header.program_size = b.GetSize();
  uint64_t end = header.program_offset + header.program_size;
  header.segment_base_offset = (end + alignment_ - 1) / alignment_ * alignment_;
  header.segment_data_size = cursor;
  std::vector<uint8_t> file(header.segment_base_offset + cursor, 0);
  header.encode(file.data());
  std::memcpy(file.data() + header.program_offset, b.GetBufferPointer(), b.GetSize());
  for (size_t i = 0; i < segments_.size(); ++i) {
    if (!segments_[i].empty()) {
      std::memcpy(file.data() + header.segment_base_offset + segments[i].offset(),
                  segments_[i].data(), segments_[i].size());
    }
  }
  return file;
}

Status ProgramBuilder::build_to_file(const std::string& path) const {
  KILN_ASSIGN_OR_RETURN(auto bytes, build());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Status(Error::AccessFailed, "write program '" + path + "': write failed");
  return Status();
}

}  // namespace kiln::testing
