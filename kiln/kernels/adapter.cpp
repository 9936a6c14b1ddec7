#include <kiln/kernels/adapter.h>

#include <kiln/kernels/dispatch.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace internal {

std::string action(std::string_view op) { return "run kernel '" + std::string(op) + "'"; }

Status invalid_argument(std::string_view op, const std::string& problem) {
  return Status(Error::InvalidArgument, action(op) + ": " + problem);
}

Status check_arity(std::string_view op, Span<EValue* const> inputs, Span<EValue* const> outputs,
                   size_t min_inputs, size_t max_inputs, size_t num_outputs) {
  if (inputs.size() < min_inputs || inputs.size() > max_inputs) {
    std::string expected = std::to_string(min_inputs);
    if (max_inputs != min_inputs) expected += " to " + std::to_string(max_inputs);
    return invalid_argument(
        op, "got " + std::to_string(inputs.size()) + " inputs (expected " + expected + ")");
  }
  if (outputs.size() != num_outputs) {
    return invalid_argument(op, "got " + std::to_string(outputs.size()) + " outputs (expected " +
                                    std::to_string(num_outputs) + ")");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) {
      return invalid_argument(op, "input " + std::to_string(i) + " is null (expected a value)");
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == nullptr) {
      return invalid_argument(op, "output " + std::to_string(i) + " is null (expected a value)");
    }
  }
  return Status();
}

bool is_absent(Span<EValue* const> inputs, size_t index) {
  return index >= inputs.size() || inputs[index] == nullptr || inputs[index]->is_none();
}

runtime::Result<const Tensor*> input_tensor(std::string_view op, Span<EValue* const> inputs,
                                            size_t index) {
  const EValue* value = inputs[index];
  if (!value->is_tensor()) {
    return Status(Error::InvalidType, action(op) + ": input " + std::to_string(index) + " is " +
                                          std::string(runtime::to_string(value->tag())) +
                                          " (expected tensor)");
  }
  return &value->to_tensor();
}

runtime::Result<const Tensor*> optional_input(std::string_view op, Span<EValue* const> inputs,
                                              size_t index) {
  if (is_absent(inputs, index)) return static_cast<const Tensor*>(nullptr);
  return input_tensor(op, inputs, index);
}

runtime::Result<EValue*> output_tensor(std::string_view op, Span<EValue* const> outputs,
                                       size_t index, ScalarType dtype) {
  EValue* value = outputs[index];
  const std::string subject = "output " + std::to_string(index);
  if (!value->is_tensor()) {
    return Status(Error::InvalidType, action(op) + ": " + subject + " is " +
                                          std::string(runtime::to_string(value->tag())) +
                                          " (expected tensor)");
  }
  KILN_RETURN_IF_ERROR(check_same_dtype(op, subject, value->to_tensor().dtype(), dtype));
  return value;
}

runtime::Result<EValue*> output_tensor_of_dtype(std::string_view op, Span<EValue* const> outputs,
                                                size_t index, ScalarType dtype) {
  EValue* value = outputs[index];
  const std::string subject = "output " + std::to_string(index);
  if (!value->is_tensor()) {
    return Status(Error::InvalidType, action(op) + ": " + subject + " is " +
                                          std::string(runtime::to_string(value->tag())) +
                                          " (expected tensor)");
  }
  const std::array<ScalarType, 1> expected = {dtype};
  KILN_RETURN_IF_ERROR(check_dtype(op, subject, value->to_tensor().dtype(), expected));
  return value;
}

Status check_same_dtype(std::string_view op, std::string_view subject, ScalarType actual,
                        ScalarType expected) {
  if (actual == expected) return Status();
  return Status(Error::InvalidType, action(op) + ": " + std::string(subject) + " has dtype " +
                                        std::string(runtime::to_string(actual)) + " (expected " +
                                        std::string(runtime::to_string(expected)) +
                                        ", the dtype of input 0)");
}

Status check_contiguous(std::string_view op, std::string_view subject, const Tensor& tensor) {
  if (tensor.is_contiguous()) return Status();
  std::vector<int64_t> order(tensor.dim_order().begin(), tensor.dim_order().end());
  return Status(Error::NotSupported, action(op) + ": " + std::string(subject) + " has dim order " +
                                         runtime::shape_to_string(order) +
                                         " (expected a contiguous row-major tensor)");
}

Status check_output_shape(std::string_view op, const Tensor& out, Span<const int64_t> expected) {
  if (std::equal(out.sizes().begin(), out.sizes().end(), expected.begin(), expected.end())) {
    return Status();
  }
  return invalid_argument(op, "output 0 has shape " + runtime::shape_to_string(out.sizes()) +
                                  " (expected " + runtime::shape_to_string(expected) + ")");
}

Status check_output(std::string_view op, const Tensor& out, ScalarType dtype,
                    Span<const int64_t> expected) {
  KILN_RETURN_IF_ERROR(check_same_dtype(op, "output 0", out.dtype(), dtype));
  KILN_RETURN_IF_ERROR(check_contiguous(op, "output 0", out));
  return check_output_shape(op, out, expected);
}

Status resize_output(runtime::KernelContext& context, std::string_view op, EValue& output,
                     Span<const int64_t> sizes) {
  Status status = context.resize(output, sizes);
  if (status.ok()) return status;
  return status.with_context(action(op) + ": resize output 0 to " +
                             runtime::shape_to_string(sizes));
}

Status copy_elements(std::string_view op, const Tensor& x, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_contiguous(op, "input 0", x));
  KILN_RETURN_IF_ERROR(check_contiguous(op, "output 0", out));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, "output 0", out.dtype(), x.dtype()));
  if (out.numel() != x.numel()) {
    return invalid_argument(
        op, "output 0 has shape " + runtime::shape_to_string(out.sizes()) + " with " +
                std::to_string(out.numel()) + " elements (expected " + std::to_string(x.numel()) +
                ", as input 0 of shape " + runtime::shape_to_string(x.sizes()) + ")");
  }
  // memmove: the executor may alias a view's output with its input.
  if (out.mutable_data() != x.data() && x.nbytes() > 0) {
    std::memmove(out.mutable_data(), x.data(), x.nbytes());
  }
  return Status();
}

Status run_unary_kernel(const UnaryOp& op, runtime::KernelContext& context,
                        Span<EValue* const> inputs, Span<EValue* const> outputs) {
  KILN_RETURN_IF_ERROR(check_arity(op.name, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, input_tensor(op.name, inputs, 0));
  if (!op.dtypes.empty()) {
    KILN_RETURN_IF_ERROR(check_dtype(op.name, "input 0", x->dtype(), op.dtypes));
  }
  KILN_ASSIGN_OR_RETURN(EValue * out, output_tensor(op.name, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(resize_output(context, op.name, *out, x->sizes()));
  return op.typed(*x, out->to_tensor());
}

}  // namespace internal
}  // namespace kiln::kernels
