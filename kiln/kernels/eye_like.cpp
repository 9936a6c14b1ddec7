#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <cstring>
#include <string>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "EyeLike";

Status check_matrix(std::string_view subject, const Tensor& t) {
  if (t.dim() == 2) return Status();
  return internal::invalid_argument(
      kOp, std::string(subject) + " has rank " + std::to_string(t.dim()) + " (expected 2)");
}

Status eye_like_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                       Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(int64_t k, internal::int_attribute(kOp, attributes, "k", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_matrix("input 0", *x));
  ScalarType dtype = x->dtype();
  if (attributes.has("dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t onnx_type, internal::int_attribute(kOp, attributes, "dtype", 0));
    auto parsed = scalar_type_from_onnx(onnx_type);
    if (!parsed.ok()) {
      return internal::invalid_argument(
          kOp, "attribute 'dtype' is " + std::to_string(onnx_type) +
                   " (expected an ONNX data type kiln supports: 1 float, 2 uint8, 3 int8, "
                   "5 int16, 6 int32, 7 int64, 9 bool, 10 float16, 11 double, 16 bfloat16)");
    }
    dtype = *parsed;
  }
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor_of_dtype(kOp, outputs, 0, dtype));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return eye_like(k, out->to_tensor());
}

const runtime::KernelRegistration kRegisterEyeLike("EyeLike", eye_like_kernel);

}  // namespace

Status eye_like(int64_t k, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_matrix("output 0", out));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 0", out));
  if (out.nbytes() > 0) std::memset(out.mutable_data(), 0, out.nbytes());
  const int64_t rows = out.size(0);
  const int64_t cols = out.size(1);
  return dispatch<DtypeGroup::All>(kOp, "output 0", out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* result = out.mutable_data_ptr<T>();
    // Row i holds its one at column i + k, when that column exists (k is checked first so
    // that i + k cannot overflow).
    if (k >= cols || k <= -rows) return Status();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < cols) result[i * cols + j] = store<T>(ComputeType<T>(1));
    }
    return Status();
  });
}

}  // namespace kiln::kernels
