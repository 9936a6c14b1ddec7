// Pow, Mod and PRelu: broadcast binary arithmetic beyond Add/Sub/Mul/Div.

#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

struct PowFn {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) {  // the truncated quotient 1 / a^|b|
          if (a == 1) return 1;
          if (a == -1) return (b % 2 == 0) ? 1 : -1;
          return 0;
        }
      }
      // Square and multiply in unsigned arithmetic, so overflow wraps.
      U result = 1, base = static_cast<U>(a);
      for (T e = b; e > 0; e >>= 1) {
        if (e & 1) result = static_cast<U>(result * base);
        base = static_cast<U>(base * base);
      }
      return static_cast<T>(result);
    } else {
      return store<T>(std::pow(load(a), load(b)));
    }
  }
};

template <bool kFmod>
struct ModFn {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_unsigned_v<T>) {
      return static_cast<T>(a % b);
    } else if constexpr (std::is_integral_v<T>) {
      if (b == -1) return 0;  // INT_MIN % -1 overflows in C++; the remainder is 0
      T r = static_cast<T>(a % b);
      if (!kFmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      const auto x = load(a), y = load(b);
      auto r = std::fmod(x, y);
      if (!kFmod && r != 0 && ((r < 0) != (y < 0))) r += y;
      return store<T>(r);
    }
  }
};

// An integer modulus by zero is undefined, so zeros are rejected before any work.
Status check_integer_divisor(const Tensor& b) {
  return dispatch<DtypeGroup::Numeric>("Mod", "input 1", b.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      const T* divisor = b.data_ptr<T>();
      for (int64_t i = 0; i < b.numel(); ++i) {
        if (divisor[i] == 0) {
          return internal::invalid_argument("Mod", "input 1 has 0 at element " + std::to_string(i) +
                                                       " (expected non-zero integer divisors)");
        }
      }
    }
    return Status();
  });
}

struct PReluFn {
  template <typename T>
  T operator()(T x, T slope) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? internal::wrapping(x, slope, [](auto p, auto q) { return p * q; }) : x;
    } else {
      const auto value = load(x);
      return value < 0 ? store<T>(value * load(slope)) : x;
    }
  }
};

// A base and exponent of different dtypes (ONNX's T and T1): each f32, f64, f16, bf16, i32 or
// i64.
Status check_exponent(const Tensor& a, const Tensor& b) {
  KILN_RETURN_IF_ERROR(check_dtype("Pow", "input 0", a.dtype(), kFloatAndIntDtypes));
  return check_dtype("Pow", "input 1", b.dtype(), kFloatAndIntDtypes);
}

// An integer power computed in double, truncated and saturated to T (as Cast does).
template <typename T>
T integer_result(double value) {
  if (std::isnan(value)) return 0;
  const double truncated = std::trunc(value);
  if (truncated <= static_cast<double>(std::numeric_limits<T>::lowest())) {
    return std::numeric_limits<T>::lowest();
  }
  if (truncated >= static_cast<double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  return static_cast<T>(truncated);
}

Status pow_mixed(const Tensor& a, const Tensor& b, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_exponent(a, b));
  KILN_RETURN_IF_ERROR(internal::check_contiguous("Pow", "input 0", a));
  KILN_RETURN_IF_ERROR(internal::check_contiguous("Pow", "input 1", b));
  auto shape = broadcast_shape(a.sizes(), b.sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action("Pow"));
  KILN_RETURN_IF_ERROR(internal::check_output("Pow", out, a.dtype(), *shape));
  const auto loop = make_broadcast_loop<2>(
      *shape, {broadcast_strides(a.sizes(), *shape), broadcast_strides(b.sizes(), *shape)});
  return dispatch<DtypeGroup::FloatAndInt>("Pow", "input 0", a.dtype(), [&](auto base_tag) {
    using T = typename decltype(base_tag)::type;
    using C = ComputeType<T>;
    return dispatch<DtypeGroup::FloatAndInt>("Pow", "input 1", b.dtype(), [&](auto exp_tag) {
      using E = typename decltype(exp_tag)::type;
      const T* base = a.data_ptr<T>();
      const E* exponent = b.data_ptr<E>();
      T* result = out.mutable_data_ptr<T>();
      for_each_broadcast_row(loop, [&](int64_t o, std::array<int64_t, 2> in, int64_t count,
                                       std::array<int64_t, 2> stride) {
        for (int64_t i = 0; i < count; ++i) {
          const auto x = load(base[in[0] + i * stride[0]]);
          const auto y = load(exponent[in[1] + i * stride[1]]);
          if constexpr (std::is_integral_v<T>) {
            result[o + i] =
                integer_result<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
          } else {
            result[o + i] = store<T>(std::pow(x, static_cast<C>(y)));
          }
        }
      });
      return Status();
    });
  });
}

