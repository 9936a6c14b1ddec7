#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <cmath>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Sigmoid";

struct SigmoidFn {
  template <typename T>
  T operator()(T x) const {
    using C = ComputeType<T>;
    const C value = load(x);
    // exp of a non-positive number never overflows, so each branch stays finite.
    if (value >= 0) return store<T>(C{1} / (C{1} + std::exp(-value)));
    const C e = std::exp(value);
    return store<T>(e / (C{1} + e));
  }
};

Status sigmoid_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_unary_kernel({kOp, kFloatDtypes, sigmoid}, context, inputs, outputs);
}

const runtime::KernelRegistration kRegisterSigmoid("Sigmoid", sigmoid_kernel);

}  // namespace

Status sigmoid(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>(kOp, x, out, SigmoidFn{});
}

}  // namespace kiln::kernels
