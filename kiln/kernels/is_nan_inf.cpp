// IsNaN and IsInf: float predicates with a bool output.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cmath>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

// out[i] = predicate(x[i]) in the compute type; `out` is bool.
template <typename Predicate>
Status float_predicate(std::string_view op, const Tensor& x, Tensor& out, Predicate predicate) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(op, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(op, out, ScalarType::Bool, x.sizes()));
  return dispatch<DtypeGroup::Float>(op, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data_ptr<T>();
    bool* result = out.mutable_data_ptr<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) result[i] = predicate(load(in[i]));
    return Status();
  });
}

// Checks arity, tags and dtypes, resizes the bool output 0 to input 0's shape.
runtime::Result<Tensor*> prepare_predicate(std::string_view op, runtime::KernelContext& context,
                                           Span<EValue* const> inputs, Span<EValue* const> outputs,
                                           const Tensor** x) {
  KILN_RETURN_IF_ERROR(internal::check_arity(op, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(*x, internal::input_tensor(op, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", (*x)->dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(op, outputs, 0, ScalarType::Bool));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, op, *out, (*x)->sizes()));
  return &out->to_tensor();
}

Status is_nan_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes&) {
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out, prepare_predicate("IsNaN", context, inputs, outputs, &x));
  return is_nan(*x, *out);
}

Status is_inf_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(int64_t negative,
                        internal::int_attribute("IsInf", attributes, "detect_negative", 1));
  KILN_ASSIGN_OR_RETURN(int64_t positive,
                        internal::int_attribute("IsInf", attributes, "detect_positive", 1));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out, prepare_predicate("IsInf", context, inputs, outputs, &x));
  return is_inf(*x, negative != 0, positive != 0, *out);
}

const runtime::KernelRegistration kRegisterIsNaN("IsNaN", is_nan_kernel);
const runtime::KernelRegistration kRegisterIsInf("IsInf", is_inf_kernel);

}  // namespace

Status is_nan(const Tensor& x, Tensor& out) {
  return float_predicate("IsNaN", x, out, [](auto v) { return std::isnan(v); });
}

Status is_inf(const Tensor& x, bool detect_negative, bool detect_positive, Tensor& out) {
  return float_predicate("IsInf", x, out, [=](auto v) {
    return std::isinf(v) && (v > 0 ? detect_positive : detect_negative);
  });
}

}  // namespace kiln::kernels
