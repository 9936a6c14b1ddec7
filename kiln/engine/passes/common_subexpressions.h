#pragma once

#include <kiln/engine/ir/graph.h>

#include <cstddef>

namespace kiln::engine::passes {

/// Merges the top-level nodes of `graph` that compute the same thing: the same op and domain,
/// the same inputs (a value, or the same model weight) and equal attributes, and no regions.
/// Later readers (regions included) read the first node's outputs instead, and the later node
/// is removed. Exporters repeat shape arithmetic per layer (GPT decode: 36 of its Shape,
/// Unsqueeze and Concat nodes are copies), which a shape-generic plan would run at every call.
/// Left alone: random ops (their outputs differ per call), ops of other domains, nodes whose
/// outputs the graph returns (so no output is lost or doubled), and nodes whose outputs differ
/// in count or dtype from the first's. Returns how many nodes were removed. Never fails.
size_t merge_common_subexpressions(ir::Graph& graph);

}  // namespace kiln::engine::passes
