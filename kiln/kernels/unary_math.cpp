// Element-wise unary math: Abs, Neg, Sign, Exp, Log, Sqrt, Reciprocal, Floor, Ceil, Round, Sin,
// Cos, Erf, Softplus, HardSwish and Not. One small family: each op is a functor plus a
// registration, so they share this file.

#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <cmath>
#include <type_traits>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

// Applies `Op` (a function of the compute type) to a stored float element.
template <typename Op>
struct FloatFn {
  template <typename T>
  T operator()(T x) const {
    return store<T>(Op{}(load(x)));
  }
};

struct AbsFn {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? internal::wrapping(T{0}, x, [](auto a, auto b) { return a - b; }) : x;
    } else {
      return store<T>(std::fabs(load(x)));
    }
  }
};

struct NegFn {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return internal::wrapping(T{0}, x, [](auto a, auto b) { return a - b; });
    } else {
      return store<T>(-load(x));
    }
  }
};

struct SignFn {
  template <typename T>
  T operator()(T x) const {
    const auto value = load(x);
    if (value > 0) return store<T>(1);
    if (value < 0) return store<T>(-1);
    return x;  // 0, -0 and nan keep themselves
  }
};

struct ExpOp {
  template <typename C>
  C operator()(C x) const {
    return std::exp(x);
  }
};
struct LogOp {
  template <typename C>
  C operator()(C x) const {
    return std::log(x);
  }
};
struct SqrtOp {
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};
struct ReciprocalOp {
  template <typename C>
  C operator()(C x) const {
    return C{1} / x;
  }
};
struct FloorOp {
  template <typename C>
  C operator()(C x) const {
    return std::floor(x);
  }
};
struct CeilOp {
  template <typename C>
  C operator()(C x) const {
    return std::ceil(x);
  }
};
struct RoundOp {
  template <typename C>
  C operator()(C x) const {
    // nearbyint rounds in the current mode, round-to-nearest-even unless a caller changed it.
    return std::nearbyint(x);
  }
};
struct SinOp {
  template <typename C>
  C operator()(C x) const {
    return std::sin(x);
  }
};
struct CosOp {
  template <typename C>
  C operator()(C x) const {
    return std::cos(x);
  }
};
struct ErfOp {
  template <typename C>
  C operator()(C x) const {
    return std::erf(x);
  }
};
struct SoftplusOp {
  template <typename C>
  C operator()(C x) const {
    // log(1 + e^x) = x + log(1 + e^-x): the exponent stays <= 0, so nothing overflows.
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
};
struct HardSwishOp {
  template <typename C>
  C operator()(C x) const {
    const C gate = x / C{6} + C{0.5};
    return x * (gate < C{0} ? C{0} : gate > C{1} ? C{1} : gate);
  }
};

template <const internal::UnaryOp& kSpec>
Status unary_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_unary_kernel(kSpec, context, inputs, outputs);
}

constexpr internal::UnaryOp kAbs{"Abs", kFloatAndIntDtypes, abs};
constexpr internal::UnaryOp kNeg{"Neg", kFloatAndIntDtypes, neg};
constexpr internal::UnaryOp kSign{"Sign", kFloatAndIntDtypes, sign};
constexpr internal::UnaryOp kExp{"Exp", kFloatDtypes, exp};
constexpr internal::UnaryOp kLog{"Log", kFloatDtypes, log};
constexpr internal::UnaryOp kSqrt{"Sqrt", kFloatDtypes, sqrt};
constexpr internal::UnaryOp kReciprocal{"Reciprocal", kFloatDtypes, reciprocal};
constexpr internal::UnaryOp kFloor{"Floor", kFloatDtypes, floor};
constexpr internal::UnaryOp kCeil{"Ceil", kFloatDtypes, ceil};
constexpr internal::UnaryOp kRound{"Round", kFloatDtypes, round};
constexpr internal::UnaryOp kSin{"Sin", kFloatDtypes, sin};
constexpr internal::UnaryOp kCos{"Cos", kFloatDtypes, cos};
constexpr internal::UnaryOp kErf{"Erf", kFloatDtypes, erf};
constexpr internal::UnaryOp kSoftplus{"Softplus", kFloatDtypes, softplus};
constexpr internal::UnaryOp kHardSwish{"HardSwish", kFloatDtypes, hard_swish};
constexpr internal::UnaryOp kNot{"Not", kBoolDtypes, logical_not};

