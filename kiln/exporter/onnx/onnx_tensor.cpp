#include <kiln/exporter/onnx/onnx_tensor.h>

#include <cstring>

namespace kiln::exporter {

using runtime::Error;
using runtime::ScalarType;
using runtime::Status;

runtime::Result<ScalarType> dtype_from_onnx(int onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return ScalarType::Float32;
    case onnx::TensorProto::UINT8: return ScalarType::UInt8;
    case onnx::TensorProto::INT8: return ScalarType::Int8;
    case onnx::TensorProto::INT16: return ScalarType::Int16;
    case onnx::TensorProto::INT32: return ScalarType::Int32;
    case onnx::TensorProto::INT64: return ScalarType::Int64;
    case onnx::TensorProto::BOOL: return ScalarType::Bool;
    case onnx::TensorProto::FLOAT16: return ScalarType::Float16;
    case onnx::TensorProto::DOUBLE: return ScalarType::Float64;
    case onnx::TensorProto::BFLOAT16: return ScalarType::BFloat16;
    default: break;
  }
  std::string name = onnx::TensorProto::DataType_IsValid(onnx_type)
                         ? onnx::TensorProto::DataType_Name(
                               static_cast<onnx::TensorProto::DataType>(onnx_type))
                         : std::to_string(onnx_type);
  return Status(Error::NotSupported, "tensor type " + name);
}

namespace {

template <typename Field, typename Convert>
void copy_field(const Field& field, engine::ir::Weight& w, size_t element, Convert convert) {
  w.data.resize(static_cast<size_t>(field.size()) * element);
  for (int i = 0; i < field.size(); ++i) convert(field.Get(i), w.data.data() + i * element);
}

}  // namespace

runtime::Result<engine::ir::Weight> weight_from_proto(const onnx::TensorProto& proto) {
  engine::ir::Weight w;
  w.name = proto.name();
  std::string where = "read tensor '" + proto.name() + "'";
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return Status(Error::NotSupported, where + ": external data (expected data inside the model)");
  }
  auto dtype = dtype_from_onnx(proto.data_type());
  if (!dtype.ok()) return dtype.status().with_context(where);
  w.dtype = *dtype;
  w.sizes.assign(proto.dims().begin(), proto.dims().end());
  auto numel = runtime::checked_numel(w.sizes);
  if (!numel.ok()) return Status(Error::InvalidProgram, where + ": " + numel.status().message());
  size_t element = runtime::element_size(w.dtype);
  size_t expected = static_cast<size_t>(*numel) * element;
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    w.data.assign(raw.begin(), raw.end());
  } else {
    switch (w.dtype) {
      case ScalarType::Float32:
        copy_field(proto.float_data(), w, 4, [](float v, uint8_t* o) { std::memcpy(o, &v, 4); });
        break;
      case ScalarType::Float64:
        copy_field(proto.double_data(), w, 8, [](double v, uint8_t* o) { std::memcpy(o, &v, 8); });
        break;
      case ScalarType::Int64:
        copy_field(proto.int64_data(), w, 8, [](int64_t v, uint8_t* o) { std::memcpy(o, &v, 8); });
        break;
      case ScalarType::Int32:
        copy_field(proto.int32_data(), w, 4, [](int32_t v, uint8_t* o) { std::memcpy(o, &v, 4); });
        break;
      case ScalarType::Int16:
      case ScalarType::Float16:
      case ScalarType::BFloat16:
        copy_field(proto.int32_data(), w, 2, [](int32_t v, uint8_t* o) {
          auto b = static_cast<uint16_t>(v);
          std::memcpy(o, &b, 2);
        });
        break;
      case ScalarType::Int8:
      case ScalarType::UInt8:
      case ScalarType::Bool:
        copy_field(proto.int32_data(), w, 1,
                   [](int32_t v, uint8_t* o) { *o = static_cast<uint8_t>(v); });
        break;
    }
  }
  if (w.data.size() != expected) {
    return Status(Error::InvalidProgram, where + ": holds " + std::to_string(w.data.size()) +
                                             " bytes for shape " +
                                             runtime::shape_to_string(w.sizes) + " (expected " +
                                             std::to_string(expected) + ")");
  }
  return w;
}

}  // namespace kiln::exporter
