#include <kiln/exporter/partition.h>

#include <map>

namespace kiln::exporter {

namespace ir = engine::ir;

namespace {

// Values `node` reads: its inputs and (for nodes with regions) everything its regions read
// from outside themselves or return.
void reads_of(const ir::Node& node, std::vector<int>& reads) {
  for (int input : node.inputs) {
    if (input >= 0) reads.push_back(input);
  }
  for (const ir::Region& region : node.regions) {
    for (const ir::Node& inner : region.nodes) reads_of(inner, reads);
    for (int output : region.outputs) {
      if (output >= 0) reads.push_back(output);
    }
  }
}

void writes_of(const ir::Node& node, std::vector<int>& writes) {
  for (int output : node.outputs) {
    if (output >= 0) writes.push_back(output);
  }
  for (const ir::Region& region : node.regions) {
    for (const ir::Node& inner : region.nodes) writes_of(inner, writes);
  }
}

// Renumbers the values a partition's nodes use into a new graph.
class Extraction {
 public:
  Extraction(const ir::Model& source, const ir::Graph& graph, ir::Model& target)
      : source_(source), graph_(graph), target_(target) {}

  int value(int index) {
    if (index < 0) return index;
    auto it = map_.find(index);
    if (it != map_.end()) return it->second;
    ir::Value v = graph_.values[static_cast<size_t>(index)];
    if (v.weight >= 0) v.weight = weight(v.weight);
    int mapped = out_.add_value(std::move(v));
    map_[index] = mapped;
    return mapped;
  }

  ir::Node node(const ir::Node& in) {
    ir::Node out = in;
    for (int& i : out.inputs) i = value(i);
    for (int& o : out.outputs) o = value(o);
    for (ir::Attribute& a : out.attributes) {
      if (auto* ref = std::get_if<ir::WeightRef>(&a.value)) ref->weight = weight(ref->weight);
    }
    for (size_t r = 0; r < in.regions.size(); ++r) {
      ir::Region& region = out.regions[r];
      for (size_t n = 0; n < region.nodes.size(); ++n) {
        region.nodes[n] = node(in.regions[r].nodes[n]);
      }
      for (int& o : region.outputs) o = value(o);
    }
    return out;
  }

  ir::Graph& graph() { return out_; }

 private:
  int weight(int index) {
    auto it = weights_.find(index);
    if (it != weights_.end()) return it->second;
    int mapped = target_.add_weight(source_.weights[static_cast<size_t>(index)]);
    weights_[index] = mapped;
    return mapped;
  }

  const ir::Model& source_;
  const ir::Graph& graph_;
  ir::Model& target_;
  ir::Graph out_;
  std::map<int, int> map_;
  std::map<int, int> weights_;
};

}  // namespace

bool is_graph_break(const ir::Node& node) { return node.op == "If" && node.regions.size() == 2; }

std::vector<Partition> partition_graph(const ir::Graph& graph) {
  std::vector<Partition> partitions;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    bool brk = is_graph_break(graph.nodes[n]);
    if (partitions.empty() || brk || partitions.back().is_break) {
      partitions.push_back(Partition{});
      partitions.back().is_break = brk;
    }
    partitions.back().nodes.push_back(static_cast<int>(n));
  }
  // Boundaries: which partition produces each value, and the last partition reading it.
  std::vector<int> producer(graph.values.size(), -1);
  std::vector<int> last_reader(graph.values.size(), -1);
  for (int output : graph.outputs) last_reader[static_cast<size_t>(output)] = INT32_MAX;
  for (size_t p = 0; p < partitions.size(); ++p) {
    for (int n : partitions[p].nodes) {
      std::vector<int> reads, writes;
      reads_of(graph.nodes[static_cast<size_t>(n)], reads);
      writes_of(graph.nodes[static_cast<size_t>(n)], writes);
      for (int r : reads) {
        int& last = last_reader[static_cast<size_t>(r)];
        if (last != INT32_MAX) last = std::max(last, static_cast<int>(p));
      }
      for (int w : writes) producer[static_cast<size_t>(w)] = static_cast<int>(p);
    }
  }
  for (size_t p = 0; p < partitions.size(); ++p) {
    Partition& part = partitions[p];
    std::vector<bool> seen(graph.values.size(), false);
    // The graph's inputs a partition reads come first, in the graph's order.
    std::vector<bool> reads(graph.values.size(), false);
    for (int n : part.nodes) {
      std::vector<int> r;
      reads_of(graph.nodes[static_cast<size_t>(n)], r);
      for (int v : r) reads[static_cast<size_t>(v)] = true;
    }
    for (int input : graph.inputs) {
      size_t v = static_cast<size_t>(input);
      if (reads[v] && !seen[v]) {
        seen[v] = true;
        part.inputs.push_back(input);
      }
    }
    for (int n : part.nodes) {
      std::vector<int> reads, writes;
      reads_of(graph.nodes[static_cast<size_t>(n)], reads);
      writes_of(graph.nodes[static_cast<size_t>(n)], writes);
      for (int r : reads) {
        size_t v = static_cast<size_t>(r);
        if (seen[v] || graph.values[v].weight >= 0 || producer[v] == static_cast<int>(p)) continue;
        seen[v] = true;
        part.inputs.push_back(r);
      }
      for (int w : writes) {
        size_t v = static_cast<size_t>(w);
        if (!seen[v] && last_reader[v] > static_cast<int>(p)) part.outputs.push_back(w);
        seen[v] = true;
      }
    }
  }
  return partitions;
}

ir::Graph extract_partition(const ir::Model& source, const ir::Graph& graph,
                            const Partition& partition, const std::string& name,
                            ir::Model& target) {
  Extraction x(source, graph, target);
  for (int input : partition.inputs) x.graph().inputs.push_back(x.value(input));
  for (int n : partition.nodes) {
    x.graph().nodes.push_back(x.node(graph.nodes[static_cast<size_t>(n)]));
  }
  for (int output : partition.outputs) x.graph().outputs.push_back(x.value(output));
  x.graph().name = name;
  return std::move(x.graph());
}

void collect_symbols(const ir::Dim& dim, std::set<std::string>& symbols) {
  if (dim.is_static()) return;
  for (const ir::Dim::Term& term : dim.terms()) {
    if (term.op == 0) {
      if (!term.is_anonymous()) symbols.insert(term.key);
      continue;
    }
    collect_symbols(term.left, symbols);
    collect_symbols(term.right, symbols);
  }
}

}  // namespace kiln::exporter
