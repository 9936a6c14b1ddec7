#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Relu";

struct ReluFn {
  template <typename T>
  T operator()(T x) const {
    // Written so that nan propagates, as numpy's maximum(x, 0) does.
    const auto value = load(x);
    return value < 0 ? store<T>(0) : x;
  }
};

Status relu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_unary_kernel({kOp, kFloatAndIntDtypes, relu}, context, inputs, outputs);
}

const runtime::KernelRegistration kRegisterRelu("Relu", relu_kernel);

}  // namespace

Status relu(const Tensor& x, Tensor& out) {
  return internal::unary_elementwise<DtypeGroup::FloatAndInt>(kOp, x, out, ReluFn{});
}

}  // namespace kiln::kernels
