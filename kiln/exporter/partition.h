#pragma once

#include <kiln/engine/ir/graph.h>

#include <set>
#include <string>
#include <vector>

/// Partitioning (DESIGN.md §5): a method's top-level nodes split at graph breaks — nodes the
/// engine does not compile (today: a data-dependent If) — into runs. Each run is a candidate
/// KilnBackend delegate; the breaks run as reference KernelCalls between them.
namespace kiln::exporter {

/// A run of consecutive top-level nodes of a graph, or one graph break.
struct Partition {
  std::vector<int> nodes;    ///< Indices into the graph's top-level nodes, in order.
  bool is_break = false;     ///< A graph break: always lowered to KernelCalls.
  std::vector<int> inputs;   ///< Values read and not produced here (no weights), first use order.
  std::vector<int> outputs;  ///< Values produced here and read later or returned, in order.
};

/// Splits `graph` into runs of nodes the engine may compile, separated by graph breaks (one
/// partition each). Nodes of a break's regions count as readers of the outer values they use.
std::vector<Partition> partition_graph(const engine::ir::Graph& graph);

/// Whether `node` is a graph break (a data-dependent If).
bool is_graph_break(const engine::ir::Node& node);

/// The function of partition `partition` of `graph` (of `source`), named `name`: its inputs
/// and outputs are the partition's, its values only those its nodes use; weights are added to
/// `target` (identical weights once, see `ir::Model::add_weight`) and referenced from there.
engine::ir::Graph extract_partition(const engine::ir::Model& source, const engine::ir::Graph& graph,
                                    const Partition& partition, const std::string& name,
                                    engine::ir::Model& target);

/// The symbols `dim` is made of ("seq - 1" → {"seq"}); anonymous unknowns are left out.
void collect_symbols(const engine::ir::Dim& dim, std::set<std::string>& symbols);

}  // namespace kiln::exporter
