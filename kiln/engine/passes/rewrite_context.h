#pragma once

#include <kiln/engine/ir/graph.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::passes {

/// What the pattern rewrites of one graph share: who reads each value, which top-level nodes a
/// rewrite has taken out, and the constants a pattern may test or add. Reads from inside a
/// node's regions count against their top-level node; graph outputs count as two reads, so a
/// pattern never absorbs a value the graph returns.
class RewriteContext {
 public:
  RewriteContext(ir::Model& model, ir::Graph& graph);

  ir::Model& model() { return model_; }
  ir::Graph& graph() { return graph_; }
  const ir::Value& value(int index) const { return graph_.values[static_cast<size_t>(index)]; }

  /// How many times `value` is read (a node reading it twice counts twice).
  int uses(int value) const { return value < 0 ? 0 : uses_[static_cast<size_t>(value)]; }
  /// The only top-level node reading `value`, when exactly one node reads it once and that
  /// node is in the default domain without regions; else null.
  const ir::Node* sole_consumer(int value, size_t& index) const;
  /// The top-level nodes (not removed) reading `value`, each once, in order.
  std::vector<size_t> readers(int value) const;
  /// The node (not removed) writing `value`, or SIZE_MAX.
  size_t producer(int value) const;

  /// The value of a constant f32 tensor of one element.
  std::optional<float> scalar(int value) const;
  /// The weight behind `value` when it is a constant of `dtype`; else null.
  const ir::Weight* constant(int value, runtime::ScalarType dtype) const;
  /// The `channels` values (as double) of the f32 constant `value` read beside a tensor of rank
  /// `rank`, when it broadcasts along axis 1 only (one value, or one per channel: [C, 1, 1],
  /// [1, C, 1, 1], ...); else nullopt.
  std::optional<std::vector<double>> per_channel(int value, size_t rank, int64_t channels) const;
  /// Whether `value` is within 1e-6 (relative, at least absolute) of `expected`.
  static bool near(float value, double expected);
  /// Whether `node` is `op` of `value` and a constant scalar near `expected` (on either side
  /// when `commutes`).
  bool binary_with(const ir::Node& node, const char* op, int value, double expected,
                   bool commutes) const;
  static bool reads(const ir::Node& node, int value);
  /// The input of a binary `node` that is not `value`.
  static int other_input(const ir::Node& node, int value);

  /// Adds `weight` to the model and a value for it, read once by top-level node `reader`.
  int add_constant(ir::Weight weight, size_t reader);
  /// Replaces the nodes `absorbed` by `node`, put in the place of the last of them (so every
  /// input the pattern read exists by then).
  void replace(const std::vector<size_t>& absorbed, ir::Node node);
  void remove(size_t node) { removed_[node] = true; }
  /// One read of `value` is gone (a node no longer reads it there).
  void drop_read(int value) {
    if (value >= 0) --uses_[static_cast<size_t>(value)];
  }
  /// Top-level node `reader` reads `value` as input `input`, in place of what it read there.
  void replace_input(size_t reader, size_t input, int value);
  bool removed(size_t node) const { return removed_[node]; }
  /// Drops the removed nodes from the graph; the context is spent afterwards.
  void compact();

 private:
  void count_node(const ir::Node& node, int top);

  ir::Model& model_;
  ir::Graph& graph_;
  std::vector<int> uses_;
  std::vector<int> consumer_;
  std::vector<bool> removed_;
};

/// The int attribute `name` of `node`, when it has one of that type.
std::optional<int64_t> int_attribute(const ir::Node& node, const char* name);
/// The elements of an f32 weight.
std::vector<float> f32_values(const ir::Weight& weight);
/// An f32 weight of `sizes` holding `values`.
ir::Weight f32_weight(std::string name, std::vector<int64_t> sizes,
                      const std::vector<float>& values);

}  // namespace kiln::engine::passes
