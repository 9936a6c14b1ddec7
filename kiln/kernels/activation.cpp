// Activations with attributes: Elu, Selu, LeakyRelu, ThresholdedRelu, HardSigmoid and Gelu. Each
// adapter reads its attributes, then runs like any unary op.

#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <cmath>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;

// Runs `compute(C value, C p0, C p1)` on every element in the compute type C.
template <typename Compute>
Status float_activation(std::string_view op, const Tensor& x, Tensor& out, double p0, double p1,
                        Compute compute) {
  return internal::unary_elementwise<DtypeGroup::Float>(op, x, out, [&](auto v) {
    using T = decltype(v);
    using C = ComputeType<T>;
    return store<T>(compute(load(v), static_cast<C>(p0), static_cast<C>(p1)));
  });
}

// Reads a double attribute, prefixing the op to any error.
Result<double> double_attribute(std::string_view op, const runtime::Attributes& attributes,
                                std::string_view name, double fallback) {
  auto value = attributes.get_double(name, fallback);
  if (!value.ok()) return value.status().with_context(internal::action(op));
  return *value;
}

// Checks the arguments as any unary op, resizes output 0 and returns it.
Result<Tensor*> prepare_unary(std::string_view op, runtime::KernelContext& context,
                              Span<EValue* const> inputs, Span<EValue* const> outputs,
                              const Tensor** x) {
  KILN_RETURN_IF_ERROR(internal::check_arity(op, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(*x, internal::input_tensor(op, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", (*x)->dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(op, outputs, 0, (*x)->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, op, *out, (*x)->sizes()));
  return &out->to_tensor();
}

Status elu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(double alpha, double_attribute("Elu", attributes, "alpha", 1.0));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out, prepare_unary("Elu", context, inputs, outputs, &x));
  return elu(*x, alpha, *out);
}

Status selu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(double alpha, double_attribute("Selu", attributes, "alpha", kSeluAlpha));
  KILN_ASSIGN_OR_RETURN(double gamma, double_attribute("Selu", attributes, "gamma", kSeluGamma));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out, prepare_unary("Selu", context, inputs, outputs, &x));
  return selu(*x, alpha, gamma, *out);
}

Status leaky_relu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                         Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(double alpha, double_attribute("LeakyRelu", attributes, "alpha", 0.01));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out, prepare_unary("LeakyRelu", context, inputs, outputs, &x));
  return leaky_relu(*x, alpha, *out);
}

Status hard_sigmoid_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                           Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(double alpha, double_attribute("HardSigmoid", attributes, "alpha", 0.2));
  KILN_ASSIGN_OR_RETURN(double beta, double_attribute("HardSigmoid", attributes, "beta", 0.5));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out, prepare_unary("HardSigmoid", context, inputs, outputs, &x));
  return hard_sigmoid(*x, alpha, beta, *out);
}

Status gelu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  auto approximate = attributes.get_string("approximate", "none");
  if (!approximate.ok()) return approximate.status().with_context(internal::action("Gelu"));
  GeluApproximation approximation = GeluApproximation::None;
  if (*approximate == "tanh") {
    approximation = GeluApproximation::Tanh;
  } else if (*approximate != "none") {
    return internal::invalid_argument(
        "Gelu", "attribute 'approximate' is '" + *approximate + "' (expected 'none' or 'tanh')");
  }
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out, prepare_unary("Gelu", context, inputs, outputs, &x));
  return gelu(*x, approximation, *out);
}

Status thresholded_relu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                               Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(double alpha,
                        double_attribute("ThresholdedRelu", attributes, "alpha", 1.0));
  const Tensor* x = nullptr;
  KILN_ASSIGN_OR_RETURN(Tensor * out,
                        prepare_unary("ThresholdedRelu", context, inputs, outputs, &x));
  return thresholded_relu(*x, alpha, *out);
}

const runtime::KernelRegistration kRegisterElu("Elu", elu_kernel);
const runtime::KernelRegistration kRegisterThresholdedRelu("ThresholdedRelu",
                                                           thresholded_relu_kernel);
const runtime::KernelRegistration kRegisterSelu("Selu", selu_kernel);
const runtime::KernelRegistration kRegisterLeakyRelu("LeakyRelu", leaky_relu_kernel);
const runtime::KernelRegistration kRegisterHardSigmoid("HardSigmoid", hard_sigmoid_kernel);
const runtime::KernelRegistration kRegisterGelu("Gelu", gelu_kernel);

}  // namespace

Status elu(const Tensor& x, double alpha, Tensor& out) {
  return float_activation("Elu", x, out, alpha, 0,
                          [](auto v, auto a, auto) { return v < 0 ? a * std::expm1(v) : v; });
}

Status selu(const Tensor& x, double alpha, double gamma, Tensor& out) {
  return float_activation("Selu", x, out, alpha, gamma, [](auto v, auto a, auto g) {
    return v > 0 ? g * v : g * a * std::expm1(v);
  });
}

Status leaky_relu(const Tensor& x, double alpha, Tensor& out) {
  return float_activation("LeakyRelu", x, out, alpha, 0,
                          [](auto v, auto a, auto) { return v < 0 ? a * v : v; });
}

Status thresholded_relu(const Tensor& x, double alpha, Tensor& out) {
  return float_activation("ThresholdedRelu", x, out, alpha, 0, [](auto v, auto a, auto) {
    using C = decltype(v);
    return v > a ? v : C{0};
  });
}

Status hard_sigmoid(const Tensor& x, double alpha, double beta, Tensor& out) {
  return float_activation("HardSigmoid", x, out, alpha, beta, [](auto v, auto a, auto b) {
    using C = decltype(v);
    const C y = a * v + b;
    return y < C{0} ? C{0} : y > C{1} ? C{1} : y;
  });
}

Status gelu(const Tensor& x, GeluApproximation approximation, Tensor& out) {
  if (approximation == GeluApproximation::Tanh) {
    return float_activation("Gelu", x, out, 0, 0, [](auto v, auto, auto) {
      using C = decltype(v);
      const C k = static_cast<C>(0.7978845608028654);  // sqrt(2 / pi)
      return C{0.5} * v * (C{1} + std::tanh(k * (v + C{0.044715} * v * v * v)));
    });
  }
  return float_activation("Gelu", x, out, 0, 0, [](auto v, auto, auto) {
    using C = decltype(v);
    return C{0.5} * v * (C{1} + std::erf(v * static_cast<C>(0.7071067811865476)));
  });
}

}  // namespace kiln::kernels
