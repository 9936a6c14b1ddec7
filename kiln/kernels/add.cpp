#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Add";

struct AddFn {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return internal::wrapping(a, b, [](auto x, auto y) { return x + y; });
    } else {
      return store<T>(load(a) + load(b));
    }
  }
};

Status add_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_binary_kernel(kOp, context, inputs, outputs, add);
}

const runtime::KernelRegistration kRegisterAdd("Add", add_kernel);

}  // namespace

Status add(const Tensor& a, const Tensor& b, Tensor& out) {
  return internal::binary_elementwise(kOp, a, b, out, AddFn{}, internal::NoCheck{});
}

}  // namespace kiln::kernels
