#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Unique";

Status write_index_output(runtime::KernelContext& context, Span<EValue* const> outputs,
                          size_t index, const std::vector<int64_t>& values) {
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, index, ScalarType::Int64));
  const std::array<int64_t, 1> shape = {static_cast<int64_t>(values.size())};
  Status status = context.resize(*out, shape);
  if (!status.ok()) {
    return status.with_context(internal::action(kOp) + ": resize output " + std::to_string(index) +
                               " to " + runtime::shape_to_string(shape));
  }
  if (!values.empty()) {
    std::memcpy(out->to_tensor().mutable_data(), values.data(), values.size() * sizeof(int64_t));
  }
  return Status();
}

// Y and the optional indices, inverse_indices and counts outputs (ONNX lists 1 to 4).
Status unique_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  if (outputs.size() < 1 || outputs.size() > 4) {
    return internal::invalid_argument(
        kOp, "got " + std::to_string(outputs.size()) + " outputs (expected 1 to 4)");
  }
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, outputs.size()));
  KILN_ASSIGN_OR_RETURN(int64_t sorted, internal::int_attribute(kOp, attributes, "sorted", 1));
  std::optional<int64_t> axis;
  if (attributes.has("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, internal::int_attribute(kOp, attributes, "axis", 0));
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(UniquePlan plan, unique_plan(*x, sorted != 0, axis));
  KILN_ASSIGN_OR_RETURN(EValue * y, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  for (size_t i = 1; i < outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(
        internal::output_tensor_of_dtype(kOp, outputs, i, ScalarType::Int64).status());
  }
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *y, plan.y_shape));
  KILN_RETURN_IF_ERROR(unique(*x, plan, y->to_tensor()));
  const std::vector<int64_t>* lists[] = {&plan.indices, &plan.inverse, &plan.counts};
  for (size_t i = 1; i < outputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(write_index_output(context, outputs, i, *lists[i - 1]));
  }
  return Status();
}

const runtime::KernelRegistration kRegisterUnique("Unique", unique_kernel);

// -1, 0 or 1 for a against b, ordering nan after every number and equal to itself, so sorting
// has a strict weak order whatever the data.
template <typename C>
int compare_values(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan || b_nan) return a_nan == b_nan ? 0 : (a_nan ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

}  // namespace

Result<UniquePlan> unique_plan(const Tensor& x, bool sorted, std::optional<int64_t> axis) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kAllDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  UniquePlan plan;
  // Slices along the axis: `count` of them, each `outer` runs of `inner` elements, `dim` apart.
  int64_t outer = 1, count = x.numel(), inner = 1;
  if (axis) {
    KILN_ASSIGN_OR_RETURN(plan.axis,
                          internal::normalize_axis(kOp, "attribute 'axis'", *axis, x.dim()));
    outer = internal::product(x.sizes(), 0, static_cast<size_t>(plan.axis));
    count = x.size(plan.axis);
    inner = internal::product(x.sizes(), static_cast<size_t>(plan.axis) + 1, x.sizes().size());
  }
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::vector<int64_t> group_of(order.size(), 0);  // slice -> its group, in `order`'s terms
  std::vector<int64_t> firsts;                     // group -> first slice, in sorted order
  KILN_RETURN_IF_ERROR(dispatch<DtypeGroup::All>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* data = x.data_ptr<T>();
    auto compare = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int c = compare_values(load(data[(o * count + a) * inner + i]),
                                       load(data[(o * count + b) * inner + i]));
          if (c != 0) return c;
        }
      }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || compare(order[i - 1], order[i]) != 0) firsts.push_back(order[i]);
      group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(firsts.size()) - 1;
    }
    return Status();
  }));
  // Positions of the groups in the output: sorted order, or order of first occurrence.
  std::vector<int64_t> position(firsts.size());
  std::iota(position.begin(), position.end(), int64_t{0});
  if (!sorted) {
    std::vector<int64_t> by_first(firsts.size());
    std::iota(by_first.begin(), by_first.end(), int64_t{0});
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return firsts[a] < firsts[b]; });
    for (size_t p = 0; p < by_first.size(); ++p) {
      position[static_cast<size_t>(by_first[p])] = static_cast<int64_t>(p);
    }
  }
  plan.indices.assign(firsts.size(), 0);
  plan.counts.assign(firsts.size(), 0);
  plan.inverse.assign(order.size(), 0);
  for (size_t g = 0; g < firsts.size(); ++g) {
    plan.indices[static_cast<size_t>(position[g])] = firsts[g];
  }
  for (size_t s = 0; s < order.size(); ++s) {
    const int64_t p = position[static_cast<size_t>(group_of[s])];
    plan.inverse[s] = p;
    ++plan.counts[static_cast<size_t>(p)];
  }
  if (axis) {
    plan.y_shape.assign(x.sizes().begin(), x.sizes().end());
    plan.y_shape[static_cast<size_t>(plan.axis)] = static_cast<int64_t>(firsts.size());
  } else {
    plan.y_shape = {static_cast<int64_t>(firsts.size())};
  }
  return plan;
}

Status unique(const Tensor& x, const UniquePlan& plan, Tensor& y) {
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, y, x.dtype(), plan.y_shape));
  int64_t outer = 1, count = x.numel(), inner = 1;
  if (plan.axis >= 0) {
    if (plan.axis >= x.dim()) {
      return internal::invalid_argument(kOp, "plan axis " + std::to_string(plan.axis) +
                                                 " (expected below the rank of input 0, " +
                                                 std::to_string(x.dim()) + ")");
    }
    outer = internal::product(x.sizes(), 0, static_cast<size_t>(plan.axis));
    count = x.size(plan.axis);
    inner = internal::product(x.sizes(), static_cast<size_t>(plan.axis) + 1, x.sizes().size());
  }
  for (size_t i = 0; i < plan.indices.size(); ++i) {
    KILN_RETURN_IF_ERROR(internal::check_index(kOp, "plan indices", plan.indices[i],
                                               static_cast<int64_t>(i), 0, count - 1,
                                               "slices of input 0"));
  }
  const size_t block = static_cast<size_t>(inner) * x.element_size();
  const auto* source = static_cast<const uint8_t*>(x.data());
  auto* target = static_cast<uint8_t*>(y.mutable_data());
  if (block == 0) return Status();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t first : plan.indices) {
      std::memcpy(target, source + static_cast<size_t>(o * count + first) * block, block);
      target += block;
    }
  }
  return Status();
}

}  // namespace kiln::kernels
