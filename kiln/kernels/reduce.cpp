// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd and ReduceL2. One walk over the
// input, in row-major order, accumulates each element into its output slot.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

// The axes of a reduction node: input 1 when present (ReduceSum from opset 13, the others
// from opset 18), else attribute 'axes'. Empty axes reduce everything unless
// noop_with_empty_axes, which makes the op an identity.
constexpr std::string_view op_name(ReduceKind kind) {
  constexpr std::string_view kNames[] = {
      "ReduceSum", "ReduceMean", "ReduceMax",       "ReduceMin",    "ReduceProd",
      "ReduceL2",  "ReduceL1",   "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
  return kNames[static_cast<int>(kind)];
}

constexpr Span<const runtime::ScalarType> dtypes_for(ReduceKind kind) {
  return kind == ReduceKind::LogSumExp ? Span<const runtime::ScalarType>(kFloatDtypes)
                                       : Span<const runtime::ScalarType>(kFloatAndIntDtypes);
}

template <ReduceKind kKind>
Status reduce_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = op_name(kKind);
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 2, 1));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, internal::int_attribute(kOp, attributes, "keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t noop,
                        internal::int_attribute(kOp, attributes, "noop_with_empty_axes", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), dtypes_for(kKind)));
  KILN_ASSIGN_OR_RETURN(auto axes,
                        internal::int_list_input_or_attribute(kOp, inputs, 1, attributes, "axes"));
  std::vector<int64_t> normalized;
  if (axes.has_value() && !axes->empty()) {
    const std::string subject =
        internal::is_absent(inputs, 1) ? "attribute 'axes'" : "input 1 (axes)";
    KILN_ASSIGN_OR_RETURN(normalized, internal::normalize_axes(kOp, subject, *axes, x->dim()));
  }
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  if (normalized.empty() && noop != 0) {
    KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
    return internal::copy_elements(kOp, *x, out->to_tensor());
  }
  const auto shape = reduce_shape(x->sizes(), normalized, keepdims != 0);
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return reduce(*x, kKind, normalized, keepdims != 0, out->to_tensor());
}

const runtime::KernelRegistration kRegisterReduceSum("ReduceSum", reduce_kernel<ReduceKind::Sum>);
const runtime::KernelRegistration kRegisterReduceMean("ReduceMean",
                                                      reduce_kernel<ReduceKind::Mean>);
const runtime::KernelRegistration kRegisterReduceMax("ReduceMax", reduce_kernel<ReduceKind::Max>);
const runtime::KernelRegistration kRegisterReduceMin("ReduceMin", reduce_kernel<ReduceKind::Min>);
const runtime::KernelRegistration kRegisterReduceProd("ReduceProd",
                                                      reduce_kernel<ReduceKind::Prod>);
const runtime::KernelRegistration kRegisterReduceL2("ReduceL2", reduce_kernel<ReduceKind::L2>);
const runtime::KernelRegistration kRegisterReduceL1("ReduceL1", reduce_kernel<ReduceKind::L1>);
const runtime::KernelRegistration kRegisterReduceSumSquare("ReduceSumSquare",
                                                           reduce_kernel<ReduceKind::SumSquare>);
const runtime::KernelRegistration kRegisterReduceLogSum("ReduceLogSum",
                                                        reduce_kernel<ReduceKind::LogSum>);
const runtime::KernelRegistration kRegisterReduceLogSumExp("ReduceLogSumExp",
                                                           reduce_kernel<ReduceKind::LogSumExp>);

// Accumulates in double for floats and in int64 (wrapping) for integers.
template <typename T>
using Accumulator = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

// The value of an empty reduction; Max and Min start from T's own extremes.
template <typename A, typename T>
A initial(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Max:
      if constexpr (std::is_integral_v<T>) return std::numeric_limits<T>::lowest();
      return -std::numeric_limits<A>::infinity();
    case ReduceKind::Min:
      if constexpr (std::is_integral_v<T>) return std::numeric_limits<T>::max();
      return std::numeric_limits<A>::infinity();
    case ReduceKind::Prod:
      return 1;
    default:
      return 0;
  }
}

