#pragma once
// A function of a model run node by node on the reference kernels (kiln/kernels), with no plan,
// fusion, layout or packing: what a specialized function's results are checked against, by
// the tests and by the engine fuzzer's differential check.

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace kiln::engine::compile {

/// What one reference run may take.
struct ReferenceLimits {
  /// The most bytes the values of the run may hold together (each value keeps its storage
  /// until the run ends). Past it, the node that would grow a value fails with
  /// MemoryAllocationFailed naming the node, the value's shape and the bytes. 0: no limit.
  uint64_t max_bytes = 0;
  /// The most arithmetic work (`work_flops`, counted for Conv, ConvTranspose, MatMul and Gemm)
  /// the run's nodes may do together; past it, the node fails with OutOfResources before it
  /// runs. 0: no limit.
  double max_flops = 0;
};

/// One output of a reference run, owning its bytes.
struct ReferenceValue {
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;
  /// A tensor over `bytes` (valid while this value is neither moved nor resized).
  runtime::Tensor tensor();
};

/// Called with each node and each of its outputs' tensors once the node has run (an output
/// the node does not name is not reported).
using ReferenceObserver = std::function<void(const ir::Node&, const runtime::Tensor&)>;

/// Runs function `function` of `model` on `inputs` (one per function input, any sizes the
/// kernels accept) node by node on the registered reference kernels, and returns its outputs.
/// `weight_data`, indexed like `model.weights`, gives the weights' bytes for a model whose
/// weights hold none (a package view's); empty: each weight's own `data`.
/// Errors: NotFound (no such function); InvalidArgument (inputs' count); NotSupported (a node
/// with regions or of another domain); OperatorMissing (no reference kernel for a node's op);
/// a kernel's error, with the node's name and op; the limits' errors.
runtime::Result<std::vector<ReferenceValue>> run_reference(
    const ir::Model& model, std::string_view function,
    runtime::Span<const runtime::Tensor* const> inputs, const ReferenceLimits& limits = {},
    const std::vector<runtime::Span<const uint8_t>>& weight_data = {},
    const ReferenceObserver& observe = nullptr);

}  // namespace kiln::engine::compile
