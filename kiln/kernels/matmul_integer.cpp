#include <kiln/kernels/adapter.h>
#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/quant_internal.h>
#include <kiln/kernels/quant_ops.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::array<ScalarType, 2> kQuantDtypes = {ScalarType::UInt8, ScalarType::Int8};

// The operands as stacks of matrices: a 1-D `a` is the row [1, K], a 1-D `b` the column [K, 1].
struct IntegerProblem {
  int64_t m = 1, k = 0, n = 1;
  int64_t batches = 1;
  std::vector<int64_t> offset_a, offset_b;  // per output matrix, in elements
};

Result<IntegerProblem> integer_problem(std::string_view op, const Tensor& a, const Tensor& b,
                                       std::vector<int64_t>& out_shape) {
  auto shape = matmul_shape(a.sizes(), b.sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action(op));
  out_shape = std::move(shape).get();
  IntegerProblem p;
  p.k = a.sizes().back();
  std::vector<int64_t> batch_a, batch_b;
  if (a.dim() >= 2) {
    p.m = a.size(a.dim() - 2);
    batch_a.assign(a.sizes().begin(), a.sizes().end() - 2);
  }
  if (b.dim() >= 2) {
    p.n = b.size(b.dim() - 1);
    batch_b.assign(b.sizes().begin(), b.sizes().end() - 2);
  }
  const size_t matrix_rank = (a.dim() >= 2 ? 1 : 0) + (b.dim() >= 2 ? 1 : 0);
  const std::vector<int64_t> batch(out_shape.begin(), out_shape.end() - matrix_rank);
  const std::vector<int64_t> stride_a = broadcast_strides(batch_a, batch);
  const std::vector<int64_t> stride_b = broadcast_strides(batch_b, batch);
  for (int64_t size : batch) p.batches *= size;
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t i = 0; i < p.batches; ++i) {
    int64_t at_a = 0, at_b = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      at_a += index[d] * stride_a[d];
      at_b += index[d] * stride_b[d];
    }
    p.offset_a.push_back(at_a * p.m * p.k);
    p.offset_b.push_back(at_b * p.k * p.n);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  return p;
}

// A zero point or scale of `operand`: one value, or (2-D operand only) one per row of a
// (`per` = M) or per column of b (`per` = N). Returns how many values it holds.
Result<int64_t> parameter_count(std::string_view op, std::string_view name, const Tensor& t,
                                const Tensor& operand, int64_t per) {
  if (t.numel() == 1 && t.dim() <= 1) return int64_t{1};
  if (t.dim() == 1 && t.size(0) == per && operand.dim() == 2) return per;
  return Status(Error::NotSupported, internal::action(op) + ": " + std::string(name) +
                                         " has shape " + runtime::shape_to_string(t.sizes()) +
                                         " (expected [] or [1], or [" + std::to_string(per) +
                                         "] for a 2-D operand)");
}

// Calls `epilogue(matrix, i, acc)` with row i of the exact integer product
// (a - a_zp) x (b - b_zp) of output matrix `matrix`. i-k-j order: the inner loop streams a
// row of b and the accumulators with unit stride.
template <typename A, typename B, typename Epilogue>
void integer_rows(const IntegerProblem& p, const A* a, const B* b,
                  const std::vector<int32_t>& a_zero_points,
                  const std::vector<int32_t>& b_zero_points, Epilogue&& epilogue) {
  std::vector<int32_t> acc(static_cast<size_t>(p.n));
  std::vector<int32_t> b_centered(static_cast<size_t>(p.n));
  auto b_zp = [&](int64_t j) { return b_zero_points[b_zero_points.size() == 1 ? 0 : j]; };
  for (int64_t mat = 0; mat < p.batches; ++mat) {
    const A* a_mat = a + p.offset_a[static_cast<size_t>(mat)];
    const B* b_mat = b + p.offset_b[static_cast<size_t>(mat)];
    for (int64_t i = 0; i < p.m; ++i) {
      const int32_t a_zp = a_zero_points[a_zero_points.size() == 1 ? 0 : i];
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const int32_t av = static_cast<int32_t>(a_mat[i * p.k + kk]) - a_zp;
        if (av == 0) continue;
        const B* b_row = b_mat + kk * p.n;
        for (int64_t j = 0; j < p.n; ++j) {
          // Unsigned arithmetic so that overflow wraps instead of being undefined.
          acc[j] = static_cast<int32_t>(static_cast<uint32_t>(acc[j]) +
                                        static_cast<uint32_t>(av) *
                                            static_cast<uint32_t>(b_row[j] - b_zp(j)));
        }
      }
      epilogue(mat, i, acc.data());
    }
  }
}