const runtime::KernelRegistration kRegisterAbs("Abs", unary_kernel<kAbs>);
const runtime::KernelRegistration kRegisterNeg("Neg", unary_kernel<kNeg>);
const runtime::KernelRegistration kRegisterSign("Sign", unary_kernel<kSign>);
const runtime::KernelRegistration kRegisterExp("Exp", unary_kernel<kExp>);
const runtime::KernelRegistration kRegisterLog("Log", unary_kernel<kLog>);
const runtime::KernelRegistration kRegisterSqrt("Sqrt", unary_kernel<kSqrt>);
const runtime::KernelRegistration kRegisterReciprocal("Reciprocal", unary_kernel<kReciprocal>);
const runtime::KernelRegistration kRegisterFloor("Floor", unary_kernel<kFloor>);
const runtime::KernelRegistration kRegisterCeil("Ceil", unary_kernel<kCeil>);
const runtime::KernelRegistration kRegisterRound("Round", unary_kernel<kRound>);
const runtime::KernelRegistration kRegisterSin("Sin", unary_kernel<kSin>);
const runtime::KernelRegistration kRegisterCos("Cos", unary_kernel<kCos>);
const runtime::KernelRegistration kRegisterErf("Erf", unary_kernel<kErf>);
const runtime::KernelRegistration kRegisterSoftplus("Softplus", unary_kernel<kSoftplus>);
const runtime::KernelRegistration kRegisterHardSwish("HardSwish", unary_kernel<kHardSwish>);
const runtime::KernelRegistration kRegisterNot("Not", unary_kernel<kNot>);

template <typename Op>
Status float_unary(std::string_view op, const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>(op, x, out, FloatFn<Op>{});
}

}  // namespace

Status abs(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::FloatAndInt>("Abs", x, out, AbsFn{});
}
Status neg(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::FloatAndInt>("Neg", x, out, NegFn{});
}
Status sign(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::FloatAndInt>("Sign", x, out, SignFn{});
}
Status exp(const Tensor& x, Tensor& out) { return float_unary<ExpOp>("Exp", x, out); }
Status log(const Tensor& x, Tensor& out) { return float_unary<LogOp>("Log", x, out); }
Status sqrt(const Tensor& x, Tensor& out) { return float_unary<SqrtOp>("Sqrt", x, out); }
Status reciprocal(const Tensor& x, Tensor& out) {
  return float_unary<ReciprocalOp>("Reciprocal", x, out);
}
Status floor(const Tensor& x, Tensor& out) { return float_unary<FloorOp>("Floor", x, out); }
Status ceil(const Tensor& x, Tensor& out) { return float_unary<CeilOp>("Ceil", x, out); }
Status round(const Tensor& x, Tensor& out) { return float_unary<RoundOp>("Round", x, out); }
Status sin(const Tensor& x, Tensor& out) { return float_unary<SinOp>("Sin", x, out); }
Status cos(const Tensor& x, Tensor& out) { return float_unary<CosOp>("Cos", x, out); }
Status erf(const Tensor& x, Tensor& out) { return float_unary<ErfOp>("Erf", x, out); }
Status softplus(const Tensor& x, Tensor& out) {
  return float_unary<SoftplusOp>("Softplus", x, out);
}
Status hard_swish(const Tensor& x, Tensor& out) {
  return float_unary<HardSwishOp>("HardSwish", x, out);
}

Status logical_not(const Tensor& x, Tensor& out) {
  constexpr std::string_view kOp = "Not";
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kBoolDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  const bool* in = x.data_ptr<bool>();
  bool* result = out.mutable_data_ptr<bool>();
  for (int64_t i = 0; i < x.numel(); ++i) result[i] = !in[i];
  return Status();
}

}  // namespace kiln::kernels
