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

constexpr std::string_view kOp = "MatMul";

/// The operands as matrices: a 1-D `a` is the row [1, K], a 1-D `b` the column [K, 1].
struct MatMulDims {
  std::vector<int64_t> batch_a;
  std::vector<int64_t> batch_b;
  int64_t m = 1;
  int64_t k = 0;
  int64_t n = 1;
};

Result<MatMulDims> matmul_dims(Span<const int64_t> a, Span<const int64_t> b) {
  for (auto [index, shape] : {std::pair{0, a}, std::pair{1, b}}) {
    if (shape.empty()) {
      return Status(Error::InvalidArgument,
                    "input " + std::to_string(index) + " has rank 0 (expected rank >= 1)");
    }
  }
  MatMulDims dims;
  const int64_t k_a = a.back();
  const int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k_a != k_b) {
    return Status(Error::InvalidArgument,
                  "inner dimensions differ: input 0 of shape " + runtime::shape_to_string(a) +
                      " has K = " + std::to_string(k_a) + ", input 1 of shape " +
                      runtime::shape_to_string(b) + " has K = " + std::to_string(k_b) +
                      " (expected equal K)");
  }
  dims.k = k_a;
  if (a.size() >= 2) {
    dims.m = a[a.size() - 2];
    dims.batch_a.assign(a.begin(), a.end() - 2);
  }
  if (b.size() >= 2) {
    dims.n = b.back();
    dims.batch_b.assign(b.begin(), b.end() - 2);
  }
  return dims;
}

Status matmul_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* a, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, internal::input_tensor(kOp, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", a->dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 1", b->dtype(), a->dtype()));
  auto shape = matmul_shape(a->sizes(), b->sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, a->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return matmul(*a, *b, out->to_tensor());
}

const runtime::KernelRegistration kRegisterMatMul("MatMul", matmul_kernel);

}  // namespace

Result<std::vector<int64_t>> matmul_shape(Span<const int64_t> a, Span<const int64_t> b) {
  KILN_ASSIGN_OR_RETURN(MatMulDims dims, matmul_dims(a, b));
  auto batch = broadcast_shape(dims.batch_a, dims.batch_b);
  if (!batch.ok()) {
    return batch.status().with_context("batch dimensions of input 0 of shape " +
                                       runtime::shape_to_string(a) + " and input 1 of shape " +
                                       runtime::shape_to_string(b));
  }
  std::vector<int64_t> out = std::move(batch).get();
  if (a.size() >= 2) out.push_back(dims.m);
  if (b.size() >= 2) out.push_back(dims.n);
  return out;
}

Status matmul(const Tensor& a, const Tensor& b, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", a.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 1", b.dtype(), a.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", a));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", b));
  auto shape = matmul_shape(a.sizes(), b.sizes());
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, a.dtype(), *shape));

  const MatMulDims dims = *matmul_dims(a.sizes(), b.sizes());
  const internal::GemmProblem problem{dims.m, dims.n, dims.k};
  // Batch shape = output shape without the matrix dimensions that are really there.
  const size_t matrix_rank = (a.dim() >= 2 ? 1 : 0) + (b.dim() >= 2 ? 1 : 0);
  const std::vector<int64_t> batch(shape->begin(), shape->end() - matrix_rank);
  std::vector<int64_t> stride_a = broadcast_strides(dims.batch_a, batch);
  std::vector<int64_t> stride_b = broadcast_strides(dims.batch_b, batch);
  for (int64_t& s : stride_a) s *= dims.m * dims.k;
  for (int64_t& s : stride_b) s *= dims.k * dims.n;
  const auto loop = make_broadcast_loop<2>(batch, {stride_a, stride_b});
  const int64_t out_matrix = dims.m * dims.n;

  return dispatch<DtypeGroup::Float>(kOp, "input 0", a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<ComputeType<T>> row(static_cast<size_t>(dims.n));
    const T* data_a = a.data_ptr<T>();
    const T* data_b = b.data_ptr<T>();
    T* data_out = out.mutable_data_ptr<T>();
    for_each_broadcast_row(loop, [&](int64_t first, std::array<int64_t, 2> offset, int64_t count,
                                     std::array<int64_t, 2> step) {
      for (int64_t j = 0; j < count; ++j) {
        T* c = data_out + (first + j) * out_matrix;
        internal::gemm_rows(problem, data_a + offset[0] + j * step[0],
                            data_b + offset[1] + j * step[1], row.data(),
                            [&](int64_t i, const ComputeType<T>* values) {
                              for (int64_t col = 0; col < dims.n; ++col) {
                                c[i * dims.n + col] = store<T>(values[col]);
                              }
                            });
      }
    });
    return Status();
  });
}

}  // namespace kiln::kernels