template <typename Fn>
Status dispatch_pair(std::string_view op, ScalarType a, ScalarType b, Fn&& fn) {
  KILN_RETURN_IF_ERROR(check_dtype(op, "input a", a, kQuantDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(op, "input b", b, kQuantDtypes));
  auto with_b = [&](auto a_tag) {
    if (b == ScalarType::UInt8) return fn(a_tag, TypeTag<uint8_t>{});
    return fn(a_tag, TypeTag<int8_t>{});
  };
  if (a == ScalarType::UInt8) return with_b(TypeTag<uint8_t>{});
  return with_b(TypeTag<int8_t>{});
}

struct IntegerPlan {
  IntegerProblem problem;
  int64_t a_count = 1;  // zero points (and scales) of a: 1 or M
  int64_t b_count = 1;  // of b: 1 or N
};

// Every check of MatMulInteger but the output's; `shape` receives the output shape.
Result<IntegerPlan> plan_matmul_integer(const Tensor& a, const Tensor& b,
                                        const Tensor* a_zero_point, const Tensor* b_zero_point,
                                        std::vector<int64_t>& shape) {
  constexpr std::string_view kOp = "MatMulInteger";
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (A)", a.dtype(), kQuantDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (B)", b.dtype(), kQuantDtypes));
  if (a_zero_point != nullptr) {
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 2 (a_zero_point)",
                                                    a_zero_point->dtype(), a.dtype()));
  }
  if (b_zero_point != nullptr) {
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 3 (b_zero_point)",
                                                    b_zero_point->dtype(), b.dtype()));
  }
  for (const Tensor* t : {&a, &b, a_zero_point, b_zero_point}) {
    if (t != nullptr) KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "an input", *t));
  }
  KILN_ASSIGN_OR_RETURN(IntegerProblem p, integer_problem(kOp, a, b, shape));
  int64_t a_count = 1, b_count = 1;
  if (a_zero_point != nullptr) {
    KILN_ASSIGN_OR_RETURN(a_count,
                          parameter_count(kOp, "input 2 (a_zero_point)", *a_zero_point, a, p.m));
  }
  if (b_zero_point != nullptr) {
    KILN_ASSIGN_OR_RETURN(b_count,
                          parameter_count(kOp, "input 3 (b_zero_point)", *b_zero_point, b, p.n));
  }
  return IntegerPlan{std::move(p), a_count, b_count};
}

