// Output comparison of the conformance runner, with the ONNX test runner's tolerance rule.

#include <kiln/exporter/conformance/conformance.h>

#include <cmath>
#include <cstdio>
#include <cstring>

namespace kiln::exporter {

using runtime::ScalarType;

namespace {

template <typename T>
T load(const uint8_t* data, int64_t index) {
  T value;
  std::memcpy(&value, data + static_cast<size_t>(index) * sizeof(T), sizeof(T));
  return value;
}

double load_float(ScalarType dtype, const uint8_t* data, int64_t i) {
  switch (dtype) {
    case ScalarType::Float32:
      return load<float>(data, i);
    case ScalarType::Float64:
      return load<double>(data, i);
    case ScalarType::Float16:
      return runtime::half_to_float(load<uint16_t>(data, i));
    case ScalarType::BFloat16:
      return runtime::bfloat16_to_float(load<uint16_t>(data, i));
    default:
      return 0;
  }
}

int64_t load_int(ScalarType dtype, const uint8_t* data, int64_t i) {
  switch (dtype) {
    case ScalarType::Int8:
      return load<int8_t>(data, i);
    case ScalarType::UInt8:
      return load<uint8_t>(data, i);
    case ScalarType::Int16:
      return load<int16_t>(data, i);
    case ScalarType::Int32:
      return load<int32_t>(data, i);
    case ScalarType::Int64:
      return load<int64_t>(data, i);
    case ScalarType::Bool:
      return load<uint8_t>(data, i) != 0;
    default:
      return 0;
  }
}

bool close_enough(double actual, double expected, double rtol, double atol) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  if (!std::isfinite(actual)) return false;
  return std::fabs(actual - expected) <= atol + rtol * std::fabs(expected);
}

std::string format_float(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

std::string format_int(ScalarType dtype, int64_t value) {
  if (dtype == ScalarType::Bool) return value ? "true" : "false";
  return std::to_string(value);
}

// "[0, 2] (flat 2)": the multi-index of flat index `flat` in a row-major tensor of `sizes`.
std::string format_index(const std::vector<int64_t>& sizes, int64_t flat) {
  std::vector<int64_t> index(sizes.size());
  int64_t rest = flat;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] > 0) {
      index[d] = rest % sizes[d];
      rest /= sizes[d];
    }
  }
  return runtime::shape_to_string(index) + " (flat " + std::to_string(flat) + ")";
}

}  // namespace

std::string compare_tensors(const runtime::Tensor& actual, const TensorData& expected, double rtol,
                            double atol) {
  if (actual.dtype() != expected.dtype) {
    return "dtype " + std::string(runtime::to_string(actual.dtype())) + " (expected " +
           std::string(runtime::to_string(expected.dtype)) + ")";
  }
  const std::vector<int64_t> actual_sizes(actual.sizes().begin(), actual.sizes().end());
  if (actual_sizes != expected.sizes) {
    return "shape " + runtime::shape_to_string(actual_sizes) + " (expected " +
           runtime::shape_to_string(expected.sizes) + ")";
  }
  if (!actual.is_contiguous()) return "output is not contiguous (expected row-major data)";
  const int64_t numel = actual.numel();
  if (numel == 0) return "";
  if (expected.data.size() != actual.nbytes()) {
    return "expected data holds " + std::to_string(expected.data.size()) + " bytes (expected " +
           std::to_string(actual.nbytes()) + ")";
  }
  const auto* a = static_cast<const uint8_t*>(actual.data());
  const uint8_t* e = expected.data.data();
  if (a == nullptr) return "output has no data";
  const ScalarType dtype = expected.dtype;
  const bool floating = runtime::is_floating_point(dtype);
  for (int64_t i = 0; i < numel; ++i) {
    if (floating) {
      const double x = load_float(dtype, a, i);
      const double y = load_float(dtype, e, i);
      if (!close_enough(x, y, rtol, atol)) {
        return "element " + format_index(expected.sizes, i) + " is " + format_float(x) +
               " (expected " + format_float(y) + ")";
      }
    } else {
      const int64_t x = load_int(dtype, a, i);
      const int64_t y = load_int(dtype, e, i);
      if (x != y) {
        return "element " + format_index(expected.sizes, i) + " is " + format_int(dtype, x) +
               " (expected " + format_int(dtype, y) + ")";
      }
    }
  }
  return "";
}

}  // namespace kiln::exporter
