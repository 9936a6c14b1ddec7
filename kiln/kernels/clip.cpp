#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>

#include <string>
#include <type_traits>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Clip";

// Checks that an optional bound is a one-element tensor of `dtype` (or f64, the attribute form).
Status check_bound(const Tensor* bound, std::string_view subject, runtime::ScalarType dtype) {
  if (bound == nullptr) return Status();
  if (bound->dtype() != runtime::ScalarType::Float64) {
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, subject, bound->dtype(), dtype));
  }
  if (bound->numel() != 1) {
    return internal::invalid_argument(kOp, std::string(subject) + " has shape " +
                                               runtime::shape_to_string(bound->sizes()) +
                                               " (expected one element)");
  }
  return Status();
}

Status clip_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 3, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kNumericDtypes));
  // Opset 11+ gives the bounds as inputs; opsets 6-10 as float attributes `min` and `max`.
  const Tensor* bounds[2] = {nullptr, nullptr};
  double attribute_values[2] = {0, 0};
  Tensor attribute_tensors[2];
  const char* names[2] = {"min", "max"};
  for (size_t i = 0; i < 2; ++i) {
    const std::string subject = "input " + std::to_string(i + 1) + " (" + names[i] + ")";
    if (!internal::is_absent(inputs, i + 1)) {
      KILN_ASSIGN_OR_RETURN(bounds[i], internal::input_tensor(kOp, inputs, i + 1));
      KILN_RETURN_IF_ERROR(check_bound(bounds[i], subject, x->dtype()));
    } else if (attributes.has(names[i])) {
      auto value = attributes.get_double(names[i], 0);
      if (!value.ok()) return value.status().with_context(internal::action(kOp));
      attribute_values[i] = *value;
      attribute_tensors[i] = Tensor(runtime::ScalarType::Float64, {}, &attribute_values[i]);
      bounds[i] = &attribute_tensors[i];
    }
  }
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return clip(*x, bounds[0], bounds[1], out->to_tensor());
}

const runtime::KernelRegistration kRegisterClip("Clip", clip_kernel);

// A bound as x's compute type: from a tensor of x's dtype, or from an f64 attribute value.
template <typename T>
ComputeType<T> bound_value(const Tensor& bound) {
  if (bound.dtype() == runtime::ScalarType::Float64 && !std::is_same_v<T, double>) {
    return static_cast<ComputeType<T>>(*bound.data_ptr<double>());
  }
  return load(*bound.data_ptr<T>());
}

}  // namespace

Status clip(const Tensor& x, const Tensor* min, const Tensor* max, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kNumericDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  KILN_RETURN_IF_ERROR(check_bound(min, "input 1 (min)", x.dtype()));
  KILN_RETURN_IF_ERROR(check_bound(max, "input 2 (max)", x.dtype()));
  return dispatch<DtypeGroup::Numeric>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const bool has_min = min != nullptr, has_max = max != nullptr;
    const C lo = has_min ? bound_value<T>(*min) : C{};
    const C hi = has_max ? bound_value<T>(*max) : C{};
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      C value = load(in[i]);
      if (has_min && value < lo) value = lo;
      if (has_max && value > hi) value = hi;
      result[i] = store<T>(value);
    }
    return Status();
  });
}

}  // namespace kiln::kernels