// Every check of QLinearMatMul but the output's; `shape` receives the output shape.
Result<IntegerPlan> plan_qlinear_matmul(const QLinearMatMulInputs& in,
                                        std::vector<int64_t>& shape) {
  constexpr std::string_view kOp = "QLinearMatMul";
  const Tensor* all[] = {in.a,       in.a_scale,      in.a_zero_point, in.b,
                         in.b_scale, in.b_zero_point, in.y_scale,      in.y_zero_point};
  for (size_t i = 0; i < 8; ++i) {
    if (all[i] == nullptr) {
      return internal::invalid_argument(
          kOp, "input " + std::to_string(i) + " is absent (expected all 8 inputs)");
    }
    KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input " + std::to_string(i), *all[i]));
  }
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (a)", in.a->dtype(), kQuantDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 3 (b)", in.b->dtype(), kQuantDtypes));
  KILN_RETURN_IF_ERROR(
      check_dtype(kOp, "input 7 (y_zero_point)", in.y_zero_point->dtype(), kQuantDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 2 (a_zero_point)",
                                                  in.a_zero_point->dtype(), in.a->dtype()));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 5 (b_zero_point)",
                                                  in.b_zero_point->dtype(), in.b->dtype()));
  for (auto [name, t] :
       {std::pair{"input 1 (a_scale)", in.a_scale}, std::pair{"input 4 (b_scale)", in.b_scale},
        std::pair{"input 6 (y_scale)", in.y_scale}}) {
    KILN_RETURN_IF_ERROR(check_dtype(kOp, name, t->dtype(), kFloatDtypes));
  }
  KILN_ASSIGN_OR_RETURN(IntegerProblem p, integer_problem(kOp, *in.a, *in.b, shape));
  KILN_ASSIGN_OR_RETURN(int64_t a_count,
                        parameter_count(kOp, "input 1 (a_scale)", *in.a_scale, *in.a, p.m));
  KILN_ASSIGN_OR_RETURN(int64_t b_count,
                        parameter_count(kOp, "input 4 (b_scale)", *in.b_scale, *in.b, p.n));
  for (auto [name, t, count] :
       {std::tuple{"input 2 (a_zero_point)", in.a_zero_point, a_count},
        std::tuple{"input 5 (b_zero_point)", in.b_zero_point, b_count},
        std::tuple{"input 6 (y_scale)", in.y_scale, int64_t{1}},
        std::tuple{"input 7 (y_zero_point)", in.y_zero_point, int64_t{1}}}) {
    if (t->numel() != count || t->dim() > 1) {
      return internal::invalid_argument(
          kOp, std::string(name) + " has shape " + runtime::shape_to_string(t->sizes()) +
                   " (expected " + std::to_string(count) + " value(s), as its scale)");
    }
  }
  return IntegerPlan{std::move(p), a_count, b_count};
}

}  // namespace

Status matmul_integer(const Tensor& a, const Tensor& b, const Tensor* a_zero_point,
                      const Tensor* b_zero_point, Tensor& out) {
  constexpr std::string_view kOp = "MatMulInteger";
  std::vector<int64_t> shape;
  KILN_ASSIGN_OR_RETURN(IntegerPlan plan,
                        plan_matmul_integer(a, b, a_zero_point, b_zero_point, shape));
  const IntegerProblem& p = plan.problem;
  const int64_t a_count = plan.a_count;
  const int64_t b_count = plan.b_count;
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, ScalarType::Int32, shape));
  const auto a_zp = internal::zero_point_values(a_zero_point, static_cast<size_t>(a_count));
  const auto b_zp = internal::zero_point_values(b_zero_point, static_cast<size_t>(b_count));
  int32_t* result = out.mutable_data_ptr<int32_t>();
  return dispatch_pair(kOp, a.dtype(), b.dtype(), [&](auto a_tag, auto b_tag) {
    using A = typename decltype(a_tag)::type;
    using B = typename decltype(b_tag)::type;
    integer_rows(p, a.data_ptr<A>(), b.data_ptr<B>(), a_zp, b_zp,
                 [&](int64_t mat, int64_t i, const int32_t* acc) {
                   std::copy(acc, acc + p.n, result + (mat * p.m + i) * p.n);
                 });
    return Status();
  });
}

