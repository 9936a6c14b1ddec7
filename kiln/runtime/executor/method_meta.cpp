#include <kiln/runtime/executor/method_meta.h>
#include <kiln/runtime/executor/method_meta_builder.h>

namespace kiln::runtime {

uint64_t MethodMeta::planned_bytes() const {
  uint64_t total = 0;
  for (uint64_t size : arena_sizes) total += size;
  return total;
}

namespace {

Tag tag_of(schema::ValueKind kind) {
  switch (kind) {
    case schema::ValueKind::BoolValue: return Tag::Bool;
    case schema::ValueKind::IntValue: return Tag::Int;
    case schema::ValueKind::DoubleValue: return Tag::Double;
    case schema::ValueKind::StringValue: return Tag::String;
    case schema::ValueKind::IntListValue: return Tag::IntList;
    case schema::ValueKind::DoubleListValue: return Tag::DoubleList;
    case schema::ValueKind::TensorValue: return Tag::Tensor;
    default: return Tag::None;
  }
}

TensorMeta value_meta(const schema::Method& method, int index, const std::string& name) {
  TensorMeta meta;
  meta.name = name;
  const auto* value = method.values()->Get(index);
  meta.tag = tag_of(value->kind_type());
  if (const auto* tensor = value->kind_as_TensorValue()) {
    meta.dtype = static_cast<ScalarType>(tensor->dtype());
    if (tensor->sizes() != nullptr) meta.sizes.assign(tensor->sizes()->begin(), tensor->sizes()->end());
    meta.dim_names.assign(meta.sizes.size(), "");
    if (tensor->dim_names() != nullptr) {
      for (size_t d = 0; d < tensor->dim_names()->size(); ++d) {
        meta.dim_names[d] = tensor->dim_names()->Get(d)->str();
      }
    }
    meta.dynamism = static_cast<ShapeDynamism>(tensor->dynamism());
  }
  return meta;
}

}  // namespace

MethodMeta make_method_meta(const schema::Method& method, const schema::Program& program) {
  MethodMeta meta;
  meta.name = method.name()->str();
  if (method.inputs() != nullptr) {
    for (size_t i = 0; i < method.inputs()->size(); ++i) {
      std::string name = method.input_names() != nullptr ? method.input_names()->Get(i)->str()
                                                         : "input_" + std::to_string(i);
      meta.inputs.push_back(value_meta(method, method.inputs()->Get(i), name));
    }
  }
  if (method.outputs() != nullptr) {
    for (size_t i = 0; i < method.outputs()->size(); ++i) {
      std::string name = method.output_names() != nullptr ? method.output_names()->Get(i)->str()
                                                          : "output_" + std::to_string(i);
      meta.outputs.push_back(value_meta(method, method.outputs()->Get(i), name));
    }
  }
  if (method.delegates() != nullptr) {
    for (size_t i = 0; i < method.delegates()->size(); ++i) {
      const auto* delegate = method.delegates()->Get(i);
      DelegateMeta d;
      d.id = delegate->id() != nullptr && delegate->id()->size() > 0
                 ? delegate->id()->str()
                 : meta.name + "_" + std::to_string(i);
      d.backend_id = delegate->backend_id()->str();
      if (delegate->processed_segment() >= 0) {
        d.processed_size = program.segments()->Get(delegate->processed_segment())->size();
      } else {
        d.processed_size = delegate->processed() != nullptr ? delegate->processed()->size() : 0;
      }
      meta.delegates.push_back(std::move(d));
    }
  }
  if (method.instructions() != nullptr) {
    meta.num_instructions = method.instructions()->size();
    for (const auto* instruction : *method.instructions()) {
      if (const auto* call = instruction->kind_as_KernelCall()) {
        meta.kernel_ops.push_back(call->op()->str());
      }
    }
  }
  if (method.arena_sizes() != nullptr) {
    meta.arena_sizes.assign(method.arena_sizes()->begin(), method.arena_sizes()->end());
  }
  return meta;
}

}  // namespace kiln::runtime
