#include <tools/kiln/tensor_io.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace kiln::tools {

using extension::TensorPtr;
using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Status;
using runtime::Tensor;

namespace {

template <typename T, typename Fill>
void fill(Tensor& tensor, Fill&& next) {
  T* data = tensor.mutable_data_ptr<T>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = next();
}

std::string format_float(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

std::string element_string(const Tensor& tensor, int64_t i) {
  const void* data = tensor.data();
  switch (tensor.dtype()) {
    case ScalarType::Float32:
      return format_float(static_cast<const float*>(data)[i]);
    case ScalarType::Float64:
      return format_float(static_cast<const double*>(data)[i]);
    case ScalarType::Float16:
      return format_float(runtime::half_to_float(static_cast<const uint16_t*>(data)[i]));
    case ScalarType::BFloat16:
      return format_float(runtime::bfloat16_to_float(static_cast<const uint16_t*>(data)[i]));
    case ScalarType::Int8:
      return std::to_string(static_cast<const int8_t*>(data)[i]);
    case ScalarType::UInt8:
      return std::to_string(static_cast<const uint8_t*>(data)[i]);
    case ScalarType::Int16:
      return std::to_string(static_cast<const int16_t*>(data)[i]);
    case ScalarType::Int32:
      return std::to_string(static_cast<const int32_t*>(data)[i]);
    case ScalarType::Int64:
      return std::to_string(static_cast<const int64_t*>(data)[i]);
    case ScalarType::Bool:
      return static_cast<const uint8_t*>(data)[i] ? "true" : "false";
  }
  return "?";
}

}  // namespace

Result<TensorPtr> tensor_from_npy(const NpyArray& array) {
  KILN_ASSIGN_OR_RETURN(TensorPtr tensor, extension::make_tensor_ptr(array.dtype, array.shape));
  if (!array.data.empty()) {
    std::memcpy(tensor->mutable_data(), array.data.data(), array.data.size());
  }
  return tensor;
}

Result<TensorPtr> random_tensor(const runtime::TensorMeta& meta, std::mt19937_64& rng) {
  if (meta.tag != runtime::Tag::Tensor) {
    return Status(Error::NotSupported, "make random input '" + meta.name + "': it is a " +
                                           std::string(runtime::to_string(meta.tag)) +
                                           " (expected a tensor)");
  }
  std::vector<int64_t> sizes = meta.sizes;
  for (auto& size : sizes) {
    if (size <= 0) size = 1;
  }
  KILN_ASSIGN_OR_RETURN(TensorPtr tensor, extension::make_tensor_ptr(meta.dtype, sizes));
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  std::uniform_int_distribution<int> coin(0, 1);
  Tensor& t = *tensor;
  switch (meta.dtype) {
    case ScalarType::Float32:
      fill<float>(t, [&] { return real(rng); });
      break;
    case ScalarType::Float64:
      fill<double>(t, [&] { return double{real(rng)}; });
      break;
    case ScalarType::Float16:
      fill<uint16_t>(t, [&] { return runtime::float_to_half(real(rng)); });
      break;
    case ScalarType::BFloat16:
      fill<uint16_t>(t, [&] { return runtime::float_to_bfloat16(real(rng)); });
      break;
    case ScalarType::Int8:
      fill<int8_t>(t, [&] { return static_cast<int8_t>(small(rng)); });
      break;
    case ScalarType::UInt8:
      fill<uint8_t>(t, [&] { return static_cast<uint8_t>(small(rng)); });
      break;
    case ScalarType::Int16:
      fill<int16_t>(t, [&] { return static_cast<int16_t>(small(rng)); });
      break;
    case ScalarType::Int32:
      fill<int32_t>(t, [&] { return small(rng); });
      break;
    case ScalarType::Int64:
      fill<int64_t>(t, [&] { return int64_t{small(rng)}; });
      break;
    case ScalarType::Bool:
      fill<uint8_t>(t, [&] { return static_cast<uint8_t>(coin(rng)); });
      break;
  }
  return tensor;
}

Result<NpyArray> npy_from_tensor(const Tensor& tensor) {
  if (!tensor.is_contiguous()) {
    return Status(Error::NotSupported,
                  "write tensor as npy: dim order is not row-major (expected contiguous)");
  }
  NpyArray array;
  array.dtype = tensor.dtype();
  array.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  const auto* bytes = static_cast<const uint8_t*>(tensor.data());
  if (tensor.nbytes() > 0) array.data.assign(bytes, bytes + tensor.nbytes());
  return array;
}

std::string format_values(const Tensor& tensor, size_t max_values) {
  const int64_t shown = std::min<int64_t>(tensor.numel(), static_cast<int64_t>(max_values));
  std::string out = "[";
  for (int64_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += element_string(tensor, i);
  }
  if (shown < tensor.numel()) {
    out += shown > 0 ? ", ... (" : "... (";
    out += std::to_string(tensor.numel() - shown) + " more)";
  }
  return out + "]";
}

std::string format_evalue(const runtime::EValue& value, size_t max_values) {
  switch (value.tag()) {
    case runtime::Tag::Tensor: {
      const Tensor& t = value.to_tensor();
      return std::string(runtime::to_string(t.dtype())) + " " +
             runtime::shape_to_string(t.sizes()) + " = " + format_values(t, max_values);
    }
    case runtime::Tag::None:
      return "none";
    case runtime::Tag::Bool:
      return value.to_bool() ? "true" : "false";
    case runtime::Tag::Int:
      return "int " + std::to_string(value.to_int());
    case runtime::Tag::Double:
      return "double " + format_float(value.to_double());
    case runtime::Tag::String:
      return "string \"" + value.to_string() + "\"";
    case runtime::Tag::IntList: {
      std::string out = "ints [";
      for (size_t i = 0; i < value.to_int_list().size(); ++i) {
        out += (i ? ", " : "") + std::to_string(value.to_int_list()[i]);
      }
      return out + "]";
    }
    case runtime::Tag::DoubleList: {
      std::string out = "doubles [";
      for (size_t i = 0; i < value.to_double_list().size(); ++i) {
        out += (i ? ", " : "") + format_float(value.to_double_list()[i]);
      }
      return out + "]";
    }
  }
  return "?";
}

}  // namespace kiln::tools
