#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Concat";

Status concat_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, SIZE_MAX, 1));
  if (!attributes.has("axis")) {
    return internal::invalid_argument(kOp, "attribute 'axis' is missing (expected an int)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(kOp, attributes, "axis", 0));
  std::vector<const Tensor*> tensors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* tensor, internal::input_tensor(kOp, inputs, i));
    tensors.push_back(tensor);
  }
  auto shape = concat_shape(tensors, axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor(kOp, outputs, 0, tensors[0]->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return concat(tensors, axis, out->to_tensor());
}

const runtime::KernelRegistration kRegisterConcat("Concat", concat_kernel);

}  // namespace

Result<std::vector<int64_t>> concat_shape(Span<const Tensor* const> inputs, int64_t axis) {
  if (inputs.empty()) {
    return Status(Error::InvalidArgument, "got 0 inputs (expected 1 or more)");
  }
  const Tensor& first = *inputs[0];
  const int64_t rank = first.dim();
  if (axis < -rank || axis >= rank) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + " for inputs of rank " +
                                              std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> shape(first.sizes().begin(), first.sizes().end());
  for (size_t i = 1; i < inputs.size(); ++i) {
    const Tensor& input = *inputs[i];
    const std::string subject = "input " + std::to_string(i);
    if (input.dtype() != first.dtype()) {
      return Status(Error::InvalidType,
                    subject + " has dtype " + std::string(runtime::to_string(input.dtype())) +
                        " (expected " + std::string(runtime::to_string(first.dtype())) +
                        ", the dtype of input 0)");
    }
    bool same = input.dim() == rank;
    for (int64_t d = 0; same && d < rank; ++d) same = d == axis || input.size(d) == shape[d];
    if (!same) {
      return Status(Error::InvalidArgument,
                    subject + " has shape " + runtime::shape_to_string(input.sizes()) +
                        " (expected the shape of input 0, " +
                        runtime::shape_to_string(first.sizes()) + ", except along axis " +
                        std::to_string(axis) + ")");
    }
    shape[static_cast<size_t>(axis)] += input.size(axis);
  }
  return shape;
}

Status concat(Span<const Tensor* const> inputs, int64_t axis, Tensor& out) {
  auto shape = concat_shape(inputs, axis);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  if (axis < 0) axis += inputs[0]->dim();
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, inputs[0]->dtype(), *shape));
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input " + std::to_string(i), *inputs[i]));
  }
  // Each input contributes one block of (its size along axis) x (inner) elements per outer row.
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= (*shape)[static_cast<size_t>(d)];
  const size_t element = out.element_size();
  const size_t out_row = static_cast<size_t>(out.numel() / std::max<int64_t>(outer, 1)) * element;
  auto* target = static_cast<uint8_t*>(out.mutable_data());
  size_t column = 0;
  for (const Tensor* input : inputs) {
    if (input->numel() == 0) continue;
    const size_t block = static_cast<size_t>(input->numel() / outer) * element;
    const auto* source = static_cast<const uint8_t*>(input->data());
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(target + o * out_row + column, source + o * block, block);
    }
    column += block;
  }
  return Status();
}

}  // namespace kiln::kernels
