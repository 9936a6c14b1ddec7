// Program::load_method: turns a verified schema::Method into a runnable Method.
#include <kiln/runtime/backend/option_schema.h>
#include <kiln/runtime/backend/registry.h>
#include <kiln/runtime/executor/method_internal.h>
#include <kiln/runtime/executor/method_meta_builder.h>
#include <kiln/runtime/executor/program.h>
#include <kiln/runtime/executor/program_verify.h>
#include <kiln/runtime/schema/program_generated.h>

#include <algorithm>

namespace kiln::runtime {

namespace {

std::string join_quoted(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "'" : ", '") + item + "'";
  return out.empty() ? "none" : out;
}

Result<EValue> make_scalar_value(const schema::Value& value) {
  switch (value.kind_type()) {
    case schema::ValueKind::NoneValue: return EValue();
    case schema::ValueKind::BoolValue: return EValue(value.kind_as_BoolValue()->value());
    case schema::ValueKind::IntValue:
      return EValue(static_cast<int64_t>(value.kind_as_IntValue()->value()));
    case schema::ValueKind::DoubleValue: return EValue(value.kind_as_DoubleValue()->value());
    case schema::ValueKind::StringValue:
      return EValue(value.kind_as_StringValue()->value()->str());
    case schema::ValueKind::IntListValue: {
      std::vector<int64_t> ints;
      if (const auto* v = value.kind_as_IntListValue()->values()) ints.assign(v->begin(), v->end());
      return EValue(std::move(ints));
    }
    case schema::ValueKind::DoubleListValue: {
      std::vector<double> doubles;
      if (const auto* v = value.kind_as_DoubleListValue()->values()) {
        doubles.assign(v->begin(), v->end());
      }
      return EValue(std::move(doubles));
    }
    default: return Status(Error::InvalidProgram, "value has an unknown kind");
  }
}

// Options given for backends nobody registered are typos or missing link dependencies; say so
// instead of ignoring them. Options of registered backends are checked against their specs.
Status check_options(const LoadBackendOptionsMap& options) {
  for (const auto& id : options.backend_ids()) {
    auto backend = get_backend(id);
    if (backend == nullptr) {
      auto registered = registered_backends();
      std::string hint;
      if (auto near = closest_match(id, registered)) hint = "; did you mean '" + *near + "'?";
      return Status(Error::InvalidArgument, "load backend options: backend '" + id +
                                                "' is not registered (registered: " +
                                                join_quoted(registered) + ")" + hint);
    }
    KILN_RETURN_IF_ERROR(validate_options(id, backend->option_specs(), options.get_options(id)));
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<Method>> Program::load_method(std::string_view name,
                                                     const LoadBackendOptionsMap* options) const {
  const schema::Method* fb = nullptr;
  if (root_->methods() != nullptr) {
    for (const auto* m : *root_->methods()) {
      if (m->name()->string_view() == name) fb = m;
    }
  }
  if (fb == nullptr) return method_meta(name).status().with_context("load method");
  std::string where = "load method '" + std::string(name) + "'";
  if (options != nullptr) KILN_RETURN_IF_ERROR(check_options(*options).with_context(where));

  std::unique_ptr<Method> method(new Method());
  method->program_ = shared_from_this();
  method->meta_ = make_method_meta(*fb, *root_);

  // Planned memory.
  if (fb->arena_sizes() != nullptr) {
    for (uint64_t size : *fb->arena_sizes()) {
      auto arena = allocate_aligned(size);
      if (!arena.ok()) return arena.status().with_context(where + ": planned memory");
      method->arenas_.push_back(std::move(arena).get());
      method->arena_sizes_.push_back(static_cast<size_t>(size));
    }
  }

  // Values. The vector never reallocates after this, so instructions may point into it.
  size_t num_values = fb->values() == nullptr ? 0 : fb->values()->size();
  method->values_.resize(num_values);
  method->dynamic_.resize(num_values);
  method->dynamic_sizes_.resize(num_values, 0);
  for (size_t i = 0; i < num_values; ++i) {
    const auto* value = fb->values()->Get(i);
    const auto* t = value->kind_as_TensorValue();
    if (t == nullptr) {
      auto scalar = make_scalar_value(*value);
      if (!scalar.ok()) return scalar.status().with_context(where + " value " + std::to_string(i));
      method->values_[i] = std::move(scalar).get();
      continue;
    }
    std::vector<int64_t> sizes;
    if (t->sizes() != nullptr) sizes.assign(t->sizes()->begin(), t->sizes()->end());
    size_t nbytes = tensor_value_nbytes(*t);
    void* data = nullptr;
    if (t->constant_segment() >= 0) {
      KILN_ASSIGN_OR_RETURN(const FreeableBuffer* segment, this->segment(t->constant_segment()));
      // Kernels never write inputs, and verification forbids constants as outputs.
      data = const_cast<uint8_t*>(static_cast<const uint8_t*>(segment->data()) +
                                  t->constant_offset());
      // A corrupt offset, or a segment placed at an odd file offset, could leave the data
      // misaligned for its dtype; kernels read it as typed arrays.
      size_t alignment = element_size(static_cast<ScalarType>(t->dtype()));
      if (alignment > 1 && reinterpret_cast<uintptr_t>(data) % alignment != 0) {
        return Status(Error::InvalidProgram,
                      where + " value " + std::to_string(i) + ": constant data at offset " +
                          std::to_string(t->constant_offset()) + " of segment " +
                          std::to_string(t->constant_segment()) + " is not aligned to its " +
                          std::to_string(alignment) + "-byte elements");
      }
    } else if (t->arena() >= 0) {
      data = method->arenas_[t->arena()].get() + t->arena_offset();
    } else if (nbytes > 0) {
      auto storage = allocate_aligned(nbytes);
      if (!storage.ok()) {
        return storage.status().with_context(where + " value " + std::to_string(i));
      }
      method->dynamic_[i] = std::move(storage).get();
      method->dynamic_sizes_[i] = nbytes;
      method->dynamic_indices_.push_back(i);
      data = method->dynamic_[i].get();
    }
    method->values_[i] = EValue(Tensor(static_cast<ScalarType>(t->dtype()), std::move(sizes), data,
                                       static_cast<ShapeDynamism>(t->dynamism()), nbytes));
  }
  if (fb->inputs() != nullptr) {
    for (int32_t index : *fb->inputs()) method->inputs_.push_back(static_cast<size_t>(index));
  }
  if (fb->outputs() != nullptr) {
    for (int32_t index : *fb->outputs()) method->outputs_.push_back(static_cast<size_t>(index));
  }

  // Kernels: report every missing operator at once.
  std::vector<std::string> missing;
  size_t num_instructions = fb->instructions() == nullptr ? 0 : fb->instructions()->size();
  method->instructions_.resize(num_instructions);
  Method* raw = method.get();
  for (size_t i = 0; i < num_instructions; ++i) {
    const auto* instruction = fb->instructions()->Get(i);
    auto& out = method->instructions_[i];
    auto pointers = [&](const flatbuffers::Vector<int32_t>* indices) {
      std::vector<EValue*> result;
      if (indices == nullptr) return result;
      for (int32_t index : *indices) {
        result.push_back(index < 0 ? &raw->none_ : &raw->values_[static_cast<size_t>(index)]);
      }
      return result;
    };
    if (const auto* call = instruction->kind_as_KernelCall()) {
      out.name = call->op()->str();
      out.kernel = get_kernel(out.name);
      if (out.kernel == nullptr &&
          std::find(missing.begin(), missing.end(), out.name) == missing.end()) {
        missing.push_back(out.name);
      }
      out.inputs = pointers(call->inputs());
      out.outputs = pointers(call->outputs());
      std::vector<std::pair<std::string, EValue>> attributes;
      if (call->attributes() != nullptr) {
        for (const auto* attribute : *call->attributes()) {
          attributes.emplace_back(attribute->name()->str(),
                                  raw->values_[static_cast<size_t>(attribute->value())]);
        }
      }
      out.attributes = Attributes(std::move(attributes));
      out.context = std::make_unique<KernelContext>(
          out.name, [raw](EValue& v, Span<const int64_t> s) { return raw->resize_value(v, s); });
    } else if (const auto* jump = instruction->kind_as_JumpFalseCall()) {
      out.kind = Method::Instruction::Kind::JumpFalse;
      out.name = "jump";
      out.destination = static_cast<size_t>(jump->destination());
      out.inputs = {&raw->values_[static_cast<size_t>(jump->condition())]};
    } else if (const auto* move = instruction->kind_as_MoveCall()) {
      out.kind = Method::Instruction::Kind::Move;
      out.name = "move";
      out.inputs = {&raw->values_[static_cast<size_t>(move->source())]};
      out.outputs = {&raw->values_[static_cast<size_t>(move->destination())]};
    } else {
      const auto* delegate_call = instruction->kind_as_DelegateCall();
      out.kind = Method::Instruction::Kind::Delegate;
      out.delegate = static_cast<size_t>(delegate_call->delegate());
      out.name = method->meta_.delegates[out.delegate].id;
      out.inputs = pointers(delegate_call->inputs());
      out.outputs = pointers(delegate_call->outputs());
    }
  }
  method->find_read_only_inputs();
  if (!missing.empty()) {
    std::string list;
    for (const auto& op : missing) list += (list.empty() ? "" : ", ") + op;
    return Status(Error::OperatorMissing, where + ": no kernel registered for " +
                                              std::to_string(missing.size()) + " operator" +
                                              (missing.size() == 1 ? "" : "s") + ": " + list);
  }

  // Delegates, in order. On failure the Method's destructor destroys the ones already made.
  size_t num_delegates = fb->delegates() == nullptr ? 0 : fb->delegates()->size();
  for (size_t i = 0; i < num_delegates; ++i) {
    const auto* d = fb->delegates()->Get(i);
    const DelegateMeta& meta = method->meta_.delegates[i];
    std::string which = where + ": delegate '" + meta.id + "' (backend '" + meta.backend_id + "')";
    auto backend = get_backend(meta.backend_id);
    if (backend == nullptr) {
      return Status(Error::BackendNotFound,
                    which + ": backend is not registered (registered: " +
                        join_quoted(registered_backends()) + ")");
    }
    if (!backend->is_available()) {
      return Status(Error::DelegateInvalidCompatibility,
                    which + ": backend is not available on this machine");
    }
    Span<const BackendOption> backend_options;
    if (options != nullptr) backend_options = options->get_options(meta.backend_id);
    FreeableBuffer processed;
    if (d->processed_segment() >= 0) {
      KILN_ASSIGN_OR_RETURN(const FreeableBuffer* segment, this->segment(d->processed_segment()));
      processed = FreeableBuffer(segment->data(), segment->size(),
                                 segment->owner() ? segment->owner() : shared_from_this());
    } else if (d->processed() != nullptr) {
      processed = FreeableBuffer(d->processed()->data(), d->processed()->size(), shared_from_this());
    }
    std::vector<CompileSpec> specs;
    if (d->compile_specs() != nullptr) {
      for (const auto* spec : *d->compile_specs()) {
        CompileSpec s{spec->key()->str(), {}};
        if (spec->value() != nullptr) s.value.assign(spec->value()->begin(), spec->value()->end());
        specs.push_back(std::move(s));
      }
    }
    BackendInitContext context(std::string(name), meta.id, backend_options, &named_data());
    auto handle = backend->init(context, &processed, specs);
    if (!handle.ok()) return handle.status().with_context(which);
    method->delegates_.push_back(Method::Delegate{meta.id, meta.backend_id, backend, *handle});
  }
  return method;
}

}  // namespace kiln::runtime
