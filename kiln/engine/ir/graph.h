#pragma once

#include <kiln/engine/ir/dim.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/span.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kiln::engine::ir {

/// A tensor's element type and shape. `rank_known` false means nothing is known of the shape.
struct TensorType {
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::vector<Dim> shape;
  bool rank_known = true;

  bool is_static() const;
  /// Sizes when static; empty optional otherwise.
  std::optional<std::vector<int64_t>> static_sizes() const;
  /// "f32[1, seq, 768]" or "f32[?]".
  std::string to_string() const;
};

/// A constant tensor of the model's weight table, stored once however many functions use it.
struct Weight {
  std::string name;
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> data;
  uint64_t content_hash = 0;  ///< Of dtype, sizes and data; identical weights share one entry.
};

/// A value of a graph: a graph input, a node output, or a weight (when `weight >= 0`).
struct Value {
  std::string name;
  TensorType type;
  int weight = -1;
};

/// Index of a weight (for tensor attributes such as ConstantOfShape's `value`).
struct WeightRef {
  int weight = -1;
  friend bool operator==(const WeightRef&, const WeightRef&) = default;
};

using AttributeValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                                    std::vector<double>, std::vector<std::string>, WeightRef>;

struct Attribute {
  std::string name;
  AttributeValue value;
};

struct Node;

/// A branch of a control-flow node: nodes run in order, then `outputs` are the branch's results
/// (the node's outputs take them). Branch nodes index into the enclosing graph's values, so a
/// branch reads outer values directly.
struct Region {
  std::vector<Node> nodes;
  std::vector<int> outputs;
};

/// One operation. `inputs` and `outputs` are indices into the graph's values; -1 is an absent
/// optional input. A data-dependent If has two regions, then and else, and its input 0 is the
/// condition.
struct Node {
  std::string name;
  std::string op;
  std::string domain;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<Attribute> attributes;
  std::vector<Region> regions;

  const Attribute* attribute(std::string_view name) const;
};

/// A function of a model: values, nodes in execution order, inputs and outputs.
struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;
  std::vector<int> outputs;

  /// Index of value `name`, or -1.
  int find_value(std::string_view name) const;
  /// Adds a value and returns its index.
  int add_value(Value value);
};

/// A multi-function model with one weight table.
struct Model {
  std::vector<Weight> weights;
  std::vector<Graph> functions;

  /// Adds `weight` (hashing it) unless an identical one is present; returns its index.
  int add_weight(Weight weight);
  const Graph* find_function(std::string_view name) const;
};

/// The content hash of a weight's dtype, sizes and bytes (XXH3-64).
uint64_t hash_weight(const Weight& weight);
/// The same hash from the parts, for weight bytes held elsewhere (a mapped model package).
uint64_t hash_weight(runtime::ScalarType dtype, runtime::Span<const int64_t> sizes,
                     runtime::Span<const uint8_t> data);

}  // namespace kiln::engine::ir

namespace kiln::engine::ir {

/// An attribute as the EValue a kernel reads: int → Int, float → Double, string → String,
/// ints → IntList, floats → DoubleList, strings → one String joined by ',' (ONNX string lists,
/// such as RNN activation names, never contain commas). A WeightRef has no scalar form: the
/// result is empty and the caller passes the weight as a tensor.
std::optional<runtime::EValue> scalar_attribute(const AttributeValue& value);

}  // namespace kiln::engine::ir
