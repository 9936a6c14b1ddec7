#include <kiln/kernels/adapter.h>
#include <kiln/kernels/kernels.h>

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

constexpr std::string_view kOp = "Flatten";

Status flatten_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  auto axis = attributes.get_int("axis", 1);
  if (!axis.ok()) return axis.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  auto sizes = flatten_shape(x->sizes(), *axis);
  if (!sizes.ok()) return sizes.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *sizes));
  return flatten(*x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterFlatten("Flatten", flatten_kernel);

}  // namespace

Result<std::vector<int64_t>> flatten_shape(Span<const int64_t> input, int64_t axis) {
  const auto rank = static_cast<int64_t>(input.size());
  if (axis < -rank || axis > rank) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank) + " for input 0 of rank " +
                                              std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> out = {1, 1};
  for (int64_t d = 0; d < rank; ++d) out[d < axis ? 0 : 1] *= input[static_cast<size_t>(d)];
  return out;
}

Status flatten(const Tensor& x, Tensor& out) {
  if (out.dim() != 2) {
    return internal::invalid_argument(
        kOp, "output 0 has rank " + std::to_string(out.dim()) + " (expected 2)");
  }
  return internal::copy_elements(kOp, x, out);
}

}  // namespace kiln::kernels
