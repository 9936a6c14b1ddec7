// Activations without a library call of their own: Softsign, Mish, Celu and Shrink.

#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/norm_helpers.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

struct SoftsignFn {
  template <typename T>
  T operator()(T x) const {
    const auto v = load(x);
    return store<T>(v / (1 + std::fabs(v)));
  }
};

struct MishFn {
  template <typename T>
  T operator()(T x) const {
    const auto v = load(x);
    // softplus(v) = max(v, 0) + log1p(e^-|v|): the exponent stays <= 0.
    const auto softplus = (v > 0 ? v : decltype(v){0}) + std::log1p(std::exp(-std::fabs(v)));
    return store<T>(v * std::tanh(softplus));
  }
};

Status softsign_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                       Span<EValue* const> outputs, const runtime::Attributes&) {
  return internal::run_unary_kernel({"Softsign", kFloatDtypes, softsign}, context, inputs, outputs);
}

Status mish_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes&) {
  return internal::run_unary_kernel({"Mish", kFloatDtypes, mish}, context, inputs, outputs);
}

// Checks the arguments as any unary op with `dtypes`, resizes output 0 and returns it.
runtime::Result<Tensor*> prepare_unary(std::string_view op, Span<const runtime::ScalarType> dtypes,
                                       runtime::KernelContext& context, Span<EValue* const> inputs,
                                       Span<EValue* const> outputs, const Tensor** x) {
  KILN_RETURN_IF_ERROR(internal::check_arity(op, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(*x, internal::input_tensor(op, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", (*x)->dtype(), dtypes));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(op, outputs, 0, (*x)->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, op, *out, (*x)->sizes()));
  return &out->to_tensor();
}

Status check_celu_alpha(double alpha) {
  if (alpha != 0) return Status();
  return internal::invalid_argument("Celu", "attribute 'alpha' is 0 (expected a nonzero value)");
}

Status celu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(double alpha, internal::double_attribute("Celu", attributes, "alpha", 1));
  KILN_RETURN_IF_ERROR(check_celu_alpha(alpha));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out,
                        prepare_unary("Celu", kFloatDtypes, context, inputs, outputs, &x));
  return celu(*x, alpha, *out);
}

Status shrink_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(double lambd,
                        internal::double_attribute("Shrink", attributes, "lambd", 0.5));
  KILN_ASSIGN_OR_RETURN(double bias, internal::double_attribute("Shrink", attributes, "bias", 0));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out,
                        prepare_unary("Shrink", kNumericDtypes, context, inputs, outputs, &x));
  return shrink(*x, lambd, bias, *out);
}

const runtime::KernelRegistration kRegisterSoftsign("Softsign", softsign_kernel);
const runtime::KernelRegistration kRegisterMish("Mish", mish_kernel);
const runtime::KernelRegistration kRegisterCelu("Celu", celu_kernel);
const runtime::KernelRegistration kRegisterShrink("Shrink", shrink_kernel);

}  // namespace

Status softsign(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Softsign", x, out, SoftsignFn{});
}

Status mish(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Mish", x, out, MishFn{});
}

Status celu(const Tensor& x, double alpha, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_celu_alpha(alpha));
  return internal::unary_elementwise<DtypeGroup::Float>("Celu", x, out, [alpha](auto e) {
    using T = decltype(e);
    using C = ComputeType<T>;
    const C v = load(e);
    const C a = static_cast<C>(alpha);
    const C negative = a * std::expm1(v / a);
    return store<T>((v > 0 ? v : C{0}) + (negative < 0 ? negative : C{0}));
  });
}

Status shrink(const Tensor& x, double lambd, double bias, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Numeric>("Shrink", x, out, [=](auto e) {
    using T = decltype(e);
    using C = ComputeType<T>;
    const double v = static_cast<double>(load(e));
    double y = v < -lambd ? v + bias : v > lambd ? v - bias : 0.0;
    if constexpr (std::is_integral_v<T>) {
      // Saturate, so a bias that leaves T's range cannot make the conversion undefined.
      y = std::trunc(y);
      if (!(y > static_cast<double>(std::numeric_limits<T>::lowest()))) {
        return std::numeric_limits<T>::lowest();
      }
      if (y >= static_cast<double>(std::numeric_limits<T>::max())) {
        return std::numeric_limits<T>::max();
      }
    }
    return store<T>(static_cast<C>(y));
  });
}

}  // namespace kiln::kernels
