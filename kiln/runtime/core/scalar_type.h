#pragma once

#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::runtime {

/// Element types of tensors. The numbers are stored in program files: never renumber.
enum class ScalarType : uint8_t {
  Float32 = 0,
  Float16 = 1,
  BFloat16 = 2,
  Float64 = 3,
  Int8 = 4,
  UInt8 = 5,
  Int16 = 6,
  Int32 = 7,
  Int64 = 8,
  Bool = 9,
};

inline constexpr int kNumScalarTypes = 10;

/// Bytes per element (Bool is one byte).
size_t element_size(ScalarType type);
/// Short lowercase name: "f32", "f16", "bf16", "f64", "i8", "u8", "i16", "i32", "i64", "bool".
std::string_view to_string(ScalarType type);
/// Parses a name from `to_string`; NotFound-style InvalidArgument naming the text otherwise.
Result<ScalarType> parse_scalar_type(std::string_view name);
/// True when `value` is one of the enumerators (used to validate file contents).
bool is_valid_scalar_type(int value);
bool is_floating_point(ScalarType type);

/// Maps a C++ type to its ScalarType: `scalar_type_of<float>` is Float32.
template <typename T>
struct ScalarTypeOf;
template <> struct ScalarTypeOf<float> { static constexpr ScalarType value = ScalarType::Float32; };
template <> struct ScalarTypeOf<double> { static constexpr ScalarType value = ScalarType::Float64; };
template <> struct ScalarTypeOf<int8_t> { static constexpr ScalarType value = ScalarType::Int8; };
template <> struct ScalarTypeOf<uint8_t> { static constexpr ScalarType value = ScalarType::UInt8; };
template <> struct ScalarTypeOf<int16_t> { static constexpr ScalarType value = ScalarType::Int16; };
template <> struct ScalarTypeOf<int32_t> { static constexpr ScalarType value = ScalarType::Int32; };
template <> struct ScalarTypeOf<int64_t> { static constexpr ScalarType value = ScalarType::Int64; };
template <> struct ScalarTypeOf<bool> { static constexpr ScalarType value = ScalarType::Bool; };
template <typename T>
inline constexpr ScalarType scalar_type_of = ScalarTypeOf<T>::value;

/// IEEE half and bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);

}  // namespace kiln::runtime
