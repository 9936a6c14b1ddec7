#include <kiln/kernels/adapter.h>
#include <kiln/kernels/dispatch.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/quant_internal.h>
#include <kiln/kernels/quant_ops.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::EValue;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace internal {

Result<QuantAxis> quant_axis(std::string_view op, Span<const int64_t> x, const Tensor& scale,
                             const Tensor* zero_point, int64_t axis, std::string_view scale_name,
                             std::string_view zero_point_name) {
  QuantAxis out;
  const bool per_tensor = scale.numel() == 1 && scale.dim() <= 1;
  if (!per_tensor) {
    const auto rank = static_cast<int64_t>(x.size());
    if (axis < -rank || axis >= rank) {
      return invalid_argument(op, "attribute 'axis' is " + std::to_string(axis) + " (expected " +
                                      std::to_string(-rank) + ".." + std::to_string(rank - 1) +
                                      " for input 0 of shape " + runtime::shape_to_string(x) + ")");
    }
    if (axis < 0) axis += rank;
    const int64_t channels = x[static_cast<size_t>(axis)];
    if (scale.dim() != 1 || scale.size(0) != channels) {
      return invalid_argument(
          op, std::string(scale_name) + " has shape " + runtime::shape_to_string(scale.sizes()) +
                  " (expected [] or [1] per tensor, or [" + std::to_string(channels) +
                  "] along axis " + std::to_string(axis) + ")");
    }
    out.channels = channels;
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) out.inner *= x[d];
  }
  if (zero_point != nullptr && !std::equal(zero_point->sizes().begin(), zero_point->sizes().end(),
                                           scale.sizes().begin(), scale.sizes().end())) {
    const bool both_one = per_tensor && zero_point->numel() == 1 && zero_point->dim() <= 1;
    if (!both_one) {
      return invalid_argument(op, std::string(zero_point_name) + " has shape " +
                                      runtime::shape_to_string(zero_point->sizes()) +
                                      " (expected " + runtime::shape_to_string(scale.sizes()) +
                                      ", the shape of " + std::string(scale_name) + ")");
    }
  }
  return out;
}

std::vector<double> float_values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  (void)dispatch<DtypeGroup::Float>("", "", t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(load(t.data_ptr<T>()[i]));
    return Status();
  });
  return out;
}

std::vector<int32_t> zero_point_values(const Tensor* t, size_t count) {
  std::vector<int32_t> out(count, 0);
  if (t == nullptr) return out;
  for (size_t i = 0; i < out.size() && i < static_cast<size_t>(t->numel()); ++i) {
    if (t->dtype() == ScalarType::UInt8) out[i] = t->data_ptr<uint8_t>()[i];
    if (t->dtype() == ScalarType::Int8) out[i] = t->data_ptr<int8_t>()[i];
    if (t->dtype() == ScalarType::Int32) out[i] = t->data_ptr<int32_t>()[i];
  }
  return out;
}

}  // namespace internal

namespace {

constexpr std::array<ScalarType, 2> kQuantDtypes = {ScalarType::UInt8, ScalarType::Int8};
constexpr std::array<ScalarType, 5> kQuantizeInputDtypes = {
    ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16,
    ScalarType::Int32};
constexpr std::array<ScalarType, 3> kDequantizeInputDtypes = {ScalarType::UInt8, ScalarType::Int8,
                                                              ScalarType::Int32};

// Rounds half to even and saturates to Q's range; nan gives `zero_point`.
template <typename Q, typename C>
Q saturate_round(C value, int32_t zero_point) {
  if (std::isnan(value)) return static_cast<Q>(zero_point);
  const C rounded = std::nearbyint(value) + static_cast<C>(zero_point);
  const auto lo = static_cast<C>(std::numeric_limits<Q>::lowest());
  const auto hi = static_cast<C>(std::numeric_limits<Q>::max());
  return static_cast<Q>(std::min(std::max(rounded, lo), hi));
}

template <typename F>
Status dispatch_quant(std::string_view op, std::string_view subject, ScalarType dtype, F&& fn) {
  if (dtype == ScalarType::UInt8) return fn(TypeTag<uint8_t>{});
  if (dtype == ScalarType::Int8) return fn(TypeTag<int8_t>{});
  return check_dtype(op, subject, dtype, kQuantDtypes);
}

// Storage type of a QuantizeLinear input: the float types and i32.
template <typename F>
Status dispatch_quantize_input(ScalarType dtype, F&& fn) {
  if (dtype == ScalarType::Int32) return fn(TypeTag<int32_t>{});
  return dispatch<DtypeGroup::Float>("QuantizeLinear", "input 0", dtype, fn);
}

}  // namespace

