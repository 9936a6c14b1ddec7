// Shape and Size: metadata of the input as i64 tensors.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

Status shape_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "Shape";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(int64_t start, internal::int_attribute(kOp, attributes, "start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, internal::int_attribute(kOp, attributes, "end", INT64_MAX));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::Int64));
  const std::vector<int64_t> sizes = {
      static_cast<int64_t>(shape_slice(x->sizes(), start, end).size())};
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, sizes));
  return shape(*x, start, end, out->to_tensor());
}

Status size_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "Size";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::Int64));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, {}));
  return size(*x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterShape("Shape", shape_kernel);
const runtime::KernelRegistration kRegisterSize("Size", size_kernel);

}  // namespace

std::vector<int64_t> shape_slice(Span<const int64_t> input, int64_t start, int64_t end) {
  const auto rank = static_cast<int64_t>(input.size());
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  if (start >= end) return {};
  return std::vector<int64_t>(input.begin() + start, input.begin() + end);
}

Status shape(const Tensor& x, int64_t start, int64_t end, Tensor& out) {
  const auto sizes = shape_slice(x.sizes(), start, end);
  const std::vector<int64_t> expected = {static_cast<int64_t>(sizes.size())};
  KILN_RETURN_IF_ERROR(internal::check_output("Shape", out, ScalarType::Int64, expected));
  std::copy(sizes.begin(), sizes.end(), out.mutable_data_ptr<int64_t>());
  return Status();
}

Status size(const Tensor& x, Tensor& out) {
  KILN_RETURN_IF_ERROR(internal::check_output("Size", out, ScalarType::Int64, {}));
  *out.mutable_data_ptr<int64_t>() = x.numel();
  return Status();
}

}  // namespace kiln::kernels
