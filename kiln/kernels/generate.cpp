// ConstantOfShape and Range: ops whose output shape comes from their input values.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::array<ScalarType, 5> kRangeDtypes = {ScalarType::Float32, ScalarType::Float64,
                                                    ScalarType::Int16, ScalarType::Int32,
                                                    ScalarType::Int64};

Status constant_of_shape_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                                Span<EValue* const> outputs,
                                const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "ConstantOfShape";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  KILN_ASSIGN_OR_RETURN(auto shape, internal::read_int_list(kOp, inputs, 0, "shape"));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return internal::invalid_argument(kOp, "input 0 (shape) " + runtime::shape_to_string(shape) +
                                                 " has " + std::to_string(shape[i]) +
                                                 " at position " + std::to_string(i) +
                                                 " (expected sizes >= 0)");
    }
  }
  // Without `value` the output is an f32 zero.
  float zero = 0;
  Tensor value(ScalarType::Float32, {1}, &zero);
  if (const EValue* attribute = attributes.find("value")) {
    if (!attribute->is_tensor()) {
      return Status(runtime::Error::InvalidType,
                    internal::action(kOp) + ": attribute 'value' is " +
                        std::string(runtime::to_string(attribute->tag())) +
                        " (expected a tensor of one element)");
    }
    value = attribute->to_tensor();
    if (value.numel() != 1) {
      return internal::invalid_argument(kOp, "attribute 'value' has shape " +
                                                 runtime::shape_to_string(value.sizes()) +
                                                 " (expected one element)");
    }
  }
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, value.dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return constant_of_shape(value, out->to_tensor());
}

Status range_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = "Range";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* start, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* limit, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* delta, internal::input_tensor(kOp, inputs, 2));
  KILN_ASSIGN_OR_RETURN(int64_t length, range_length(*start, *limit, *delta));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor(kOp, outputs, 0, start->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, std::vector<int64_t>{length}));
  return range(*start, *limit, *delta, out->to_tensor());
}

const runtime::KernelRegistration kRegisterConstantOfShape("ConstantOfShape",
                                                           constant_of_shape_kernel);
const runtime::KernelRegistration kRegisterRange("Range", range_kernel);

// Calls fn(TypeTag<T>) for the Range dtypes.
template <typename Fn>
Status dispatch_range(ScalarType dtype, Fn&& fn) {
  switch (dtype) {
    case ScalarType::Float32:
      return fn(TypeTag<float>{});
    case ScalarType::Float64:
      return fn(TypeTag<double>{});
    case ScalarType::Int16:
      return fn(TypeTag<int16_t>{});
    case ScalarType::Int32:
      return fn(TypeTag<int32_t>{});
    case ScalarType::Int64:
      return fn(TypeTag<int64_t>{});
    default:
      return check_dtype("Range", "input 0 (start)", dtype, kRangeDtypes);
  }
}

}  // namespace

Status constant_of_shape(const Tensor& value, Tensor& out) {
  constexpr std::string_view kOp = "ConstantOfShape";
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "output 0", out.dtype(), value.dtype()));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 0", out));
  if (value.numel() != 1) {
    return internal::invalid_argument(
        kOp,
        "value has shape " + runtime::shape_to_string(value.sizes()) + " (expected one element)");
  }
  return internal::dispatch_bytes(value.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U element = *value.data_ptr<U>();
    U* result = out.mutable_data_ptr<U>();
    for (int64_t i = 0; i < out.numel(); ++i) result[i] = element;
    return Status();
  });
}

Result<int64_t> range_length(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  constexpr std::string_view kOp = "Range";
  const Tensor* operands[3] = {&start, &limit, &delta};
  const char* names[3] = {"start", "limit", "delta"};
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (start)", start.dtype(), kRangeDtypes));
  for (size_t i = 0; i < 3; ++i) {
    const std::string subject = "input " + std::to_string(i) + " (" + names[i] + ")";
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(kOp, subject, operands[i]->dtype(), start.dtype()));
    if (operands[i]->numel() != 1) {
      return internal::invalid_argument(kOp, subject + " has shape " +
                                                 runtime::shape_to_string(operands[i]->sizes()) +
                                                 " (expected a scalar)");
    }
  }
  int64_t length = 0;
  KILN_RETURN_IF_ERROR(dispatch_range(start.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T first = *start.data_ptr<T>(), last = *limit.data_ptr<T>(), step = *delta.data_ptr<T>();
    if (step == 0)
      return internal::invalid_argument(kOp, "input 2 (delta) is 0 (expected non-zero)");
    if constexpr (std::is_integral_v<T>) {
      const int64_t span = static_cast<int64_t>(last) - static_cast<int64_t>(first);
      const int64_t s = step;
      // ceil(span / s) for integers of either sign.
      length = span / s + ((span % s != 0 && ((span < 0) == (s < 0))) ? 1 : 0);
    } else {
      const double count = std::ceil((static_cast<double>(last) - first) / step);
      if (!std::isfinite(count)) {
        return internal::invalid_argument(kOp,
                                          "the length is not finite (expected finite "
                                          "start, limit and delta)");
      }
      length = static_cast<int64_t>(count);
    }
    if (length < 0) length = 0;
    return Status();
  }));
  return length;
}

Status range(const Tensor& start, const Tensor& limit, const Tensor& delta, Tensor& out) {
  KILN_ASSIGN_OR_RETURN(int64_t length, range_length(start, limit, delta));
  KILN_RETURN_IF_ERROR(
      internal::check_output("Range", out, start.dtype(), std::vector<int64_t>{length}));
  return dispatch_range(start.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T first = *start.data_ptr<T>(), step = *delta.data_ptr<T>();
    T* result = out.mutable_data_ptr<T>();
    for (int64_t i = 0; i < length; ++i) {
      result[i] = static_cast<T>(first + static_cast<T>(i) * step);
    }
    return Status();
  });
}

}  // namespace kiln::kernels
