#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <limits>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Div";

struct DivFn {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // INT_MIN / -1 overflows (undefined in C++); two's complement wraps it to INT_MIN.
      if (b == -1) return internal::wrapping(T{0}, a, [](auto x, auto y) { return x - y; });
      return a / b;  // C++ truncates toward zero, as ONNX specifies
    } else {
      return store<T>(load(a) / load(b));
    }
  }
};

// Integer division by zero is undefined behaviour, so zeros are rejected before any work.
struct NoIntegerZero {
  template <typename Tag>
  Status operator()(Tag, const void* data, int64_t numel) const {
    using T = typename Tag::type;
    if constexpr (std::is_integral_v<T>) {
      const T* divisor = static_cast<const T*>(data);
      for (int64_t i = 0; i < numel; ++i) {
        if (divisor[i] == 0) {
          return internal::invalid_argument(kOp, "input 1 has 0 at element " + std::to_string(i) +
                                                     " (expected non-zero integer divisors)");
        }
      }
    }
    return Status();
  }
};

Status div_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_binary_kernel(kOp, context, inputs, outputs, div);
}

const runtime::KernelRegistration kRegisterDiv("Div", div_kernel);

}  // namespace

Status div(const Tensor& a, const Tensor& b, Tensor& out) {
  return internal::binary_elementwise(kOp, a, b, out, DivFn{}, NoIntegerZero{});
}

}  // namespace kiln::kernels
