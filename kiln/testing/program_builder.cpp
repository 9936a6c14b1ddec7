#include <kiln/testing/program_builder.h>

#include <kiln/exporter/writer/program_writer.h>

#include <algorithm>
#include <cstring>

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

ProgramBuilder& ProgramBuilder::jump_false(const std::string& condition,
                                           const std::string& label) {
  NodeDef n;
  n.is_jump = true;
  n.inputs = {condition};
  n.label = label;
  current().nodes.push_back(std::move(n));
  return *this;
}

ProgramBuilder& ProgramBuilder::label(const std::string& name) {
  auto& m = current();
  if (!m.labels.emplace(name, static_cast<int>(m.nodes.size())).second && m.error.empty()) {
    m.error = "label '" + name + "' is placed twice";
  }
  return *this;
}

ProgramBuilder& ProgramBuilder::move(const std::string& source, const std::string& destination) {
  NodeDef n;
  n.is_move = true;
  n.inputs = {source};
  n.outputs = {destination};
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

Result<std::vector<uint8_t>> ProgramBuilder::build() const {
  exporter::ProgramSpec spec;
  spec.segments = segments_;
  spec.named_data = named_data_;
  spec.segment_alignment = alignment_;
  for (const auto& m : methods_) {
    std::string where = "build method '" + m.name + "'";
    if (!m.error.empty()) return Status(Error::InvalidArgument, where + ": " + m.error);
    exporter::MethodSpec method;
    method.name = m.name;
    uint64_t arena_size = 0;
    for (const auto& v : m.values) {
      exporter::ValueSpec value;
      value.is_tensor = v.is_tensor;
      value.scalar = v.scalar;
      value.tensor.dtype = v.dtype;
      value.tensor.sizes = v.sizes;
      value.tensor.dynamism = v.dynamism;
      value.tensor.dim_names = v.dim_names;
      value.tensor.constant_segment = v.constant_segment;
      if (v.is_tensor && v.planned) {
        uint64_t numel = 1;
        for (int64_t size : v.sizes) numel *= static_cast<uint64_t>(std::max<int64_t>(size, 0));
        value.tensor.arena = 0;
        value.tensor.arena_offset = arena_size;
        arena_size += (numel * runtime::element_size(v.dtype) + 63) / 64 * 64;
      }
      method.values.push_back(std::move(value));
    }
    if (arena_size > 0) method.arena_sizes.push_back(arena_size);
    auto indices = [&](const std::vector<std::string>& names,
                       std::vector<int>& out) -> Status {
      for (const auto& name : names) {
        int index = -1;
        for (size_t i = 0; i < m.values.size() && !name.empty(); ++i) {
          if (m.values[i].name == name) index = static_cast<int>(i);
        }
        if (index < 0 && !name.empty()) {
          return Status(Error::InvalidArgument, where + ": value '" + name + "' is not defined");
        }
        out.push_back(index);
      }
      return Status();
    };
    for (const auto& n : m.nodes) {
      exporter::InstructionSpec instruction;
      instruction.is_delegate = n.is_delegate;
      if (n.is_delegate) instruction.kind = exporter::InstructionSpec::Kind::Delegate;
      if (n.is_move) instruction.kind = exporter::InstructionSpec::Kind::Move;
      if (n.is_jump) {
        instruction.kind = exporter::InstructionSpec::Kind::JumpFalse;
        auto label = m.labels.find(n.label);
        if (label == m.labels.end()) {
          return Status(Error::InvalidArgument, where + ": label '" + n.label + "' is not placed");
        }
        instruction.destination = label->second;
      }
      instruction.op = n.op;
      instruction.delegate = n.delegate;
      KILN_RETURN_IF_ERROR(indices(n.inputs, instruction.inputs));
      KILN_RETURN_IF_ERROR(indices(n.outputs, instruction.outputs));
      for (const auto& [name, scalar] : n.attributes) {
        exporter::ValueSpec value;
        value.is_tensor = false;
        value.scalar = scalar;
        instruction.attributes.emplace_back(name, static_cast<int>(method.values.size()));
        method.values.push_back(std::move(value));
      }
      method.instructions.push_back(std::move(instruction));
    }
    KILN_RETURN_IF_ERROR(indices(m.inputs, method.inputs));
    KILN_RETURN_IF_ERROR(indices(m.outputs, method.outputs));
    method.input_names = m.inputs;
    method.output_names = m.outputs;
    for (const auto& d : m.delegates) {
      method.delegates.push_back(exporter::DelegateSpec{d.id, d.backend_id, d.processed,
                                                        d.processed_segment, d.compile_specs});
    }
    spec.methods.push_back(std::move(method));
  }
  return exporter::write_program(spec);
}

Status ProgramBuilder::build_to_file(const std::string& path) const {
  KILN_ASSIGN_OR_RETURN(auto bytes, build());
  return exporter::write_file_atomically(path, bytes);
}

}  // namespace kiln::testing
