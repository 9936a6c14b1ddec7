// Trigonometric and hyperbolic functions beyond Sin and Cos: Tan, Asin, Acos, Atan, Sinh, Cosh,
// Asinh, Acosh and Atanh. One small family: each op is a functor plus a registration.

#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <cmath>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

// Defines functor `Name`, which evaluates `expression` on `v`, the element loaded in its compute
// type (float for f16 and bf16), and rounds the result once on store.
#define KILN_FLOAT_FN(Name, expression) \
  struct Name {                         \
    template <typename T>               \
    T operator()(T x) const {           \
      const auto v = load(x);           \
      return store<T>(expression);      \
    }                                   \
  };
KILN_FLOAT_FN(TanFn, std::tan(v))
KILN_FLOAT_FN(AsinFn, std::asin(v))
KILN_FLOAT_FN(AcosFn, std::acos(v))
KILN_FLOAT_FN(AtanFn, std::atan(v))
KILN_FLOAT_FN(SinhFn, std::sinh(v))
KILN_FLOAT_FN(CoshFn, std::cosh(v))
KILN_FLOAT_FN(AsinhFn, std::asinh(v))
KILN_FLOAT_FN(AcoshFn, std::acosh(v))
KILN_FLOAT_FN(AtanhFn, std::atanh(v))
#undef KILN_FLOAT_FN

template <const internal::UnaryOp& kSpec>
Status unary_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes&) {
  return internal::run_unary_kernel(kSpec, context, inputs, outputs);
}

constexpr internal::UnaryOp kTan{"Tan", kFloatDtypes, tan};
constexpr internal::UnaryOp kAsin{"Asin", kFloatDtypes, asin};
constexpr internal::UnaryOp kAcos{"Acos", kFloatDtypes, acos};
constexpr internal::UnaryOp kAtan{"Atan", kFloatDtypes, atan};
constexpr internal::UnaryOp kSinh{"Sinh", kFloatDtypes, sinh};
constexpr internal::UnaryOp kCosh{"Cosh", kFloatDtypes, cosh};
constexpr internal::UnaryOp kAsinh{"Asinh", kFloatDtypes, asinh};
constexpr internal::UnaryOp kAcosh{"Acosh", kFloatDtypes, acosh};
constexpr internal::UnaryOp kAtanh{"Atanh", kFloatDtypes, atanh};

const runtime::KernelRegistration kRegisterTan("Tan", unary_kernel<kTan>);
const runtime::KernelRegistration kRegisterAsin("Asin", unary_kernel<kAsin>);
const runtime::KernelRegistration kRegisterAcos("Acos", unary_kernel<kAcos>);
const runtime::KernelRegistration kRegisterAtan("Atan", unary_kernel<kAtan>);
const runtime::KernelRegistration kRegisterSinh("Sinh", unary_kernel<kSinh>);
const runtime::KernelRegistration kRegisterCosh("Cosh", unary_kernel<kCosh>);
const runtime::KernelRegistration kRegisterAsinh("Asinh", unary_kernel<kAsinh>);
const runtime::KernelRegistration kRegisterAcosh("Acosh", unary_kernel<kAcosh>);
const runtime::KernelRegistration kRegisterAtanh("Atanh", unary_kernel<kAtanh>);

}  // namespace

Status tan(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Tan", x, out, TanFn{});
}
Status asin(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Asin", x, out, AsinFn{});
}
Status acos(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Acos", x, out, AcosFn{});
}
Status atan(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Atan", x, out, AtanFn{});
}
Status sinh(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Sinh", x, out, SinhFn{});
}
Status cosh(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Cosh", x, out, CoshFn{});
}
Status asinh(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Asinh", x, out, AsinhFn{});
}
Status acosh(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Acosh", x, out, AcoshFn{});
}
Status atanh(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>("Atanh", x, out, AtanhFn{});
}

}  // namespace kiln::kernels
