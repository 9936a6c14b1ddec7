#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::exporter {

/// A tensor read from a test-data file, owning its bytes (little-endian, row-major).
struct TensorData {
  std::string name;
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> data;

  /// A runtime tensor aliasing `data`; valid while this object lives and is not resized.
  runtime::Tensor view();
};

/// kiln's dtype for an ONNX `TensorProto.DataType` number (1 float, 2 uint8, 3 int8, 5 int16,
/// 6 int32, 7 int64, 9 bool, 10 float16, 11 double, 16 bfloat16). Errors: NotSupported naming
/// the type ("data type STRING (8)") for strings, complex and unsigned 16–64-bit types.
runtime::Result<runtime::ScalarType> scalar_type_from_onnx(int data_type);

/// Parses a serialized `onnx.TensorProto` (`raw_data` or the typed fields `float_data`,
/// `int32_data` — which also holds int8/uint8/int16/bool/float16/bfloat16 values, one per
/// entry —, `int64_data`, `double_data`). `source` names the bytes in messages (a file path).
/// Errors: NotSupported for an unsupported data type or external data; InvalidArgument for bytes
/// that are not a TensorProto, a data size that contradicts the dims, or bytes that hold an
/// `onnx.SequenceProto` / `onnx.OptionalProto` instead (the message says so).
///
/// `uint16_as_bfloat16`: ONNX's test generators store bfloat16 data as UINT16 tensors (NumPy has
/// no bfloat16); when true, UINT16 data is read as BFloat16 instead of being NotSupported.
runtime::Result<TensorData> parse_tensor_proto(const std::string& bytes, const std::string& source,
                                               bool uint16_as_bfloat16 = false);

/// Reads and parses the TensorProto file `path` (e.g. `test_data_set_0/input_0.pb`). Errors:
/// AccessFailed naming the path when it cannot be read, else as `parse_tensor_proto`.
runtime::Result<TensorData> read_tensor_proto_file(const std::string& path,
                                                   bool uint16_as_bfloat16 = false);

}  // namespace kiln::exporter
