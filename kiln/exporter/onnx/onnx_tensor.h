#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>

#include <onnx/onnx_pb.h>

namespace kiln::exporter {

/// kiln's dtype for an ONNX TensorProto data type number. Errors: NotSupported naming the type
/// (strings, complex, unsigned 16–64-bit).
runtime::Result<runtime::ScalarType> dtype_from_onnx(int onnx_type);

/// Converts a TensorProto (raw_data or typed fields) into a weight. Errors: NotSupported for
/// unsupported types or external data; InvalidProgram when the data size contradicts the dims.
runtime::Result<engine::ir::Weight> weight_from_proto(const onnx::TensorProto& proto);

}  // namespace kiln::exporter
