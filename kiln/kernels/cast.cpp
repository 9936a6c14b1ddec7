#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>

#include <cmath>
#include <limits>
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

constexpr std::string_view kOp = "Cast";

// One element from storage type From to storage type To (see `cast` in shape_ops.h).
template <typename To, typename From>
To convert(From from) {
  const auto value = load(from);
  if constexpr (std::is_same_v<To, bool>) {
    return value != 0;
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<decltype(value)>) {
    // Float to integer: truncate, saturating, as converting out of range is undefined in C++.
    if (std::isnan(value)) return 0;
    const double truncated = std::trunc(static_cast<double>(value));
    if (truncated <= static_cast<double>(std::numeric_limits<To>::lowest())) {
      return std::numeric_limits<To>::lowest();
    }
    if (truncated >= static_cast<double>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(truncated);
  } else {
    // Integer to integer wraps (C++20 defines it); anything to a float type rounds.
    return store<To>(static_cast<ComputeType<To>>(value));
  }
}

Status cast_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 1));
  if (!attributes.has("to")) {
    return internal::invalid_argument(kOp,
                                      "attribute 'to' is missing (expected an ONNX data "
                                      "type number)");
  }
  auto to = attributes.get_int("to", 0);
  if (!to.ok()) return to.status().with_context(internal::action(kOp));
  auto dtype = scalar_type_from_onnx(*to);
  if (!dtype.ok()) return dtype.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kAllDtypes));
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor_of_dtype(kOp, outputs, 0, *dtype));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  return cast(*x, out->to_tensor());
}

// CastLike (opset 15): Cast to the dtype of input 1, whose values are not read.
Status cast_like_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                        Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kLike = "CastLike";
  KILN_RETURN_IF_ERROR(internal::check_arity(kLike, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kLike, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* like, internal::input_tensor(kLike, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(kLike, "input 0", x->dtype(), kAllDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kLike, "input 1", like->dtype(), kAllDtypes));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kLike, outputs, 0, like->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kLike, *out, x->sizes()));
  return cast(*x, out->to_tensor());
}

const runtime::KernelRegistration kRegisterCast("Cast", cast_kernel);
const runtime::KernelRegistration kRegisterCastLike("CastLike", cast_like_kernel);

}  // namespace

Result<ScalarType> scalar_type_from_onnx(int64_t onnx_type) {
  switch (onnx_type) {
    case 1:
      return ScalarType::Float32;
    case 2:
      return ScalarType::UInt8;
    case 3:
      return ScalarType::Int8;
    case 5:
      return ScalarType::Int16;
    case 6:
      return ScalarType::Int32;
    case 7:
      return ScalarType::Int64;
    case 9:
      return ScalarType::Bool;
    case 10:
      return ScalarType::Float16;
    case 11:
      return ScalarType::Float64;
    case 16:
      return ScalarType::BFloat16;
    default:
      return Status(runtime::Error::InvalidArgument,
                    "attribute 'to' is " + std::to_string(onnx_type) +
                        " (expected an ONNX data type kiln supports: 1 float, 2 uint8, 3 int8, "
                        "5 int16, 6 int32, 7 int64, 9 bool, 10 float16, 11 double, 16 bfloat16)");
  }
}

Status cast(const Tensor& x, Tensor& out) {
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "output 0", out));
  KILN_RETURN_IF_ERROR(internal::check_output_shape(kOp, out, x.sizes()));
  return dispatch<DtypeGroup::All>(kOp, "input 0", x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    return dispatch<DtypeGroup::All>(kOp, "output 0", out.dtype(), [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* in = x.data_ptr<From>();
      To* result = out.mutable_data_ptr<To>();
      for (int64_t i = 0; i < x.numel(); ++i) result[i] = convert<To>(in[i]);
      return Status();
    });
  });
}

}  // namespace kiln::kernels
