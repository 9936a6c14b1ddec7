#include <kiln/engine/passes/common_subexpressions.h>

#include <cstdio>
#include <numeric>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace kiln::engine::passes {

namespace {

// Ops whose every call may give other values.
bool is_random(const std::string& op) {
  static const std::set<std::string> kRandom = {
      "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
      "Multinomial",  "Bernoulli",        "Dropout"};
  return kRandom.count(op) != 0;
}

// An attribute value as text that two values share only when equal (doubles bit-exact).
void append_value(std::string& key, const ir::AttributeValue& value) {
  auto number = [&key](double d) {
    char text[40];
    std::snprintf(text, sizeof(text), "%a,", d);
    key += text;
  };
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          key += "i" + std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          key += "d";
          number(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          key += "s" + std::to_string(v.size()) + ":" + v;
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          key += "I";
          for (int64_t i : v) key += std::to_string(i) + ",";
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          key += "D";
          for (double d : v) number(d);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          key += "S";
          for (const std::string& s : v) key += std::to_string(s.size()) + ":" + s;
        } else {
          key += "w" + std::to_string(v.weight);
        }
      },
      value);
  key += ";";
}

class Merger {
 public:
  explicit Merger(ir::Graph& graph) : graph_(graph), rename_(graph.values.size()) {
    std::iota(rename_.begin(), rename_.end(), 0);
    returned_.insert(graph.outputs.begin(), graph.outputs.end());
  }

  size_t run() {
    std::unordered_map<std::string, size_t> first;  // key -> node index
    std::vector<bool> removed(graph_.nodes.size(), false);
    size_t merged = 0;
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      ir::Node& node = graph_.nodes[n];
      read_renamed(node);
      if (!node.regions.empty() || !node.domain.empty() || is_random(node.op) ||
          node.outputs.empty()) {
        continue;
      }
      const std::string key = key_of(node);
      auto [at, inserted] = first.emplace(key, n);
      if (inserted || !can_merge(graph_.nodes[at->second], node)) continue;
      const ir::Node& kept = graph_.nodes[at->second];
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] >= 0) rename_[static_cast<size_t>(node.outputs[i])] = kept.outputs[i];
      }
      removed[n] = true;
      ++merged;
    }
    if (merged == 0) return 0;
    std::vector<ir::Node> nodes;
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      if (!removed[n]) nodes.push_back(std::move(graph_.nodes[n]));
    }
    graph_.nodes = std::move(nodes);
    return merged;
  }

 private:
  int renamed(int value) const { return value < 0 ? value : rename_[static_cast<size_t>(value)]; }

  // The node's inputs (and its regions' reads and results) after the merges so far.
  void read_renamed(ir::Node& node) const {
    for (int& v : node.inputs) v = renamed(v);
    for (ir::Region& region : node.regions) {
      for (ir::Node& inner : region.nodes) read_renamed(inner);
      for (int& v : region.outputs) v = renamed(v);
    }
  }

  std::string key_of(const ir::Node& node) const {
    std::string key = node.op + "|" + std::to_string(node.outputs.size()) + "|";
    for (int v : node.inputs) {
      const int weight = v >= 0 ? graph_.values[static_cast<size_t>(v)].weight : -1;
      // Values of one weight (identical constants share an entry) count as the same input.
      key += v < 0         ? std::string("-")
             : weight >= 0 ? "w" + std::to_string(weight)
                           : "v" + std::to_string(v);
      key += ",";
    }
    key += "|";
    for (const ir::Attribute& a : node.attributes) {
      key += a.name + "=";
      append_value(key, a.value);
    }
    return key;
  }

  // Whether `later` may read `kept`'s results: same outputs present with the same dtypes, and
  // none the graph returns.
  bool can_merge(const ir::Node& kept, const ir::Node& later) const {
    if (kept.outputs.size() != later.outputs.size()) return false;
    for (size_t i = 0; i < later.outputs.size(); ++i) {
      const int a = kept.outputs[i], b = later.outputs[i];
      if ((a < 0) != (b < 0)) return false;
      if (b < 0) continue;
      if (returned_.count(b) != 0) return false;
      if (graph_.values[static_cast<size_t>(a)].type.dtype !=
          graph_.values[static_cast<size_t>(b)].type.dtype) {
        return false;
      }
    }
    return true;
  }

  ir::Graph& graph_;
  std::vector<int> rename_;
  std::set<int> returned_;
};

}  // namespace

size_t merge_common_subexpressions(ir::Graph& graph) { return Merger(graph).run(); }

}  // namespace kiln::engine::passes