template <typename A>
A accumulate(ReduceKind kind, A acc, A value) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    switch (kind) {
      case ReduceKind::Prod:
        return static_cast<A>(static_cast<U>(acc) * static_cast<U>(value));
      case ReduceKind::L2:
      case ReduceKind::SumSquare:
        return static_cast<A>(static_cast<U>(acc) + static_cast<U>(value) * static_cast<U>(value));
      case ReduceKind::L1:
        return static_cast<A>(static_cast<U>(acc) +
                              (value < 0 ? U{0} - static_cast<U>(value) : static_cast<U>(value)));
      case ReduceKind::Max:
        return value > acc ? value : acc;
      case ReduceKind::Min:
        return value < acc ? value : acc;
      default:
        return static_cast<A>(static_cast<U>(acc) + static_cast<U>(value));
    }
  } else {
    switch (kind) {
      case ReduceKind::Prod:
        return acc * value;
      case ReduceKind::L2:
      case ReduceKind::SumSquare:
        return acc + value * value;
      case ReduceKind::L1:
        return acc + std::fabs(value);
      case ReduceKind::LogSumExp:
        return acc + std::exp(value);
      case ReduceKind::Max:
        return (value > acc || value != value) && acc == acc ? value : acc;
      case ReduceKind::Min:
        return (value < acc || value != value) && acc == acc ? value : acc;
      default:
        return acc + value;
    }
  }
}

template <typename A>
A finish(ReduceKind kind, A acc, int64_t count) {
  if (kind == ReduceKind::Mean) {
    if constexpr (std::is_integral_v<A>) return count == 0 ? 0 : acc / count;
    return acc / static_cast<A>(count);
  }
  if (kind == ReduceKind::L2) return static_cast<A>(std::sqrt(static_cast<double>(acc)));
  if (kind == ReduceKind::LogSum || kind == ReduceKind::LogSumExp) {
    return static_cast<A>(std::log(static_cast<double>(acc)));
  }
  return acc;
}

}  // namespace

std::vector<int64_t> reduce_shape(Span<const int64_t> input, Span<const int64_t> axes,
                                  bool keepdims) {
  std::vector<int64_t> shape;
  for (size_t d = 0; d < input.size(); ++d) {
    bool reduced = axes.empty();
    for (int64_t axis : axes) reduced = reduced || axis == static_cast<int64_t>(d);
    if (!reduced) {
      shape.push_back(input[d]);
    } else if (keepdims) {
      shape.push_back(1);
    }
  }
  return shape;
}

Status reduce(const Tensor& x, ReduceKind kind, Span<const int64_t> axes, bool keepdims,
              Tensor& out) {
  const std::string_view kOp = op_name(kind);
  KILN_ASSIGN_OR_RETURN(auto normalized,
                        internal::normalize_axes(
                            kOp, "axes", std::vector<int64_t>(axes.begin(), axes.end()), x.dim()));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), dtypes_for(kind)));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(
      internal::check_output(kOp, out, x.dtype(), reduce_shape(x.sizes(), normalized, keepdims)));
  // Each input element adds into the output slot whose index drops the reduced axes.
  const auto kept = reduce_shape(x.sizes(), normalized, true);
  const auto kept_strides = internal::dense_strides(kept);
  std::vector<int64_t> slot_strides(kept.size());
  for (size_t d = 0; d < kept.size(); ++d) slot_strides[d] = kept[d] == 1 ? 0 : kept_strides[d];
  const int64_t count = out.numel() == 0 ? 0 : x.numel() / out.numel();
  return dispatch<DtypeGroup::FloatAndInt>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Accumulator<T>;
    std::vector<A> slots(static_cast<size_t>(out.numel()), initial<A, T>(kind));
    const T* in = x.data_ptr<T>();
    const auto loop =
        make_broadcast_loop<2>(x.sizes(), {internal::dense_strides(x.sizes()), slot_strides});
    for_each_broadcast_row(loop, [&](int64_t offset, std::array<int64_t, 2> at, int64_t n,
                                     std::array<int64_t, 2> stride) {
      for (int64_t i = 0; i < n; ++i) {
        A& slot = slots[static_cast<size_t>(at[1] + i * stride[1])];
        slot = accumulate<A>(kind, slot, static_cast<A>(load(in[offset + i])));
      }
    });
    T* result = out.mutable_data_ptr<T>();
    for (size_t i = 0; i < slots.size(); ++i) {
      result[i] = store<T>(static_cast<ComputeType<T>>(finish<A>(kind, slots[i], count)));
    }
    return Status();
  });
}

}  // namespace kiln::kernels
