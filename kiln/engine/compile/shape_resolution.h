#pragma once
// Internal to kiln/engine/compile: concrete shapes of a function's values.

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>

#include <functional>
#include <optional>
#include <vector>

namespace kiln::engine::compile {

/// Binds the symbolic dims of `graph`'s inputs to `input_sizes` and evaluates every value's
/// declared shape. Entry v is value v's sizes, or empty when its rank is unknown or a dim does
/// not evaluate (an anonymous dim, a symbol no input binds). Weights get their own sizes.
/// Errors: InvalidArgument naming the input for a wrong input count, a wrong rank, a negative
/// size, a size that contradicts a static dim or another binding of the same symbol.
runtime::Result<std::vector<std::optional<std::vector<int64_t>>>> resolve_shapes(
    const ir::Graph& graph, const std::vector<std::vector<int64_t>>& input_sizes);

/// The input checks of `resolve_shapes` alone (count, rank, static dims, one value per input
/// symbol), without evaluating any other value: what a shape-generic plan checks on each run.
/// Errors: as `resolve_shapes`.
runtime::Status check_input_sizes(const ir::Graph& graph,
                                  const std::vector<std::vector<int64_t>>& input_sizes);

/// True when `node`'s output shapes depend only on its inputs' shapes and on the values of
/// its constant inputs (`is_constant(value)`), so one run on zeros reveals them: integer and
/// bool inputs that are not constant may carry shapes, except where the op reads them as data
/// (element-wise ops, Gather indices, ...).
bool shape_is_data_independent(const ir::Node& node, const std::function<bool(int)>& is_constant,
                               const std::function<runtime::ScalarType(int)>& dtype_of);

/// The tensor of a node's input `index` when it is a constant (a weight or a folded value)
/// whose bytes may be read, else null.
using ConstantInput = std::function<const runtime::Tensor*(size_t index)>;

/// The output shapes of `node` computed from its input shapes (and, through `constant`, the
/// values of constant inputs) for the common ops whose rule is simple, so specialization need
/// not run a kernel on zeros to learn them (for a Conv or a Resize that costs a whole run of
/// the reference kernel): element-wise and broadcasting ops, Softmax-like and normalization
/// ops, MatMul, Transpose, Concat, Conv, ConvTranspose, MaxPool and AveragePool (one output),
/// and with constant inputs Reshape, Squeeze, Unsqueeze, Split and Resize. nullopt for other
/// ops, an input of unknown shape, a value computed at run time, or inputs the rule rejects
/// (the kernel reports why). `shape_rules.cpp`.
std::optional<std::vector<std::vector<int64_t>>> rule_shapes(
    const ir::Node& node, const std::vector<std::optional<std::vector<int64_t>>>& input_sizes,
    const ConstantInput& constant = {});

}  // namespace kiln::engine::compile
