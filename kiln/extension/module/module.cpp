#include <kiln/extension/module/module.h>

#include <kiln/runtime/backend/option_schema.h>
#include <kiln/runtime/backend/registry.h>
#include <kiln/runtime/core/data_loader.h>

#include <string>
#include <utility>

namespace kiln::extension {

using runtime::Error;
using runtime::EValue;
using runtime::LoadBackendOptionsMap;
using runtime::Method;
using runtime::MethodMeta;
using runtime::Program;
using runtime::Result;
using runtime::ShapeDynamism;
using runtime::Status;
using runtime::TensorMeta;

namespace {

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += ", ";
    out += "'" + name + "'";
  }
  return out.empty() ? "none" : out;
}

std::string input_names(const MethodMeta& meta) {
  std::vector<std::string> names;
  for (const auto& input : meta.inputs) names.push_back(input.name);
  return quoted_list(names);
}

std::string describe_input(size_t index, const TensorMeta& meta) {
  return "input " + std::to_string(index) + " '" + meta.name + "'";
}

// Checks a tensor against a method input before the Method takes it, so the message
// names the method and says what the caller gave and what the program expects.
Status check_tensor_input(size_t index, const TensorMeta& meta, const runtime::Tensor& tensor) {
  // Messages are made only on failure: a run checks every input.
  auto subject = [&] { return describe_input(index, meta); };
  auto given = [&] { return runtime::shape_to_string(tensor.sizes()); };
  auto planned = [&] { return runtime::shape_to_string(meta.sizes); };
  if (tensor.dtype() != meta.dtype) {
    return Status(Error::InvalidArgument,
                  subject() + " has dtype " + std::string(runtime::to_string(tensor.dtype())) +
                      " (expected " + std::string(runtime::to_string(meta.dtype)) + ")");
  }
  if (static_cast<size_t>(tensor.dim()) != meta.sizes.size()) {
    return Status(Error::InvalidArgument, subject() + " has shape " + given() + " of rank " +
                                              std::to_string(tensor.dim()) + " (expected rank " +
                                              std::to_string(meta.sizes.size()) + ", shape " +
                                              planned() + ")");
  }
  switch (meta.dynamism) {
    case ShapeDynamism::Static:
      for (size_t d = 0; d < meta.sizes.size(); ++d) {
        if (tensor.sizes()[d] != meta.sizes[d]) {
          return Status(Error::InvalidArgument,
                        subject() + " has shape " + given() + " (expected " + planned() + ")");
        }
      }
      break;
    case ShapeDynamism::Bounded:
      for (size_t d = 0; d < meta.sizes.size(); ++d) {
        if (tensor.sizes()[d] > meta.sizes[d]) {
          return Status(Error::InvalidArgument,
                        subject() + " has shape " + given() + " (expected at most " + planned() + ")");
        }
      }
      break;
    case ShapeDynamism::Unbounded:
      break;
  }
  return Status();
}

}  // namespace

std::string_view to_string(Module::LoadMode mode) {
  return mode == Module::LoadMode::File ? "file" : "mmap";
}

Module::Module(std::string path, LoadMode load_mode)
    : path_(std::move(path)), load_mode_(load_mode) {}

Module::~Module() {
  // Methods first: their delegates may use the program's named data while being destroyed.
  methods_.clear();
  program_.reset();
}

Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;

Result<std::shared_ptr<Program>> Module::open_program() const {
  std::shared_ptr<runtime::DataLoader> loader;
  if (load_mode_ == LoadMode::Mmap) {
    auto opened = runtime::MmapDataLoader::open(path_);
    if (!opened.ok()) return opened.status();
    loader = std::move(opened).get();
  } else {
    auto opened = runtime::FileDataLoader::open(path_);
    if (!opened.ok()) return opened.status();
    loader = std::move(opened).get();
  }
  return Program::load(std::move(loader));
}

Status Module::load() {
  if (program_ != nullptr) return Status();
  KILN_ASSIGN_OR_RETURN(auto program, open_program());
  program_ = std::move(program);
  return Status();
}

Status Module::check_backend_ids(const LoadBackendOptionsMap& options) const {
  // Program::load_method would reject these too, but only when a method is loaded; failing
  // here keeps a typo in a default map from surfacing far from the call that made it.
  const std::vector<std::string> registered = runtime::registered_backends();
  for (const auto& id : options.backend_ids()) {
    if (runtime::get_backend(id) != nullptr) continue;
    std::string message = "load module '" + path_ + "': options name backend '" + id +
                          "' that is not registered (expected one of " + quoted_list(registered) +
                          ")";
    if (auto hint = runtime::closest_match(id, registered)) {
      message += "; did you mean '" + *hint + "'?";
    }
    return Status(Error::InvalidArgument, std::move(message));
  }
  return Status();
}