constexpr internal::BinaryOp kPow{"Pow", kNumericDtypes, false, pow};
constexpr internal::BinaryOp kMod{"Mod", kNumericDtypes, false, nullptr};
constexpr internal::BinaryOp kPRelu{"PRelu", kFloatAndIntDtypes, false, prelu};

Status pow_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity("Pow", inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* a, internal::input_tensor("Pow", inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, internal::input_tensor("Pow", inputs, 1));
  if (a->dtype() == b->dtype())
    return internal::run_binary_op_kernel(kPow, context, inputs, outputs);
  // ONNX lets the exponent have its own dtype (T1); kiln supports that for float bases.
  KILN_RETURN_IF_ERROR(check_exponent(*a, *b));
  auto shape = broadcast_shape(a->sizes(), b->sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action("Pow"));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor("Pow", outputs, 0, a->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, "Pow", *out, *shape));
  return pow(*a, *b, out->to_tensor());
}

Status mod_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  auto fmod = attributes.get_int("fmod", 0);
  if (!fmod.ok()) return fmod.status().with_context(internal::action("Mod"));
  if (*fmod != 0 && *fmod != 1) {
    return internal::invalid_argument(
        "Mod", "attribute 'fmod' is " + std::to_string(*fmod) + " (expected 0 or 1)");
  }
  KILN_ASSIGN_OR_RETURN(auto args, internal::prepare_binary(kMod, context, inputs, outputs));
  return mod(*args.a, *args.b, *fmod == 1, *args.out);
}

Status prelu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity("PRelu", inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor("PRelu", inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* slope, internal::input_tensor("PRelu", inputs, 1));
  if (!broadcasts_to(slope->sizes(), x->sizes())) {
    return internal::invalid_argument(
        "PRelu", "input 1 (slope) has shape " + runtime::shape_to_string(slope->sizes()) +
                     " (expected a shape that broadcasts to " +
                     runtime::shape_to_string(x->sizes()) + ", the shape of input 0)");
  }
  return internal::run_binary_op_kernel(kPRelu, context, inputs, outputs);
}

const runtime::KernelRegistration kRegisterPow("Pow", pow_kernel);
const runtime::KernelRegistration kRegisterMod("Mod", mod_kernel);
const runtime::KernelRegistration kRegisterPRelu("PRelu", prelu_kernel);

}  // namespace

Status pow(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.dtype() != b.dtype()) return pow_mixed(a, b, out);
  return internal::binary_elementwise("Pow", a, b, out, PowFn{}, internal::NoCheck{});
}

Status mod(const Tensor& a, const Tensor& b, bool fmod, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype("Mod", "input 0", a.dtype(), kNumericDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype("Mod", "input 1", b.dtype(), a.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous("Mod", "input 1", b));
  KILN_RETURN_IF_ERROR(check_integer_divisor(b));
  if (fmod) {
    return internal::binary_map<DtypeGroup::Numeric>("Mod", a, b, out, a.dtype(), ModFn<true>{});
  }
  return internal::binary_map<DtypeGroup::Numeric>("Mod", a, b, out, a.dtype(), ModFn<false>{});
}

Status prelu(const Tensor& x, const Tensor& slope, Tensor& out) {
  if (!broadcasts_to(slope.sizes(), x.sizes())) {
    return internal::invalid_argument(
        "PRelu", "input 1 (slope) has shape " + runtime::shape_to_string(slope.sizes()) +
                     " (expected a shape that broadcasts to " +
                     runtime::shape_to_string(x.sizes()) + ", the shape of input 0)");
  }
  return internal::binary_map<DtypeGroup::FloatAndInt>("PRelu", x, slope, out, x.dtype(),
                                                       PReluFn{});
}

}  // namespace kiln::kernels
