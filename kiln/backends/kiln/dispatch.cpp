#include <kiln/backends/kiln/dispatch.h>

#include <kiln/runtime/core/error.h>

namespace kiln::backends {

using runtime::Error;
using runtime::Status;
using runtime::Tensor;

namespace {

std::string dtype_name(runtime::ScalarType dtype) { return std::string(to_string(dtype)); }

}  // namespace

std::string shapes_to_string(const Shapes& shapes) {
  std::string out;
  for (const auto& s : shapes) out += (out.empty() ? "" : ", ") + runtime::shape_to_string(s);
  return "(" + out + ")";
}

Status check_arguments(const std::string& subject, const ArgumentTypes& types,
                       runtime::Span<runtime::EValue* const> inputs,
                       runtime::Span<runtime::EValue* const> outputs, CallArguments& call) {
  if (inputs.size() != types.input_names.size() || outputs.size() != types.output_names.size()) {
    return Status(Error::InvalidArgument, subject + ": got " + std::to_string(inputs.size()) +
                                              " inputs and " + std::to_string(outputs.size()) +
                                              " outputs (expected " +
                                              std::to_string(types.input_names.size()) + " and " +
                                              std::to_string(types.output_names.size()) + ")");
  }
  call.shapes.resize(inputs.size());
  call.inputs.resize(inputs.size());
  call.outputs.resize(outputs.size());
  auto input = [&](size_t i) { return subject + ": input '" + types.input_names[i] + "'"; };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]->is_tensor()) {
      return Status(
          Error::InvalidArgument,
          input(i) + " is " + std::string(to_string(inputs[i]->tag())) + " (expected a tensor)");
    }
    const Tensor& t = inputs[i]->to_tensor();
    if (t.dtype() != types.input_dtypes[i]) {
      return Status(Error::InvalidArgument, input(i) + " has dtype " + dtype_name(t.dtype()) +
                                                " (expected " + dtype_name(types.input_dtypes[i]) +
                                                ")");
    }
    const auto& rank = types.input_ranks[i];
    if (rank && static_cast<size_t>(t.dim()) != *rank) {
      return Status(Error::InvalidArgument, input(i) + " has rank " + std::to_string(t.dim()) +
                                                " (expected " + std::to_string(*rank) + ")");
    }
    call.shapes[i].assign(t.sizes().begin(), t.sizes().end());
    call.inputs[i] = &t;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]->is_tensor() || outputs[i]->to_tensor().dtype() != types.output_dtypes[i]) {
      return Status(Error::InvalidArgument, subject + ": output '" + types.output_names[i] +
                                                "' is not a tensor of dtype " +
                                                dtype_name(types.output_dtypes[i]));
    }
    call.outputs[i] = &outputs[i]->to_tensor();
  }
  return Status();
}

SessionTable::Entry& SessionTable::add(const Shapes& shapes, std::string function,
                                       engine::Session session) {
  if (closed_) {
    accepted_.push_back(shapes);
  } else if (entries_.size() >= open_capacity_ && entries_.count(shapes) == 0) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    entries_.erase(oldest);
  }
  return entries_.insert_or_assign(shapes, Entry{std::move(function), std::move(session), ++clock_})
      .first->second;
}

SessionTable::Entry* SessionTable::find(const Shapes& shapes) {
  auto it = entries_.find(shapes);
  if (it == entries_.end()) return nullptr;
  it->second.last_used = ++clock_;
  return &it->second;
}

Status SessionTable::no_match(const std::string& subject, const Shapes& shapes) const {
  std::string expected;
  if (accepted_.size() == 1) {
    expected = shapes_to_string(accepted_[0]);
  } else {
    expected = "one of ";
    for (size_t i = 0; i < accepted_.size(); ++i) {
      expected += (i == 0 ? "" : ", ") + shapes_to_string(accepted_[i]) + " for '" +
                  entries_.at(accepted_[i]).function + "'";
    }
  }
  return Status(Error::InvalidArgument, subject + ": input shapes " + shapes_to_string(shapes) +
                                            " (expected " + expected + ")");
}

}  // namespace kiln::backends
