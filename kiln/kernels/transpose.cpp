#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

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

constexpr std::string_view kOp = "Transpose";

Status transpose_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                        Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  auto perm = attributes.get_ints("perm");
  if (!perm.ok()) return perm.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  auto shape = transpose_shape(x->sizes(), *perm);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return transpose(*x, *perm, out->to_tensor());
}

const runtime::KernelRegistration kRegisterTranspose("Transpose", transpose_kernel);

// The permutation actually applied: `perm`, or the reversal when it is empty.
std::vector<int64_t> effective_perm(Span<const int64_t> perm, size_t rank) {
  if (!perm.empty()) return std::vector<int64_t>(perm.begin(), perm.end());
  std::vector<int64_t> reversed(rank);
  for (size_t i = 0; i < rank; ++i) reversed[i] = static_cast<int64_t>(rank - 1 - i);
  return reversed;
}

}  // namespace

Result<std::vector<int64_t>> transpose_shape(Span<const int64_t> input, Span<const int64_t> perm) {
  const auto order = effective_perm(perm, input.size());
  std::vector<bool> seen(input.size(), false);
  bool valid = order.size() == input.size();
  for (size_t i = 0; valid && i < order.size(); ++i) {
    valid = order[i] >= 0 && order[i] < static_cast<int64_t>(input.size()) &&
            !seen[static_cast<size_t>(order[i])];
    if (valid) seen[static_cast<size_t>(order[i])] = true;
  }
  if (!valid) {
    return Status(Error::InvalidArgument,
                  "attribute 'perm' is " + runtime::shape_to_string(perm) +
                      " (expected a permutation of 0.." + std::to_string(input.size()) +
                      "-1 for input 0 of shape " + runtime::shape_to_string(input) + ")");
  }
  std::vector<int64_t> shape(input.size());
  for (size_t i = 0; i < order.size(); ++i) shape[i] = input[static_cast<size_t>(order[i])];
  return shape;
}

Status transpose(const Tensor& x, Span<const int64_t> perm, Tensor& out) {
  auto shape = transpose_shape(x.sizes(), perm);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), *shape));
  const auto order = effective_perm(perm, x.sizes().size());
  const auto x_strides = internal::dense_strides(x.sizes());
  std::vector<int64_t> strides(order.size());
  for (size_t i = 0; i < order.size(); ++i) strides[i] = x_strides[static_cast<size_t>(order[i])];
  internal::strided_copy(x, 0, *shape, strides, out.mutable_data());
  return Status();
}

}  // namespace kiln::kernels
