#include <kiln/kernels/adapter.h>
#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/gemm_rows.h>
#include <kiln/kernels/kernels.h>

#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Gemm";

Result<internal::GemmProblem> gemm_problem(Span<const int64_t> a, Span<const int64_t> b,
                                           const GemmOptions& options) {
  for (auto [index, shape] : {std::pair{0, a}, std::pair{1, b}}) {
    if (shape.size() != 2) {
      return Status(Error::InvalidArgument, "input " + std::to_string(index) + " of shape " +
                                                runtime::shape_to_string(shape) + " has rank " +
                                                std::to_string(shape.size()) + " (expected 2)");
    }
  }
  internal::GemmProblem p;
  p.trans_a = options.trans_a;
  p.trans_b = options.trans_b;
  p.m = p.trans_a ? a[1] : a[0];
  p.k = p.trans_a ? a[0] : a[1];
  p.n = p.trans_b ? b[0] : b[1];
  const int64_t k_b = p.trans_b ? b[1] : b[0];
  if (p.k != k_b) {
    return Status(Error::InvalidArgument,
                  "inner dimensions differ: input 0 of shape " + runtime::shape_to_string(a) +
                      " with transA = " + std::to_string(p.trans_a) +
                      " has K = " + std::to_string(p.k) + ", input 1 of shape " +
                      runtime::shape_to_string(b) + " with transB = " + std::to_string(p.trans_b) +
                      " has K = " + std::to_string(k_b) + " (expected equal K)");
  }
  return p;
}

Result<GemmOptions> read_options(const runtime::Attributes& attributes) {
  GemmOptions options;
  KILN_ASSIGN_OR_RETURN(options.alpha, attributes.get_double("alpha", 1.0));
  KILN_ASSIGN_OR_RETURN(options.beta, attributes.get_double("beta", 1.0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, attributes.get_int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, attributes.get_int("transB", 0));
  options.trans_a = trans_a != 0;
  options.trans_b = trans_b != 0;
  return options;
}

Status gemm_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 3, 1));
  auto options = read_options(attributes);
  if (!options.ok()) return options.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* a, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", a->dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 1", b->dtype(), a->dtype()));
  const Tensor* c = nullptr;
  if (!internal::is_absent(inputs, 2)) {
    KILN_ASSIGN_OR_RETURN(c, internal::input_tensor(kOp, inputs, 2));
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 2", c->dtype(), a->dtype()));
  }
  std::vector<int64_t> c_sizes;
  if (c != nullptr) c_sizes.assign(c->sizes().begin(), c->sizes().end());
  auto shape = gemm_shape(a->sizes(), b->sizes(), c != nullptr ? &c_sizes : nullptr, *options);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, a->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return gemm(*a, *b, c, out->to_tensor(), *options);
}

const runtime::KernelRegistration kRegisterGemm("Gemm", gemm_kernel);

}  // namespace

Result<std::vector<int64_t>> gemm_shape(Span<const int64_t> a, Span<const int64_t> b,
                                        const std::vector<int64_t>* c, const GemmOptions& options) {
  KILN_ASSIGN_OR_RETURN(internal::GemmProblem p, gemm_problem(a, b, options));
  std::vector<int64_t> out = {p.m, p.n};
  if (c != nullptr && !broadcasts_to(*c, out)) {
    return Status(Error::InvalidArgument, "input 2 has shape " + runtime::shape_to_string(*c) +
                                              " (expected a shape that broadcasts to " +
                                              runtime::shape_to_string(out) + ")");
  }
  return out;
}

Status gemm(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& out,
            const GemmOptions& options) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", a.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 1", b.dtype(), a.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", a));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", b));
  std::vector<int64_t> c_sizes;
  if (c != nullptr) {
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 2", c->dtype(), a.dtype()));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2", *c));
    c_sizes.assign(c->sizes().begin(), c->sizes().end());
  }
  auto shape = gemm_shape(a.sizes(), b.sizes(), c != nullptr ? &c_sizes : nullptr, options);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, a.dtype(), *shape));

  const internal::GemmProblem problem = *gemm_problem(a.sizes(), b.sizes(), options);
  // BLAS convention: with beta = 0, C is not read, so nan or inf in C does not leak through.
  const bool use_c = c != nullptr && options.beta != 0.0;
  std::vector<int64_t> c_strides = {0, 0};
  if (use_c) c_strides = broadcast_strides(c_sizes, *shape);

  return dispatch<DtypeGroup::Float>(kOp, "input 0", a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const auto alpha = static_cast<C>(options.alpha);
    const auto beta = static_cast<C>(options.beta);
    const T* data_c = use_c ? c->data_ptr<T>() : nullptr;
    T* data_out = out.mutable_data_ptr<T>();
    std::vector<C> row(static_cast<size_t>(problem.n));
    internal::gemm_rows(
        problem, a.data_ptr<T>(), b.data_ptr<T>(), row.data(), [&](int64_t i, const C* values) {
          T* out_row = data_out + i * problem.n;
          if (data_c == nullptr) {
            for (int64_t j = 0; j < problem.n; ++j) {
              out_row[j] = store<T>(alpha * values[j]);
            }
            return;
          }
          const T* c_row = data_c + i * c_strides[0];
          for (int64_t j = 0; j < problem.n; ++j) {
            out_row[j] = store<T>(alpha * values[j] + beta * load(c_row[j * c_strides[1]]));
          }
        });
    return Status();
  });
}

}  // namespace kiln::kernels
