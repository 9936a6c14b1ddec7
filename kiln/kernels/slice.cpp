#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
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

constexpr std::string_view kOp = "Slice";

// Opset 10 moved starts, ends and axes from attributes to inputs 1..3 (and added steps, input
// 4); each is read from its input when present, else from the attribute.
Status slice_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 5, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  const char* names[4] = {"starts", "ends", "axes", "steps"};
  std::vector<int64_t> lists[4];
  for (size_t i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(auto values, internal::int_list_input_or_attribute(kOp, inputs, i + 1,
                                                                             attributes, names[i]));
    if (!values.has_value() && i < 2) {
      return internal::invalid_argument(kOp, std::string(names[i]) +
                                                 " are missing (expected "
                                                 "input " +
                                                 std::to_string(i + 1) + " or attribute '" +
                                                 names[i] + "')");
    }
    lists[i] = values.value_or(std::vector<int64_t>());
  }
  auto plan = slice_plan(x->sizes(), lists[0], lists[1], lists[2], lists[3]);
  if (!plan.ok()) return plan.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, plan->sizes));
  return slice(*x, *plan, out->to_tensor());
}

const runtime::KernelRegistration kRegisterSlice("Slice", slice_kernel);

}  // namespace

Result<SlicePlan> slice_plan(Span<const int64_t> input, Span<const int64_t> starts,
                             Span<const int64_t> ends, Span<const int64_t> axes,
                             Span<const int64_t> steps) {
  const auto rank = static_cast<int64_t>(input.size());
  const size_t n = starts.size();
  if (ends.size() != n || (!axes.empty() && axes.size() != n) ||
      (!steps.empty() && steps.size() != n)) {
    return Status(Error::InvalidArgument,
                  "starts, ends, axes and steps have " + std::to_string(starts.size()) + ", " +
                      std::to_string(ends.size()) + ", " + std::to_string(axes.size()) + " and " +
                      std::to_string(steps.size()) + " elements (expected " + std::to_string(n) +
                      " each; axes and steps may be empty)");
  }
  SlicePlan plan;
  plan.starts.assign(input.size(), 0);
  plan.steps.assign(input.size(), 1);
  plan.sizes.assign(input.begin(), input.end());
  std::vector<bool> seen(input.size(), false);
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < -rank || axis >= rank) {
      return Status(Error::InvalidArgument, "axes " + runtime::shape_to_string(axes) + " have " +
                                                std::to_string(axis) + " (expected " +
                                                std::to_string(-rank) + ".." +
                                                std::to_string(rank - 1) + ")");
    }
    if (axis < 0) axis += rank;
    const auto d = static_cast<size_t>(axis);
    if (seen[d]) {
      return Status(Error::InvalidArgument, "axes " + runtime::shape_to_string(axes) +
                                                " repeat axis " + std::to_string(axis) +
                                                " (expected distinct axes)");
    }
    seen[d] = true;
    const int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) {
      return Status(Error::InvalidArgument, "steps " + runtime::shape_to_string(steps) +
                                                " have 0 at position " + std::to_string(i) +
                                                " (expected non-zero steps)");
    }
    const int64_t dim = input[d];
    // Clamp before adding dim, so INT64_MIN/INT64_MAX sentinels cannot overflow.
    int64_t start = std::clamp<int64_t>(starts[i], -dim - 1, dim + 1);
    int64_t end = std::clamp<int64_t>(ends[i], -dim - 1, dim + 1);
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t size = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) size = (end - start + step - 1) / step;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      if (start > end) size = (start - end - step - 1) / -step;
    }
    plan.starts[d] = start;
    plan.steps[d] = step;
    plan.sizes[d] = size;
  }
  return plan;
}

Status slice(const Tensor& x, const SlicePlan& plan, Tensor& out) {
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), plan.sizes));
  if (plan.starts.size() != static_cast<size_t>(x.dim()) ||
      plan.steps.size() != static_cast<size_t>(x.dim())) {
    return internal::invalid_argument(kOp, "the slice plan has rank " +
                                               std::to_string(plan.starts.size()) + " (expected " +
                                               std::to_string(x.dim()) + ")");
  }
  if (out.numel() == 0) return Status();
  const auto x_strides = internal::dense_strides(x.sizes());
  int64_t base = 0;
  std::vector<int64_t> strides(x_strides.size());
  for (size_t d = 0; d < strides.size(); ++d) {
    base += plan.starts[d] * x_strides[d];
    strides[d] = plan.steps[d] * x_strides[d];
  }
  internal::strided_copy(x, base, plan.sizes, strides, out.mutable_data());
  return Status();
}

}  // namespace kiln::kernels
