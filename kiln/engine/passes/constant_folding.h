#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>

namespace kiln::engine::passes {

/// Largest tensor (elements) constant folding produces; bigger results stay computed at run time.
inline constexpr int64_t kMaxFoldedElements = 1 << 22;

/// Evaluates `graph.nodes[node_index]` with the reference kernels when every input is a weight
/// (or, for Shape and Size, when the input's shape is static), and turns its outputs into weights
/// of `model`. Returns true when the node was folded (the caller removes it); false when it cannot
/// be (a non-constant input, no kernel, a random op, an output too large or of unknown dtype).
/// Errors: the kernel's own error, with the node named, when constant inputs are invalid.
runtime::Result<bool> fold_node(ir::Model& model, ir::Graph& graph, size_t node_index);
/// Same, for `node` (a node of `graph` or of one of its regions). Nodes with regions never fold.
runtime::Result<bool> fold_node(ir::Model& model, ir::Graph& graph, const ir::Node& node);

}  // namespace kiln::engine::passes
