#include <kiln/runtime/core/scalar_type.h>

#include <cmath>
#include <cstring>
#include <string>

namespace kiln::runtime {

size_t element_size(ScalarType type) {
  switch (type) {
    case ScalarType::Float32: return 4;
    case ScalarType::Float16: return 2;
    case ScalarType::BFloat16: return 2;
    case ScalarType::Float64: return 8;
    case ScalarType::Int8: return 1;
    case ScalarType::UInt8: return 1;
    case ScalarType::Int16: return 2;
    case ScalarType::Int32: return 4;
    case ScalarType::Int64: return 8;
    case ScalarType::Bool: return 1;
  }
  return 0;
}

std::string_view to_string(ScalarType type) {
  switch (type) {
    case ScalarType::Float32: return "f32";
    case ScalarType::Float16: return "f16";
    case ScalarType::BFloat16: return "bf16";
    case ScalarType::Float64: return "f64";
    case ScalarType::Int8: return "i8";
    case ScalarType::UInt8: return "u8";
    case ScalarType::Int16: return "i16";
    case ScalarType::Int32: return "i32";
    case ScalarType::Int64: return "i64";
    case ScalarType::Bool: return "bool";
  }
  return "invalid";
}

Result<ScalarType> parse_scalar_type(std::string_view name) {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto type = static_cast<ScalarType>(i);
    if (to_string(type) == name) return type;
  }
  return Status(Error::InvalidArgument,
                "parse dtype '" + std::string(name) +
                    "': unknown (expected f32, f16, bf16, f64, i8, u8, i16, i32, i64 or bool)");
}

bool is_valid_scalar_type(int value) { return value >= 0 && value < kNumScalarTypes; }

bool is_floating_point(ScalarType type) {
  return type == ScalarType::Float32 || type == ScalarType::Float16 ||
         type == ScalarType::BFloat16 || type == ScalarType::Float64;
}

float half_to_float(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: normalize
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      out = sign | static_cast<uint32_t>(127 - 15 - shift + 1) << 23 | mantissa << 13;
    }
  } else if (exponent == 0x1f) {
    out = sign | 0x7f800000u | mantissa << 13;
  } else {
    out = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  float value;
  std::memcpy(&value, &out, sizeof(value));
  return value;
}

uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    float magnitude;
    std::memcpy(&magnitude, &abs, sizeof(magnitude));
    // 2^-24 is the smallest half subnormal; rint rounds half to even.
    auto mantissa = static_cast<uint32_t>(std::nearbyint(magnitude * 16777216.0f));
    return static_cast<uint16_t>(sign | mantissa);
  }
  uint32_t rounded = abs + 0x0fffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float bfloat16_to_float(uint16_t bits) {
  uint32_t out = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &out, sizeof(value));
  return value;
}

uint16_t float_to_bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace kiln::runtime
