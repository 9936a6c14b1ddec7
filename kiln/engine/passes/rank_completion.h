#pragma once

#include <kiln/engine/ir/graph.h>

#include <cstddef>

namespace kiln::engine::passes {

/// Gives a rank, and what dims follow, to the values of `graph`'s top-level nodes whose type
/// ONNX's shape inference left without a shape. ONNX 1.12 gives none to a Reshape whose shape
/// is computed (a Concat of gathered dims, as PyTorch writes every attention head split), and
/// then none to anything after it, so the patterns that need a rank (layer normalization's
/// trailing axes, the scale's normalized shape) stopped matching after a model's first
/// attention block. In node order, for outputs of unknown rank whose inputs' ranks are known:
/// - element-wise ops of one input, Softmax-like and normalization ops: the input's shape;
/// - broadcasting ops (Add, Mul, Where, comparisons, ...): the broadcast shape, each dim the
///   one both sides agree on, the other side's where one is 1, a static one against a dynamic
///   one (the only size a valid broadcast allows), else a new unknown;
/// - MatMul: the broadcast batch dims, then A's rows and B's columns;
/// - Transpose: the input's dims permuted;
/// - Reshape: to `Shape(v)` (no start or end), v's shape; else as many unknown dims as the 1-D
///   shape input has elements;
/// - Conv: X's batch, W's output channels, unknown spatial dims;
/// - reductions with their axes given (attribute or constant input): the kept or dropped axes;
/// - Unsqueeze and Squeeze with constant axes;
/// - Split: each part the input's dims, its size on the axis when the sizes are known.
/// Dims it cannot tell become anonymous unknowns (`Dim::symbol("")`); specialization computes
/// the real sizes, as for any dynamic dim. Inputs that contradict the op (a broadcast of 3 by 4,
/// an axis out of range) leave the output unknown, for the kernel to report. Returns how many
/// values it completed. Never fails.
size_t complete_ranks(const ir::Model& model, ir::Graph& graph);

}  // namespace kiln::engine::passes
