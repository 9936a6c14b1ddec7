#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <cstring>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Trilu";

Status check_rank(const Tensor& x) {
  if (x.dim() >= 2) return Status();
  return internal::invalid_argument(
      kOp, "input 0 has rank " + std::to_string(x.dim()) + " (expected rank >= 2)");
}

Status trilu_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 2, 1));
  KILN_ASSIGN_OR_RETURN(int64_t upper, internal::int_attribute(kOp, attributes, "upper", 1));
  int64_t k = 0;
  if (!internal::is_absent(inputs, 1)) {
    KILN_ASSIGN_OR_RETURN(auto values, internal::read_int_list(kOp, inputs, 1, "k"));
    if (values.size() != 1) {
      return internal::invalid_argument(
          kOp, "input 1 (k) has " + std::to_string(values.size()) + " elements (expected 1)");
    }
    k = values[0];
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_rank(*x));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return trilu(*x, k, upper != 0, out->to_tensor());
}

const runtime::KernelRegistration kRegisterTrilu("Trilu", trilu_kernel);

}  // namespace

Status trilu(const Tensor& x, int64_t k, bool upper, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_rank(x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  const int64_t rows = x.size(x.dim() - 2);
  const int64_t cols = x.size(x.dim() - 1);
  const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  const size_t element = runtime::element_size(x.dtype());
  const auto* in = static_cast<const uint8_t*>(x.data());
  auto* result = static_cast<uint8_t*>(out.mutable_data());
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const size_t at = static_cast<size_t>((m * rows + i) * cols + j) * element;
        // Kept when j - i >= k (upper) or <= k (lower); zero bytes are 0 in every dtype.
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) {
          std::memcpy(result + at, in + at, element);
        } else {
          std::memset(result + at, 0, element);
        }
      }
    }
  }
  return Status();
}

}  // namespace kiln::kernels