Status Module::load(const LoadBackendOptionsMap& options) {
  KILN_RETURN_IF_ERROR(check_backend_ids(options));
  // Copy before touching the module so an allocation failure cannot leave it half-updated.
  LoadBackendOptionsMap copy = options;
  KILN_RETURN_IF_ERROR(load());
  default_options_ = std::move(copy);
  return Status();
}

Status Module::load(std::string_view method_name, const LoadBackendOptionsMap& options) {
  std::shared_ptr<Program> program = program_;
  if (program == nullptr) {
    KILN_ASSIGN_OR_RETURN(program, open_program());
  }
  KILN_RETURN_IF_ERROR(load_method_from(program, method_name, &options));
  program_ = std::move(program);
  return Status();
}

Status Module::load_method(std::string_view name, const LoadBackendOptionsMap* options) {
  std::shared_ptr<Program> program = program_;
  if (program == nullptr) {
    KILN_ASSIGN_OR_RETURN(program, open_program());
  }
  if (options == nullptr && default_options_.has_value()) options = &*default_options_;
  KILN_RETURN_IF_ERROR(load_method_from(program, name, options));
  program_ = std::move(program);
  return Status();
}

Status Module::load_method(std::string_view name, const LoadBackendOptionsMap& options) {
  return load_method(name, &options);
}

Status Module::load_method_from(const std::shared_ptr<Program>& program, std::string_view name,
                                const LoadBackendOptionsMap* options) {
  KILN_ASSIGN_OR_RETURN(auto method, program->load_method(name, options));
  // Only now replace: a failed reload must keep the previous Method.
  auto it = methods_.find(name);
  if (it != methods_.end()) {
    it->second = std::move(method);
  } else {
    methods_.emplace(std::string(name), std::move(method));
  }
  return Status();
}

bool Module::is_method_loaded(std::string_view name) const {
  return methods_.find(name) != methods_.end();
}

Result<std::vector<std::string>> Module::method_names() {
  KILN_RETURN_IF_ERROR(load());
  return program_->method_names();
}

Result<MethodMeta> Module::method_meta(std::string_view name) {
  KILN_RETURN_IF_ERROR(load());
  return program_->method_meta(name);
}

Result<Method*> Module::method(std::string_view name) {
  auto it = methods_.find(name);
  if (it == methods_.end()) {
    KILN_RETURN_IF_ERROR(load_method(name));
    it = methods_.find(name);
  }
  return it->second.get();
}

Status Module::check_inputs(const Method& method, const std::vector<EValue>& inputs) const {
  const MethodMeta& meta = method.meta();
  if (inputs.size() != meta.inputs.size()) {
    return Status(Error::InvalidArgument,
                  "got " + std::to_string(inputs.size()) + " inputs (expected " +
                      std::to_string(meta.inputs.size()) + ": " + input_names(meta) + ")");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& input = meta.inputs[i];
    if (inputs[i].tag() != input.tag) {
      return Status(Error::InvalidArgument, describe_input(i, input) + " is a " +
                                                std::string(runtime::to_string(inputs[i].tag())) +
                                                " (expected a " +
                                                std::string(runtime::to_string(input.tag)) + ")");
    }
    if (inputs[i].is_tensor()) {
      KILN_RETURN_IF_ERROR(check_tensor_input(i, input, inputs[i].to_tensor()));
    }
  }
  return Status();
}

Result<std::vector<EValue>> Module::execute(std::string_view name,
                                            const std::vector<EValue>& inputs) {
  KILN_ASSIGN_OR_RETURN(Method * method, this->method(name));
  Status status = check_inputs(*method, inputs);
  if (!status.ok()) return status.with_context("execute method '" + std::string(name) + "'");
  // Method's own messages already name the method and the input or instruction. The inputs
  // live for the call: the method reads those it does not write in place.
  KILN_RETURN_IF_ERROR(method->execute(inputs));
  std::vector<EValue> outputs;
  outputs.reserve(method->num_outputs());
  for (size_t i = 0; i < method->num_outputs(); ++i) outputs.push_back(method->get_output(i));
  return outputs;
}

Result<std::vector<EValue>> Module::forward(const std::vector<EValue>& inputs) {
  return execute("forward", inputs);
}

}  // namespace kiln::extension