Status quantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point, int64_t axis,
                       Tensor& out) {
  constexpr std::string_view kOp = "QuantizeLinear";
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kQuantizeInputDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (y_scale)", scale.dtype(), kFloatDtypes));
  const ScalarType out_dtype = zero_point != nullptr ? zero_point->dtype() : out.dtype();
  if (zero_point != nullptr) {
    KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 2 (y_zero_point)", out_dtype, kQuantDtypes));
  }
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "output 0", out.dtype(), kQuantDtypes));
  for (const Tensor* t : {&x, &scale, zero_point}) {
    if (t != nullptr) KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "an input", *t));
  }
  KILN_ASSIGN_OR_RETURN(internal::QuantAxis layout,
                        internal::quant_axis(kOp, x.sizes(), scale, zero_point, axis,
                                             "input 1 (y_scale)", "input 2 (y_zero_point)"));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, out_dtype, x.sizes()));
  const std::vector<double> scales = internal::float_values(scale);
  const std::vector<int32_t> zero_points =
      internal::zero_point_values(zero_point, static_cast<size_t>(layout.channels));
  return dispatch_quantize_input(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // f32 (and narrower) inputs divide in f32, as the ONNX reference does.
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    return dispatch_quant(kOp, "output 0", out_dtype, [&](auto qtag) {
      using Q = typename decltype(qtag)::type;
      const T* in = x.data_ptr<T>();
      Q* result = out.mutable_data_ptr<Q>();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const auto c = static_cast<size_t>((i / layout.inner) % layout.channels);
        const C value = static_cast<C>(load(in[i])) / static_cast<C>(scales[c]);
        result[i] = saturate_round<Q>(value, zero_points[c]);
      }
      return Status();
    });
  });
}

Status dequantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point,
                         int64_t axis, Tensor& out) {
  constexpr std::string_view kOp = "DequantizeLinear";
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kDequantizeInputDtypes));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1 (x_scale)", scale.dtype(), kFloatDtypes));
  if (zero_point != nullptr) {
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(kOp, "input 2 (x_zero_point)", zero_point->dtype(), x.dtype()));
  }
  for (const Tensor* t : {&x, &scale, zero_point}) {
    if (t != nullptr) KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "an input", *t));
  }
  KILN_ASSIGN_OR_RETURN(internal::QuantAxis layout,
                        internal::quant_axis(kOp, x.sizes(), scale, zero_point, axis,
                                             "input 1 (x_scale)", "input 2 (x_zero_point)"));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, scale.dtype(), x.sizes()));
  const std::vector<double> scales = internal::float_values(scale);
  const std::vector<int32_t> zero_points =
      internal::zero_point_values(zero_point, static_cast<size_t>(layout.channels));
  if (x.dtype() == ScalarType::Int32) {
    for (int32_t zp : zero_points) {
      if (zp != 0) {
        return internal::invalid_argument(kOp, "input 2 (x_zero_point) has " + std::to_string(zp) +
                                                   " (expected 0 for an i32 input)");
      }
    }
  }
  return dispatch<DtypeGroup::Float>(kOp, "input 1 (x_scale)", scale.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    T* result = out.mutable_data_ptr<T>();
    auto run = [&](const auto* in) {
      for (int64_t i = 0; i < x.numel(); ++i) {
        const auto c = static_cast<size_t>((i / layout.inner) % layout.channels);
        // The difference is exact in i64; the product rounds once.
        const auto centered = static_cast<int64_t>(in[i]) - zero_points[c];
        result[i] = store<T>(
            static_cast<ComputeType<T>>(static_cast<C>(centered) * static_cast<C>(scales[c])));
      }
    };
    if (x.dtype() == ScalarType::UInt8) run(x.data_ptr<uint8_t>());
    if (x.dtype() == ScalarType::Int8) run(x.data_ptr<int8_t>());
    if (x.dtype() == ScalarType::Int32) run(x.data_ptr<int32_t>());
    return Status();
  });
}

Status dynamic_quantize_linear(const Tensor& x, Tensor& y, Tensor& y_scale, Tensor& y_zero_point) {
  constexpr std::string_view kOp = "DynamicQuantizeLinear";
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 0", x.dtype(), ScalarType::Float32));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, y, ScalarType::UInt8, x.sizes()));
  for (auto [name, t, dtype] :
       {std::tuple{"output 1 (y_scale)", &y_scale, ScalarType::Float32},
        std::tuple{"output 2 (y_zero_point)", &y_zero_point, ScalarType::UInt8}}) {
    KILN_RETURN_IF_ERROR(check_dtype(kOp, name, t->dtype(), Span<const ScalarType>(&dtype, 1)));
    if (t->dim() != 0) {
      return internal::invalid_argument(kOp, std::string(name) + " has shape " +
                                                 runtime::shape_to_string(t->sizes()) +
                                                 " (expected [])");
    }
  }
  const float* in = x.data_ptr<float>();
  // The range always holds 0, so that 0 is exactly representable.
  float lo = 0.0f;
  float hi = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float initial_zero_point = std::min(std::max(0.0f - lo / scale, 0.0f), 255.0f);
  const auto zero_point = static_cast<int32_t>(std::nearbyint(initial_zero_point));
  *y_scale.mutable_data_ptr<float>() = scale;
  *y_zero_point.mutable_data_ptr<uint8_t>() = static_cast<uint8_t>(zero_point);
  uint8_t* result = y.mutable_data_ptr<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    result[i] = saturate_round<uint8_t>(in[i] / scale, zero_point);
  }
  return Status();
}

