#pragma once

#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace kiln::kernels {

/// Storage of one IEEE binary16 element (`ScalarType::Float16`). Kernels never do arithmetic
/// on it directly: they `load` it as float and `store` the float result back.
struct Half {
  uint16_t bits;
};

/// Storage of one bfloat16 element (`ScalarType::BFloat16`); loaded and stored like `Half`.
struct BFloat16 {
  uint16_t bits;
};

/// The type a kernel computes in for storage type `T`: `T` itself, or float for `Half` and
/// `BFloat16` (so a half-precision sum or dot product accumulates in float).
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<Half> {
  using type = float;
};
template <>
struct ComputeTypeOf<BFloat16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

/// Reads a stored element as its compute type (the identity for float, double and integers).
template <typename T>
inline ComputeType<T> load(T value) {
  return value;
}
inline float load(Half value) { return runtime::half_to_float(value.bits); }
inline float load(BFloat16 value) { return runtime::bfloat16_to_float(value.bits); }

/// Writes a compute-type value as storage type `T`, rounding to nearest even for `Half` and
/// `BFloat16`. Call it as `store<T>(value)`.
template <typename T>
inline T store(ComputeType<T> value) {
  return static_cast<T>(value);
}
template <>
inline Half store<Half>(float value) {
  return Half{runtime::float_to_half(value)};
}
template <>
inline BFloat16 store<BFloat16>(float value) {
  return BFloat16{runtime::float_to_bfloat16(value)};
}

/// Names a storage type for a generic lambda: `fn(TypeTag<float>{})`, then
/// `using T = typename decltype(tag)::type;` inside.
template <typename T>
struct TypeTag {
  using type = T;
};

/// The dtype families kernels dispatch over.
enum class DtypeGroup {
  Float,        ///< f32, f64, f16, bf16.
  FloatAndInt,  ///< f32, f64, f16, bf16, i32, i64.
  Numeric,      ///< FloatAndInt plus i8, u8 and i16.
  All,          ///< Numeric plus bool (storage `bool`, one byte).
};

inline constexpr std::array<runtime::ScalarType, 4> kFloatDtypes = {
    runtime::ScalarType::Float32, runtime::ScalarType::Float64, runtime::ScalarType::Float16,
    runtime::ScalarType::BFloat16};
inline constexpr std::array<runtime::ScalarType, 6> kFloatAndIntDtypes = {
    runtime::ScalarType::Float32,  runtime::ScalarType::Float64, runtime::ScalarType::Float16,
    runtime::ScalarType::BFloat16, runtime::ScalarType::Int32,   runtime::ScalarType::Int64};

inline constexpr std::array<runtime::ScalarType, 9> kNumericDtypes = {
    runtime::ScalarType::Float32,  runtime::ScalarType::Float64, runtime::ScalarType::Float16,
    runtime::ScalarType::BFloat16, runtime::ScalarType::Int8,    runtime::ScalarType::UInt8,
    runtime::ScalarType::Int16,    runtime::ScalarType::Int32,   runtime::ScalarType::Int64};
inline constexpr std::array<runtime::ScalarType, 10> kAllDtypes = {
    runtime::ScalarType::Float32,  runtime::ScalarType::Float64, runtime::ScalarType::Float16,
    runtime::ScalarType::BFloat16, runtime::ScalarType::Int8,    runtime::ScalarType::UInt8,
    runtime::ScalarType::Int16,    runtime::ScalarType::Int32,   runtime::ScalarType::Int64,
    runtime::ScalarType::Bool};
inline constexpr std::array<runtime::ScalarType, 1> kBoolDtypes = {runtime::ScalarType::Bool};
inline constexpr std::array<runtime::ScalarType, 2> kIndexDtypes = {runtime::ScalarType::Int32,
                                                                    runtime::ScalarType::Int64};

/// The dtypes of `group`, in the order error messages list them.
constexpr runtime::Span<const runtime::ScalarType> dtypes_of(DtypeGroup group) {
  if (group == DtypeGroup::Float) return kFloatDtypes;
  if (group == DtypeGroup::Numeric) return kNumericDtypes;
  if (group == DtypeGroup::All) return kAllDtypes;
  return kFloatAndIntDtypes;
}

/// Ok when `dtype` is one of `accepted`; otherwise InvalidType
/// "run kernel '<op>': <subject> has dtype i8 (expected f32, f64, f16 or bf16)".
/// `subject` names the value, e.g. "input 1".
runtime::Status check_dtype(std::string_view op, std::string_view subject,
                            runtime::ScalarType dtype,
                            runtime::Span<const runtime::ScalarType> accepted);

/// Calls `fn(TypeTag<T>{})`, `T` being the storage type of `dtype` (float, double, Half,
/// BFloat16, int32_t or int64_t; for `Numeric` also int8_t, uint8_t and int16_t; for `All`
/// also bool), when `dtype`
/// belongs to `Group`, and returns its Status. Otherwise returns `check_dtype`'s InvalidType error
/// naming `op` and `subject`. `fn` is instantiated for every type of `Group` and must compile for
/// each.
template <DtypeGroup Group, typename Fn>
runtime::Status dispatch(std::string_view op, std::string_view subject, runtime::ScalarType dtype,
                         Fn&& fn) {
  using runtime::ScalarType;
  switch (dtype) {
    case ScalarType::Float32:
      return fn(TypeTag<float>{});
    case ScalarType::Float64:
      return fn(TypeTag<double>{});
    case ScalarType::Float16:
      return fn(TypeTag<Half>{});
    case ScalarType::BFloat16:
      return fn(TypeTag<BFloat16>{});
    default:
      break;
  }
  if constexpr (Group != DtypeGroup::Float) {
    if (dtype == ScalarType::Int32) return fn(TypeTag<int32_t>{});
    if (dtype == ScalarType::Int64) return fn(TypeTag<int64_t>{});
  }
  if constexpr (Group == DtypeGroup::Numeric || Group == DtypeGroup::All) {
    if (dtype == ScalarType::Int8) return fn(TypeTag<int8_t>{});
    if (dtype == ScalarType::UInt8) return fn(TypeTag<uint8_t>{});
    if (dtype == ScalarType::Int16) return fn(TypeTag<int16_t>{});
  }
  if constexpr (Group == DtypeGroup::All) {
    if (dtype == ScalarType::Bool) return fn(TypeTag<bool>{});
  }
  return check_dtype(op, subject, dtype, dtypes_of(Group));
}

}  // namespace kiln::kernels
