#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <cmath>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Tanh";

struct TanhFn {
  template <typename T>
  T operator()(T x) const {
    return store<T>(std::tanh(load(x)));
  }
};

Status tanh_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_unary_kernel({kOp, kFloatDtypes, kernels::tanh}, context, inputs, outputs);
}

const runtime::KernelRegistration kRegisterTanh("Tanh", tanh_kernel);

}  // namespace

Status tanh(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::Float>(kOp, x, out, TanhFn{});
}

}  // namespace kiln::kernels
