// ArgMax and ArgMin: the index of the extreme element along one axis, as i64.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

template <bool kMax>
Status arg_reduce(const Tensor& x, int64_t axis, bool keepdims, bool select_last_index,
                  Tensor& out) {
  constexpr std::string_view kOp = kMax ? "ArgMax" : "ArgMin";
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatAndIntDtypes));
  KILN_ASSIGN_OR_RETURN(axis, internal::normalize_axis(kOp, "attribute 'axis'", axis, x.dim()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, ScalarType::Int64,
                                              arg_reduce_shape(x.sizes(), axis, keepdims)));
  const int64_t n = x.size(axis);
  if (n == 0 && out.numel() > 0) {
    return internal::invalid_argument(kOp, "axis " + std::to_string(axis) + " of " +
                                               internal::describe_input(0, x.sizes()) +
                                               " has size 0 (expected at least 1 element)");
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
  for (int64_t d = axis + 1; d < x.dim(); ++d) inner *= x.size(d);
  return dispatch<DtypeGroup::FloatAndInt>(kOp, "input 0", x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data_ptr<T>();
    int64_t* result = out.mutable_data_ptr<int64_t>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* line = in + o * n * inner + i;
        auto best = load(line[0]);
        int64_t best_index = 0;
        for (int64_t j = 1; j < n; ++j) {
          const auto value = load(line[j * inner]);
          const bool better = kMax ? value > best : value < best;
          if (better || (select_last_index && value == best)) {
            best = value;
            best_index = j;
          }
        }
        result[o * inner + i] = best_index;
      }
    }
    return Status();
  });
}

template <bool kMax>
Status arg_reduce_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                         Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = kMax ? "ArgMax" : "ArgMin";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, internal::int_attribute(kOp, attributes, "axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, internal::int_attribute(kOp, attributes, "keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t last,
                        internal::int_attribute(kOp, attributes, "select_last_index", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatAndIntDtypes));
  KILN_ASSIGN_OR_RETURN(int64_t normalized,
                        internal::normalize_axis(kOp, "attribute 'axis'", axis, x->dim()));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::Int64));
  KILN_RETURN_IF_ERROR(internal::resize_output(
      context, kOp, *out, arg_reduce_shape(x->sizes(), normalized, keepdims != 0)));
  return arg_reduce<kMax>(*x, axis, keepdims != 0, last != 0, out->to_tensor());
}

const runtime::KernelRegistration kRegisterArgMax("ArgMax", arg_reduce_kernel<true>);
const runtime::KernelRegistration kRegisterArgMin("ArgMin", arg_reduce_kernel<false>);

}  // namespace

std::vector<int64_t> arg_reduce_shape(Span<const int64_t> input, int64_t axis, bool keepdims) {
  std::vector<int64_t> shape;
  for (size_t d = 0; d < input.size(); ++d) {
    if (static_cast<int64_t>(d) != axis) {
      shape.push_back(input[d]);
    } else if (keepdims) {
      shape.push_back(1);
    }
  }
  return shape;
}

Status arg_max(const Tensor& x, int64_t axis, bool keepdims, bool select_last_index, Tensor& out) {
  return arg_reduce<true>(x, axis, keepdims, select_last_index, out);
}

Status arg_min(const Tensor& x, int64_t axis, bool keepdims, bool select_last_index, Tensor& out) {
  return arg_reduce<false>(x, axis, keepdims, select_last_index, out);
}

}  // namespace kiln::kernels