namespace {

// Opset 19 and 21 `output_dtype`, else u8, when there is no zero point.
Result<ScalarType> quantize_output_dtype(const Tensor* zero_point,
                                         const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(int64_t onnx_dtype, attributes.get_int("output_dtype", 0));
  ScalarType requested = ScalarType::UInt8;
  if (onnx_dtype == 3) {
    requested = ScalarType::Int8;
  } else if (onnx_dtype != 0 && onnx_dtype != 2) {
    return Status(Error::NotSupported, "attribute 'output_dtype' is " + std::to_string(onnx_dtype) +
                                           " (expected 2 (uint8) or 3 (int8))");
  }
  if (zero_point == nullptr) return requested;
  if (onnx_dtype != 0 && zero_point->dtype() != requested) {
    return Status(Error::InvalidArgument,
                  "attribute 'output_dtype' is " + std::to_string(onnx_dtype) +
                      " (expected the dtype of input 2, " +
                      std::string(runtime::to_string(zero_point->dtype())) + ")");
  }
  return zero_point->dtype();
}

// QuantizeLinear and DequantizeLinear: x, scale, optional zero point; attribute `axis`.
template <bool kQuantize>
Status linear_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                     Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  constexpr std::string_view kOp = kQuantize ? "QuantizeLinear" : "DequantizeLinear";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 2, 3, 1));
  auto axis = attributes.get_int("axis", 1);
  if (!axis.ok()) return axis.status().with_context(internal::action(kOp));
  auto block_size = attributes.get_int("block_size", 0);
  if (!block_size.ok()) return block_size.status().with_context(internal::action(kOp));
  if (*block_size != 0) {
    return Status(Error::NotSupported, internal::action(kOp) + ": attribute 'block_size' is " +
                                           std::to_string(*block_size) +
                                           " (expected 0: blocked quantization is not supported)");
  }
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, internal::input_tensor(kOp, inputs, 1));
  const Tensor* zero_point = nullptr;
  if (!internal::is_absent(inputs, 2)) {
    KILN_ASSIGN_OR_RETURN(zero_point, internal::input_tensor(kOp, inputs, 2));
  }
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(),
                                   kQuantize ? Span<const ScalarType>(kQuantizeInputDtypes)
                                             : Span<const ScalarType>(kDequantizeInputDtypes)));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 1", scale->dtype(), kFloatDtypes));
  if (!kQuantize && zero_point != nullptr) {
    KILN_RETURN_IF_ERROR(
        internal::check_same_dtype(kOp, "input 2", zero_point->dtype(), x->dtype()));
  }
  ScalarType out_dtype = scale->dtype();
  if constexpr (kQuantize) {
    auto dtype = quantize_output_dtype(zero_point, attributes);
    if (!dtype.ok()) return dtype.status().with_context(internal::action(kOp));
    out_dtype = *dtype;
    KILN_RETURN_IF_ERROR(check_dtype(kOp, "output 0", out_dtype, kQuantDtypes));
  }
  KILN_ASSIGN_OR_RETURN(EValue * out, internal::output_tensor_of_dtype(kOp, outputs, 0, out_dtype));
  // The typed function checks the shapes again; checking them here keeps a bad shape from
  // resizing the output.
  auto layout =
      internal::quant_axis(kOp, x->sizes(), *scale, zero_point, *axis, "input 1", "input 2");
  if (!layout.ok()) return layout.status();
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, x->sizes()));
  if constexpr (kQuantize) {
    return quantize_linear(*x, *scale, zero_point, *axis, out->to_tensor());
  } else {
    return dequantize_linear(*x, *scale, zero_point, *axis, out->to_tensor());
  }
}

Status dynamic_quantize_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                               Span<EValue* const> outputs, const runtime::Attributes&) {
  constexpr std::string_view kOp = "DynamicQuantizeLinear";
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 1, 1, 3));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 0", x->dtype(), ScalarType::Float32));
  KILN_ASSIGN_OR_RETURN(EValue * y,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, ScalarType::UInt8));
  KILN_ASSIGN_OR_RETURN(EValue * scale,
                        internal::output_tensor_of_dtype(kOp, outputs, 1, ScalarType::Float32));
  KILN_ASSIGN_OR_RETURN(EValue * zero_point,
                        internal::output_tensor_of_dtype(kOp, outputs, 2, ScalarType::UInt8));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *y, x->sizes()));
  const std::vector<int64_t> scalar;
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *scale, scalar));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *zero_point, scalar));
  return dynamic_quantize_linear(*x, y->to_tensor(), scale->to_tensor(), zero_point->to_tensor());
}

const runtime::KernelRegistration kRegisterQuantizeLinear("QuantizeLinear", linear_kernel<true>);
const runtime::KernelRegistration kRegisterDequantizeLinear("DequantizeLinear",
                                                            linear_kernel<false>);
const runtime::KernelRegistration kRegisterDynamicQuantizeLinear("DynamicQuantizeLinear",
                                                                 dynamic_quantize_kernel);

}  // namespace

}  // namespace kiln::kernels
