#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

// Softmax and LogSoftmax share the adapter and the loops; kLog picks the op.
template <bool kLog>
Status softmax_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = kLog ? "LogSoftmax" : "Softmax";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  auto axis = attributes.get_int("axis", -1);
  if (!axis.ok()) return axis.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  auto normalized = normalize_softmax_axis(*axis, x->dim());
  if (!normalized.ok()) return normalized.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return kLog ? log_softmax(*x, *normalized, out->to_tensor())
              : softmax(*x, *normalized, out->to_tensor());
}

const runtime::KernelRegistration kRegisterSoftmax("Softmax", softmax_kernel<false>);
const runtime::KernelRegistration kRegisterLogSoftmax("LogSoftmax", softmax_kernel<true>);

/// Softmax (or, with kLog, log-softmax) of the `n` elements at `x[0], x[stride], ...` into
/// `out` (which may be `x`), using `scratch` (n values) for the exponentials.
template <bool kLog, typename T>
void softmax_line(const T* x, T* out, int64_t n, int64_t stride, ComputeType<T>* scratch) {
  using C = ComputeType<T>;
  // Subtracting the max keeps every exp in (0, 1], so large logits cannot overflow.
  C max = -std::numeric_limits<C>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const C value = load(x[j * stride]);
    if (value > max) max = value;
  }
  // Below this, exp's result is not a normal number: libm takes a slow path (underflow, errno)
  // for a value that cannot change the sum, which is at least 1. Masked logits (attention's
  // -1e9 or -inf) all land there, so they are 0 without calling exp.
  constexpr C kUnderflow = std::is_same_v<C, float> ? C(-87) : C(-708);
  C sum{0};
  for (int64_t j = 0; j < n; ++j) {
    const C shifted = load(x[j * stride]) - max;
    scratch[j] = shifted < kUnderflow ? C{0} : std::exp(shifted);
    sum += scratch[j];
  }
  if constexpr (kLog) {
    // log(e^(x - max) / sum) = x - max - log(sum): no exp is rounded to 0 before the log.
    const C log_sum = std::log(sum);
    for (int64_t j = 0; j < n; ++j) out[j * stride] = store<T>(load(x[j * stride]) - max - log_sum);
  } else {
    for (int64_t j = 0; j < n; ++j) out[j * stride] = store<T>(scratch[j] / sum);
  }
}

template <bool kLog>
Status run_softmax(const Tensor& x, int64_t axis, Tensor& out) {
  constexpr std::string_view kOp = kLog ? "LogSoftmax" : "Softmax";
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), x.sizes()));
  auto normalized = normalize_softmax_axis(axis, x.dim());
  if (!normalized.ok()) return normalized.status().with_context(internal::action(kOp));
  int64_t outer = 1;
  int64_t inner = 1;
  for (int64_t d = 0; d < *normalized; ++d) outer *= x.size(d);
  for (int64_t d = *normalized + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t n = x.size(*normalized);

  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<ComputeType<T>> scratch(static_cast<size_t>(n));
    const T* in = x.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        softmax_line<kLog>(in + base, result + base, n, inner, scratch.data());
      }
    }
    return Status();
  });
}

}  // namespace

Result<int64_t> normalize_softmax_axis(int64_t axis, int64_t rank) {
  if (rank == 0) {
    return Status(Error::InvalidArgument, "input 0 has rank 0 (expected rank >= 1)");
  }
  if (axis < -rank || axis >= rank) {
    return Status(Error::InvalidArgument, "attribute 'axis' is " + std::to_string(axis) +
                                              " (expected " + std::to_string(-rank) + ".." +
                                              std::to_string(rank - 1) + " for input 0 of rank " +
                                              std::to_string(rank) + ")");
  }
  return axis < 0 ? axis + rank : axis;
}

Status softmax(const Tensor& x, int64_t axis, Tensor& out) {
  return run_softmax<false>(x, axis, out);
}

Status log_softmax(const Tensor& x, int64_t axis, Tensor& out) {
  return run_softmax<true>(x, axis, out);
}

}  // namespace kiln::kernels
