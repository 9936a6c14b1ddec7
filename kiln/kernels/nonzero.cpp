#include <kiln/kernels/index_ops.h>
#include <kiln/kernels/index_util.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "NonZero";

// The output's size depends on the data, so the exporter gives it an unbounded (or, with
// --bound, a bounded) tensor; resize then grows it or checks its capacity.
Status nonzero_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                      Span<EValue* const> outputs, const runtime::Attributes&) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", *x));
  KILN_ASSIGN_OR_RETURN(int64_t count, count_nonzero(*x));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::Int64));
  const std::array<int64_t, 2> shape = {std::max<int64_t>(x->dim(), 1), count};
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return nonzero(*x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterNonZero("NonZero", nonzero_kernel);

// Calls `fn(i)` for the flat index i of every non-zero element of `x`, in order.
template <typename Fn>
Status for_each_nonzero(const Tensor& x, Fn&& fn) {
  return dispatch<DtypeGroup::All>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* data = x.data_ptr<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (load(data[i]) != 0) fn(i);
    }
    return Status();
  });
}

}  // namespace

Result<int64_t> count_nonzero(const Tensor& x) {
  int64_t count = 0;
  KILN_RETURN_IF_ERROR(for_each_nonzero(x, [&](int64_t) { ++count; }));
  return count;
}

Status nonzero(const Tensor& x, Tensor& out) {
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_ASSIGN_OR_RETURN(int64_t count, count_nonzero(x));
  const std::array<int64_t, 2> shape = {std::max<int64_t>(x.dim(), 1), count};
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, ScalarType::Int64, shape));
  int64_t* target = out.mutable_data_ptr<int64_t>();
  if (x.dim() == 0) {
    std::fill(target, target + count, int64_t{0});
    return Status();
  }
  const auto strides = internal::dense_strides(x.sizes());
  int64_t column = 0;
  return for_each_nonzero(x, [&](int64_t flat) {
    for (size_t d = 0; d < strides.size(); ++d) {
      target[static_cast<int64_t>(d) * count + column] = flat / strides[d];
      flat %= strides[d];
    }
    ++column;
  });
}

}  // namespace kiln::kernels
