#include <kiln/exporter/conformance/tensor_proto.h>

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln::exporter {

using runtime::Error;
using runtime::ScalarType;
using runtime::Status;

runtime::Tensor TensorData::view() {
  return runtime::Tensor(dtype, sizes, data.empty() ? nullptr : data.data());
}

runtime::Result<ScalarType> scalar_type_from_onnx(int data_type) {
  switch (data_type) {
    case onnx::TensorProto::FLOAT:
      return ScalarType::Float32;
    case onnx::TensorProto::UINT8:
      return ScalarType::UInt8;
    case onnx::TensorProto::INT8:
      return ScalarType::Int8;
    case onnx::TensorProto::INT16:
      return ScalarType::Int16;
    case onnx::TensorProto::INT32:
      return ScalarType::Int32;
    case onnx::TensorProto::INT64:
      return ScalarType::Int64;
    case onnx::TensorProto::BOOL:
      return ScalarType::Bool;
    case onnx::TensorProto::FLOAT16:
      return ScalarType::Float16;
    case onnx::TensorProto::DOUBLE:
      return ScalarType::Float64;
    case onnx::TensorProto::BFLOAT16:
      return ScalarType::BFloat16;
    default:
      break;
  }
  std::string name =
      onnx::TensorProto::DataType_IsValid(data_type)
          ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(data_type))
          : "unknown";
  return Status(Error::NotSupported,
                "data type " + name + " (" + std::to_string(data_type) + ") is not supported");
}

namespace {

template <typename Field, typename Store>
void copy_field(const Field& field, size_t element, std::vector<uint8_t>& out, Store store) {
  out.resize(static_cast<size_t>(field.size()) * element);
  for (int i = 0; i < field.size(); ++i) {
    store(field.Get(i), out.data() + static_cast<size_t>(i) * element);
  }
}

template <typename T>
void store_as(T value, uint8_t* out) {
  std::memcpy(out, &value, sizeof(T));
}

void copy_typed_fields(const onnx::TensorProto& proto, ScalarType dtype,
                       std::vector<uint8_t>& out) {
  switch (dtype) {
    case ScalarType::Float32:
      copy_field(proto.float_data(), 4, out, store_as<float>);
      break;
    case ScalarType::Float64:
      copy_field(proto.double_data(), 8, out, store_as<double>);
      break;
    case ScalarType::Int64:
      copy_field(proto.int64_data(), 8, out, store_as<int64_t>);
      break;
    case ScalarType::Int32:
      copy_field(proto.int32_data(), 4, out, store_as<int32_t>);
      break;
    case ScalarType::Int16:
    case ScalarType::Float16:
    case ScalarType::BFloat16:
      // The spec stores 16-bit values (and the bits of halves) one per int32 entry.
      copy_field(proto.int32_data(), 2, out,
                 [](int32_t v, uint8_t* o) { store_as(static_cast<uint16_t>(v), o); });
      break;
    case ScalarType::Int8:
    case ScalarType::UInt8:
    case ScalarType::Bool:
      copy_field(proto.int32_data(), 1, out,
                 [](int32_t v, uint8_t* o) { *o = static_cast<uint8_t>(v); });
      break;
  }
}

// Sequence and optional values share field numbers with TensorProto fields (name/dims,
// elem_type/data_type, values/segment), so they often parse as a strange TensorProto; this
// names what the file really holds when it is not a plausible tensor.
std::string describe_non_tensor(const std::string& bytes) {
  onnx::SequenceProto sequence;
  if (sequence.ParseFromString(bytes) && sequence.unknown_fields().empty() &&
      sequence.elem_type() != onnx::SequenceProto::UNDEFINED) {
    // An OptionalProto has the same layout; at most one value tells them apart only loosely.
    return sequence.tensor_values_size() > 1 || sequence.sequence_values_size() > 1
               ? "an onnx.SequenceProto"
               : "an onnx.SequenceProto or onnx.OptionalProto";
  }
  return "";
}

runtime::Result<TensorData> parse_tensor(const std::string& bytes, const std::string& where,
                                         bool uint16_as_bfloat16) {
  onnx::TensorProto proto;
  const bool parsed = proto.ParseFromString(bytes);
  if (!parsed || proto.has_segment() || !proto.unknown_fields().empty() ||
      proto.data_type() == onnx::TensorProto::UNDEFINED) {
    std::string other = describe_non_tensor(bytes);
    if (!other.empty()) {
      return Status(Error::InvalidArgument, where + ": holds " + other + " (expected a tensor)");
    }
    if (!parsed) {
      return Status(Error::InvalidArgument, where + ": not a valid onnx.TensorProto (" +
                                                std::to_string(bytes.size()) + " bytes)");
    }
    if (proto.data_type() == onnx::TensorProto::UNDEFINED) {
      return Status(Error::InvalidArgument, where + ": data type UNDEFINED (0)");
    }
  }
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return Status(Error::NotSupported, where + ": external data (expected the data in the file)");
  }
  auto dtype = uint16_as_bfloat16 && proto.data_type() == onnx::TensorProto::UINT16
                   ? runtime::Result<ScalarType>(ScalarType::BFloat16)
                   : scalar_type_from_onnx(proto.data_type());
  if (!dtype.ok()) return dtype.status().with_context(where);

  TensorData tensor;
  tensor.name = proto.name();
  tensor.dtype = *dtype;
  tensor.sizes.assign(proto.dims().begin(), proto.dims().end());
  auto numel = runtime::checked_numel(tensor.sizes);
  if (!numel.ok()) return Status(Error::InvalidArgument, where + ": " + numel.status().message());
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    tensor.data.assign(raw.begin(), raw.end());
  } else {
    copy_typed_fields(proto, tensor.dtype, tensor.data);
  }
  const size_t expected = static_cast<size_t>(*numel) * runtime::element_size(tensor.dtype);
  if (tensor.data.size() != expected) {
    return Status(Error::InvalidArgument, where + ": tensor '" + tensor.name + "' holds " +
                                              std::to_string(tensor.data.size()) + " bytes for " +
                                              std::string(runtime::to_string(tensor.dtype)) +
                                              runtime::shape_to_string(tensor.sizes) +
                                              " (expected " + std::to_string(expected) + ")");
  }
  return tensor;
}

}  // namespace

runtime::Result<TensorData> parse_tensor_proto(const std::string& bytes, const std::string& source,
                                               bool uint16_as_bfloat16) {
  const std::string where = "read tensor file '" + source + "'";
  auto tensor = parse_tensor(bytes, where, uint16_as_bfloat16);
  if (!tensor.ok() && tensor.error() == Error::InvalidArgument) {
    // A sequence or optional can also parse as a TensorProto whose sizes or data make no sense.
    std::string other = describe_non_tensor(bytes);
    if (!other.empty()) {
      return Status(Error::InvalidArgument, where + ": holds " + other + " (expected a tensor)");
    }
  }
  return tensor;
}

runtime::Result<TensorData> read_tensor_proto_file(const std::string& path,
                                                   bool uint16_as_bfloat16) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return Status(Error::AccessFailed, "read tensor file '" + path + "': cannot open it");
  }
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (file.bad()) {
    return Status(Error::AccessFailed, "read tensor file '" + path + "': read failed");
  }
  return parse_tensor_proto(bytes.str(), path, uint16_as_bfloat16);
}

}  // namespace kiln::exporter
