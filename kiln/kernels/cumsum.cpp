#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <string>
#include <type_traits>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "CumSum";

Status cumsum_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  CumSumOptions options;
  KILN_ASSIGN_OR_RETURN(int64_t exclusive,
                        internal::int_attribute(kOp, attributes, "exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, internal::int_attribute(kOp, attributes, "reverse", 0));
  options.exclusive = exclusive != 0;
  options.reverse = reverse != 0;
  KILN_ASSIGN_OR_RETURN(auto axis, internal::read_int_list(kOp, inputs, 1, "axis"));
  if (axis.size() != 1) {
    return internal::invalid_argument(
        kOp, "input 1 (axis) has " + std::to_string(axis.size()) + " elements (expected 1)");
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatAndIntDtypes));
  KILN_RETURN_IF_ERROR(internal::normalize_axis(kOp, "input 1 (axis)", axis[0], x->dim()).status());
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return cumsum(*x, axis[0], options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterCumSum("CumSum", cumsum_kernel);

// a + b, wrapping for integers.
template <typename A>
A add_acc(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return internal::wrapping(a, b, [](auto p, auto q) { return p + q; });
  } else {
    return a + b;
  }
}

}  // namespace

Status cumsum(const Tensor& x, int64_t axis, const CumSumOptions& options, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatAndIntDtypes));
  KILN_ASSIGN_OR_RETURN(int64_t a, internal::normalize_axis(kOp, "input 1 (axis)", axis, x.dim()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  const int64_t n = x.size(a);
  int64_t inner = 1;
  for (int64_t d = a + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t outer = n * inner == 0 ? 0 : x.numel() / (n * inner);
  return dispatch<DtypeGroup::FloatAndInt>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Floats accumulate in double; integers in T itself, wrapping.
    using Acc = std::conditional_t<std::is_integral_v<T>, T, double>;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        Acc sum{0};
        for (int64_t step = 0; step < n; ++step) {
          const int64_t j = options.reverse ? n - 1 - step : step;
          const int64_t at = (o * n + j) * inner + i;
          const Acc value = static_cast<Acc>(load(in[at]));
          if (!options.exclusive) sum = add_acc(sum, value);
          if constexpr (std::is_integral_v<T>) {
            result[at] = sum;
          } else {
            result[at] = store<T>(static_cast<ComputeType<T>>(sum));
          }
          if (options.exclusive) sum = add_acc(sum, value);
        }
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