Status qlinear_matmul(const QLinearMatMulInputs& in, Tensor& out) {
  constexpr std::string_view kOp = "QLinearMatMul";
  std::vector<int64_t> shape;
  KILN_ASSIGN_OR_RETURN(IntegerPlan plan, plan_qlinear_matmul(in, shape));
  const IntegerProblem& p = plan.problem;
  const int64_t a_count = plan.a_count;
  const int64_t b_count = plan.b_count;
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, in.y_zero_point->dtype(), shape));
  const auto a_zp = internal::zero_point_values(in.a_zero_point, static_cast<size_t>(a_count));
  const auto b_zp = internal::zero_point_values(in.b_zero_point, static_cast<size_t>(b_count));
  const int32_t y_zp = internal::zero_point_values(in.y_zero_point, 1)[0];
  const auto a_scale = internal::float_values(*in.a_scale);
  const auto b_scale = internal::float_values(*in.b_scale);
  const double y_scale = internal::float_values(*in.y_scale)[0];
  const bool y_signed = in.y_zero_point->dtype() == ScalarType::Int8;
  const double lo = y_signed ? -128.0 : 0.0;
  const double hi = y_signed ? 127.0 : 255.0;
  return dispatch_pair(kOp, in.a->dtype(), in.b->dtype(), [&](auto a_tag, auto b_tag) {
    using A = typename decltype(a_tag)::type;
    using B = typename decltype(b_tag)::type;
    integer_rows(p, in.a->data_ptr<A>(), in.b->data_ptr<B>(), a_zp, b_zp,
                 [&](int64_t mat, int64_t i, const int32_t* acc) {
                   const double row_scale = a_scale[a_count == 1 ? 0 : i] / y_scale;
                   const int64_t base = (mat * p.m + i) * p.n;
                   for (int64_t j = 0; j < p.n; ++j) {
                     const double real = acc[j] * (row_scale * b_scale[b_count == 1 ? 0 : j]);
                     const double q = std::min(std::max(std::nearbyint(real) + y_zp, lo), hi);
                     if (y_signed) {
                       out.mutable_data_ptr<int8_t>()[base + j] = static_cast<int8_t>(q);
                     } else {
                       out.mutable_data_ptr<uint8_t>()[base + j] = static_cast<uint8_t>(q);
                     }
                   }
                 });
    return Status();
  });
}

namespace {

Status matmul_integer_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                             Span<EValue* const> outputs, const runtime::Attributes&) {
  constexpr std::string_view kOp = "MatMulInteger";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 4, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* a, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, internal::input_tensor(kOp, inputs, 1));
  const Tensor* zero_points[2] = {nullptr, nullptr};
  for (size_t i = 2; i < 4; ++i) {
    if (internal::is_absent(inputs, i)) continue;
    KILN_ASSIGN_OR_RETURN(zero_points[i - 2], internal::input_tensor(kOp, inputs, i));
  }
  std::vector<int64_t> shape;
  KILN_ASSIGN_OR_RETURN(IntegerPlan plan,
                        plan_matmul_integer(*a, *b, zero_points[0], zero_points[1], shape));
  (void)plan;
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::Int32));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return matmul_integer(*a, *b, zero_points[0], zero_points[1], out->to_tensor());
}

Status qlinear_matmul_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                             Span<EValue* const> outputs, const runtime::Attributes&) {
  constexpr std::string_view kOp = "QLinearMatMul";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 8, 8, 1));
  const Tensor* t[8];
  for (size_t i = 0; i < 8; ++i) {
    KILN_ASSIGN_OR_RETURN(t[i], internal::input_tensor(kOp, inputs, i));
  }
  const QLinearMatMulInputs in{t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]};
  std::vector<int64_t> shape;
  KILN_ASSIGN_OR_RETURN(IntegerPlan plan, plan_qlinear_matmul(in, shape));
  (void)plan;
  KILN_ASSIGN_OR_RETURN(
      EValue * out, internal::output_tensor_of_dtype(kOp, outputs, 0, in.y_zero_point->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return qlinear_matmul(in, out->to_tensor());
}

const runtime::KernelRegistration kRegisterMatMulInteger("MatMulInteger", matmul_integer_kernel);
const runtime::KernelRegistration kRegisterQLinearMatMul("QLinearMatMul", qlinear_matmul_kernel);

}  // namespace

}  // namespace kiln::kernels
