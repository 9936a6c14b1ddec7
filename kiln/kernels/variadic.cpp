// Max, Min, Sum and Mean: element-wise over one or more broadcast inputs. The output starts as
// input 0 broadcast to the output shape; each further input is folded into it in place.

#include <kiln/kernels/elementwise.h>
#include <kiln/kernels/kernels.h>

#include <string>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

struct MaxFn {
  template <typename T>
  T operator()(T a, T b) const {
    const auto x = load(a), y = load(b);
    return (x >= y || x != x) ? a : b;  // a nan on either side wins
  }
};

struct MinFn {
  template <typename T>
  T operator()(T a, T b) const {
    const auto x = load(a), y = load(b);
    return (x <= y || x != x) ? a : b;
  }
};

struct SumFn {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return internal::wrapping(a, b, [](auto x, auto y) { return x + y; });
    } else {
      return store<T>(load(a) + load(b));
    }
  }
};

// Folds `fn` over `inputs` into `out` (see the file comment); for Mean, then divides.
template <typename Fn>
Status fold(std::string_view op, DtypeGroup group, Span<const Tensor* const> inputs, Tensor& out,
            Fn fn, bool divide) {
  if (inputs.empty()) return internal::invalid_argument(op, "got 0 inputs (expected 1 or more)");
  const Tensor& first = *inputs[0];
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", first.dtype(), dtypes_of(group)));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string subject = "input " + std::to_string(i);
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(op, subject, inputs[i]->dtype(), first.dtype()));
    KILN_RETURN_IF_ERROR(internal::check_contiguous(op, subject, *inputs[i]));
  }
  auto shape = broadcast_shapes(inputs);
  if (!shape.ok()) return shape.status().with_context(internal::action(op));
  KILN_RETURN_IF_ERROR(internal::check_output(op, out, first.dtype(), *shape));
  const auto out_strides = broadcast_strides(*shape, *shape);
  return dispatch<DtypeGroup::Numeric>(op, "input 0", first.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* result = out.mutable_data_ptr<T>();
    const auto copy =
        make_broadcast_loop<2>(*shape, {out_strides, broadcast_strides(first.sizes(), *shape)});
    // Writing into input 0 itself (out == input 0) copies each element onto itself.
    internal::binary_rows(result, first.data_ptr<T>(), result, copy, [](T, T b) { return b; });
    for (size_t i = 1; i < inputs.size(); ++i) {
      const auto loop = make_broadcast_loop<2>(
          *shape, {out_strides, broadcast_strides(inputs[i]->sizes(), *shape)});
      internal::binary_rows(result, inputs[i]->data_ptr<T>(), result, loop, fn);
    }
    if constexpr (!std::is_integral_v<T>) {
      if (divide) {
        const auto count = static_cast<ComputeType<T>>(inputs.size());
        for (int64_t i = 0; i < out.numel(); ++i) result[i] = store<T>(load(result[i]) / count);
      }
    }
    return Status();
  });
}

// The adapter of the variadic ops: 1 or more tensor inputs, output 0 of input 0's dtype.
template <Status (*kTyped)(Span<const Tensor* const>, Tensor&)>
Status run_variadic(std::string_view op, Span<const runtime::ScalarType> dtypes,
                    runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs) {
  KILN_RETURN_IF_ERROR(internal::check_arity(op, inputs, outputs, 1, SIZE_MAX, 1));
  std::vector<const Tensor*> tensors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* tensor, internal::input_tensor(op, inputs, i));
    tensors.push_back(tensor);
  }
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", tensors[0]->dtype(), dtypes));
  for (size_t i = 1; i < tensors.size(); ++i) {
    KILN_RETURN_IF_ERROR(internal::check_same_dtype(op, "input " + std::to_string(i),
                                                    tensors[i]->dtype(), tensors[0]->dtype()));
  }
  auto shape = broadcast_shapes(tensors);
  if (!shape.ok()) return shape.status().with_context(internal::action(op));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(op, outputs, 0, tensors[0]->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, op, *out, *shape));
  return kTyped(tensors, out->to_tensor());
}

Status max_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return run_variadic<maximum>("Max", kNumericDtypes, context, inputs, outputs);
}
Status min_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return run_variadic<minimum>("Min", kNumericDtypes, context, inputs, outputs);
}
Status sum_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return run_variadic<sum>("Sum", kFloatAndIntDtypes, context, inputs, outputs);
}
Status mean_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return run_variadic<mean>("Mean", kFloatDtypes, context, inputs, outputs);
}

const runtime::KernelRegistration kRegisterMax("Max", max_kernel);
const runtime::KernelRegistration kRegisterMin("Min", min_kernel);
const runtime::KernelRegistration kRegisterSum("Sum", sum_kernel);
const runtime::KernelRegistration kRegisterMean("Mean", mean_kernel);

}  // namespace

Result<std::vector<int64_t>> broadcast_shapes(Span<const Tensor* const> inputs) {
  std::vector<int64_t> shape;
  for (const Tensor* input : inputs) {
    KILN_ASSIGN_OR_RETURN(shape, broadcast_shape(shape, input->sizes()));
  }
  return shape;
}

Status maximum(Span<const Tensor* const> inputs, Tensor& out) {
  return fold("Max", DtypeGroup::Numeric, inputs, out, MaxFn{}, false);
}
Status minimum(Span<const Tensor* const> inputs, Tensor& out) {
  return fold("Min", DtypeGroup::Numeric, inputs, out, MinFn{}, false);
}
Status sum(Span<const Tensor* const> inputs, Tensor& out) {
  return fold("Sum", DtypeGroup::FloatAndInt, inputs, out, SumFn{}, false);
}
Status mean(Span<const Tensor* const> inputs, Tensor& out) {
  return fold("Mean", DtypeGroup::Float, inputs, out, SumFn{}, true);
}

}  // namespace kiln::kernels
