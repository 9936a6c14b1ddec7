#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Hardmax";

// The opset-13 form: older models reach the kernel through ONNX's version converter, which
// rewrites their flatten-to-2-D semantics into Flatten, Hardmax and Reshape nodes.
Status hardmax_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(kOp, attributes, "axis", -1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::normalize_axis(kOp, "attribute 'axis'", axis, x->dim()).status());
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return hardmax(*x, axis, /*flatten=*/false, out->to_tensor());
}

const runtime::KernelRegistration kRegisterHardmax("Hardmax", hardmax_kernel);

}  // namespace

Status hardmax(const Tensor& x, int64_t axis, bool flatten, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_ASSIGN_OR_RETURN(int64_t a,
                        internal::normalize_axis(kOp, "attribute 'axis'", axis, x.dim()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  // A line is n elements `inner` apart; the flattened form is rows of everything from `axis`.
  int64_t n = 1;
  int64_t inner = 1;
  for (int64_t d = a; d < x.dim(); ++d) n *= x.size(d);
  if (!flatten) {
    n = x.size(a);
    for (int64_t d = a + 1; d < x.dim(); ++d) inner *= x.size(d);
  }
  const int64_t outer = n * inner == 0 ? 0 : x.numel() / (n * inner);
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        // The first maximum wins (as numpy argmax); a nan is the maximum.
        int64_t best = 0;
        C best_value = load(in[base]);
        for (int64_t j = 1; j < n && best_value == best_value; ++j) {
          const C value = load(in[base + j * inner]);
          if (value > best_value || value != value) {
            best = j;
            best_value = value;
          }
        }
        for (int64_t j = 0; j < n; ++j) {
          result[base + j * inner] = store<T>(static_cast<C>(j == best ? 1 : 0));
        }
      }
    }
    return Status();
  });
}

}  // namespace kiln::kernels
