// Squeeze and Unsqueeze: shape-only ops whose data moves as for Reshape.

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

// Opset 13 moved `axes` from an attribute to input 1; both are accepted.
template <bool kSqueeze>
Status squeeze_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = kSqueeze ? "Squeeze" : "Unsqueeze";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(auto axes,
                        internal::int_list_input_or_attribute(kOp, inputs, 1, attributes, "axes"));
  Result<std::vector<int64_t>> shape = std::vector<int64_t>();
  if constexpr (kSqueeze) {
    shape = squeeze_shape(x->sizes(), axes);
  } else {
    if (!axes.has_value()) {
      return internal::invalid_argument(kOp,
                                        "axes are missing (expected input 1 or attribute "
                                        "'axes')");
    }
    shape = unsqueeze_shape(x->sizes(), *axes);
  }
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return internal::copy_elements(kOp, *x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterSqueeze("Squeeze", squeeze_kernel<true>);
const runtime::KernelRegistration kRegisterUnsqueeze("Unsqueeze", squeeze_kernel<false>);

Result<int64_t> normalize(int64_t axis, int64_t rank, const std::vector<int64_t>& axes) {
  if (axis < -rank || axis >= rank) {
    return Status(Error::InvalidArgument, "axes " + runtime::shape_to_string(axes) + " have " +
                                              std::to_string(axis) + " (expected " +
                                              std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + ")");
  }
  return axis < 0 ? axis + rank : axis;
}

}  // namespace

Result<std::vector<int64_t>> squeeze_shape(Span<const int64_t> input,
                                           const std::optional<std::vector<int64_t>>& axes) {
  const auto rank = static_cast<int64_t>(input.size());
  std::vector<bool> drop(input.size(), false);
  if (!axes.has_value()) {
    for (size_t d = 0; d < input.size(); ++d) drop[d] = input[d] == 1;
  }
  for (int64_t axis : axes.value_or(std::vector<int64_t>())) {
    KILN_ASSIGN_OR_RETURN(int64_t d, normalize(axis, rank, *axes));
    if (drop[static_cast<size_t>(d)]) {
      return Status(Error::InvalidArgument, "axes " + runtime::shape_to_string(*axes) +
                                                " repeat axis " + std::to_string(d) +
                                                " (expected distinct axes)");
    }
    if (input[static_cast<size_t>(d)] != 1) {
      return Status(Error::InvalidArgument,
                    "axis " + std::to_string(axis) + " of input 0 of shape " +
                        runtime::shape_to_string(input) + " has size " +
                        std::to_string(input[static_cast<size_t>(d)]) + " (expected 1)");
    }
    drop[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> shape;
  for (size_t d = 0; d < input.size(); ++d) {
    if (!drop[d]) shape.push_back(input[d]);
  }
  return shape;
}

Result<std::vector<int64_t>> unsqueeze_shape(Span<const int64_t> input,
                                             const std::vector<int64_t>& axes) {
  const auto rank = static_cast<int64_t>(input.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t axis : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t d, normalize(axis, rank, axes));
    if (inserted[static_cast<size_t>(d)]) {
      return Status(Error::InvalidArgument, "axes " + runtime::shape_to_string(axes) +
                                                " repeat axis " + std::to_string(d) +
                                                " (expected distinct axes)");
    }
    inserted[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> shape;
  size_t next = 0;
  for (size_t d = 0; d < inserted.size(); ++d) shape.push_back(inserted[d] ? 1 : input[next++]);
  return shape;
}

}  // namespace kiln::kernels
