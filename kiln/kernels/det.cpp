#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Det";

Status det_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes&) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  auto shape = det_shape(x->sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return det(*x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterDet("Det", det_kernel);

// The determinant of the n x n row-major matrix `a` (overwritten): Gaussian elimination with
// partial pivoting, the product of the pivots with one sign flip per row swap.
double lu_determinant(std::vector<double>& a, int64_t n) {
  double result = 1.0;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t row = col + 1; row < n; ++row) {
      if (std::fabs(a[row * n + col]) > std::fabs(a[pivot * n + col])) pivot = row;
    }
    if (a[pivot * n + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[pivot * n + j], a[col * n + j]);
      result = -result;
    }
    const double diagonal = a[col * n + col];
    result *= diagonal;
    for (int64_t row = col + 1; row < n; ++row) {
      const double factor = a[row * n + col] / diagonal;
      for (int64_t j = col; j < n; ++j) a[row * n + j] -= factor * a[col * n + j];
    }
  }
  return result;
}

}  // namespace

Result<std::vector<int64_t>> det_shape(Span<const int64_t> x) {
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2]) {
    return Status(Error::InvalidArgument,
                  "input 0 has shape " + runtime::shape_to_string(x) +
                      " (expected [..., M, M]: rank >= 2 and square in the last two dimensions)");
  }
  return std::vector<int64_t>(x.begin(), x.end() - 2);
}

Status det(const Tensor& x, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  auto shape = det_shape(x.sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), *shape));
  const int64_t n = x.size(x.dim() - 1);
  const int64_t matrices = out.numel();
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    std::vector<double> a(static_cast<size_t>(n * n));
    for (int64_t m = 0; m < matrices; ++m) {
      for (int64_t i = 0; i < n * n; ++i) a[static_cast<size_t>(i)] = load(in[m * n * n + i]);
      result[m] = store<T>(static_cast<ComputeType<T>>(lu_determinant(a, n)));
    }
    return Status();
  });
}

}  // namespace kiln::kernels
