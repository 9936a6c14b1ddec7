#include <kiln/engine/compile/shape_resolution.h>

#include <kiln/kernels/broadcast.h>
#include <kiln/kernels/kernels.h>
#include <kiln/runtime/core/tensor.h>

#include <map>
#include <set>
#include <string>

namespace kiln::engine::compile {

using runtime::Error;
using runtime::Status;

namespace {

// The symbol a dim is exactly, if it is a plain named symbol.
std::optional<std::string> plain_symbol(const ir::Dim& dim) {
  if (dim.is_static() || dim.constant() != 0) return std::nullopt;
  auto terms = dim.terms();
  if (terms.size() != 1 || terms[0].coefficient != 1 || terms[0].op != 0 ||
      terms[0].is_anonymous()) {
    return std::nullopt;
  }
  return terms[0].key;
}

Status bind_input(const ir::Graph& graph, size_t index, const std::vector<int64_t>& sizes,
                  std::map<std::string, int64_t>& bindings,
                  std::map<std::string, std::string>& bound_by) {
  const ir::Value& value = graph.values[static_cast<size_t>(graph.inputs[index])];
  const std::string subject =
      "specialize function '" + graph.name + "': input '" + value.name + "'";
  const auto& shape = value.type.shape;
  for (int64_t s : sizes) {
    if (s < 0) {
      return Status(Error::InvalidArgument, subject + " has shape " +
                                                runtime::shape_to_string(sizes) +
                                                " (expected non-negative sizes)");
    }
  }
  if (!value.type.rank_known) return Status();
  if (shape.size() != sizes.size()) {
    return Status(Error::InvalidArgument,
                  subject + " has shape " + runtime::shape_to_string(sizes) + " (expected " +
                      value.type.to_string() + ", rank " + std::to_string(shape.size()) + ")");
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d].is_static()) {
      if (shape[d].value() != sizes[d]) {
        return Status(Error::InvalidArgument, subject + " has shape " +
                                                  runtime::shape_to_string(sizes) + " (expected " +
                                                  value.type.to_string() + ")");
      }
      continue;
    }
    auto symbol = plain_symbol(shape[d]);
    if (!symbol) continue;
    auto [it, inserted] = bindings.emplace(*symbol, sizes[d]);
    if (!inserted && it->second != sizes[d]) {
      return Status(Error::InvalidArgument,
                    subject + " dim " + std::to_string(d) + " is " + std::to_string(sizes[d]) +
                        " (expected " + std::to_string(it->second) + ": symbol '" + *symbol +
                        "' is bound by input '" + bound_by[*symbol] + "')");
    }
    bound_by.emplace(*symbol, value.name);
  }
  return Status();
}

}  // namespace

namespace {

Status bind_inputs(const ir::Graph& graph, const std::vector<std::vector<int64_t>>& input_sizes,
                   std::map<std::string, int64_t>& bindings) {
  if (input_sizes.size() != graph.inputs.size()) {
    return Status(Error::InvalidArgument, "specialize function '" + graph.name + "': got " +
                                              std::to_string(input_sizes.size()) +
                                              " input shapes (expected " +
                                              std::to_string(graph.inputs.size()) + ")");
  }
  std::map<std::string, std::string> bound_by;
  for (size_t i = 0; i < input_sizes.size(); ++i) {
    KILN_RETURN_IF_ERROR(bind_input(graph, i, input_sizes[i], bindings, bound_by));
  }
  return Status();
}

}  // namespace

runtime::Status check_input_sizes(const ir::Graph& graph,
                                  const std::vector<std::vector<int64_t>>& input_sizes) {
  std::map<std::string, int64_t> bindings;
  return bind_inputs(graph, input_sizes, bindings);
}

runtime::Result<std::vector<std::optional<std::vector<int64_t>>>> resolve_shapes(
    const ir::Graph& graph, const std::vector<std::vector<int64_t>>& input_sizes) {
  std::map<std::string, int64_t> bindings;
  KILN_RETURN_IF_ERROR(bind_inputs(graph, input_sizes, bindings));
  std::vector<std::optional<std::vector<int64_t>>> sizes(graph.values.size());
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const ir::TensorType& type = graph.values[v].type;
    if (!type.rank_known) continue;
    std::vector<int64_t> out;
    bool ok = true;
    for (const ir::Dim& dim : type.shape) {
      auto value = dim.evaluate(bindings);
      if (!value.ok() || *value < 0) {
        ok = false;
        break;
      }
      out.push_back(*value);
    }
    if (ok) sizes[v] = std::move(out);
  }
  for (size_t i = 0; i < input_sizes.size(); ++i) sizes[graph.inputs[i]] = input_sizes[i];
  return sizes;
}

bool shape_is_data_independent(const ir::Node& node, const std::function<bool(int)>& is_constant,
                               const std::function<runtime::ScalarType(int)>& dtype_of) {
  static const std::set<std::string> kDataDependent = {
      "NonZero", "NonMaxSuppression", "Unique",         "Compress", "Loop", "Scan",
      "If",      "StringNormalizer",  "TfIdfVectorizer"};
  // Ops whose integer or bool inputs are data, not shapes: any value gives the same shape.
  static const std::set<std::string> kIntsAreData = {
      "Add",        "Sub",       "Mul",        "Div",         "Mod",     "Neg",
      "Abs",        "Equal",     "Less",       "LessOrEqual", "Greater", "GreaterOrEqual",
      "And",        "Or",        "Xor",        "Not",         "Cast",    "CastLike",
      "Max",        "Min",       "Where",      "Identity",    "Sign",    "BitShift",
      "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"};
  static const std::map<std::string, size_t> kIndicesInput = {
      {"Gather", 1},          {"GatherElements", 1}, {"GatherND", 1}, {"ScatterND", 1},
      {"ScatterElements", 1}, {"Scatter", 1},        {"OneHot", 0}};
  // Ops whose floating-point inputs set the output shape (Range's bounds, Resize's scales).
  static const std::set<std::string> kFloatsAreShapes = {"Range", "Resize", "Upsample"};
  if (kDataDependent.count(node.op) != 0 || !node.regions.empty() || !node.domain.empty()) {
    return false;
  }
  if (kFloatsAreShapes.count(node.op) != 0) {
    for (int v : node.inputs) {
      if (v >= 0 && !is_constant(v) && runtime::is_floating_point(dtype_of(v))) {
        if (node.op == "Range" || v != node.inputs[0]) return false;
      }
    }
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int v = node.inputs[i];
    if (v < 0 || is_constant(v) || runtime::is_floating_point(dtype_of(v))) continue;
    if (kIntsAreData.count(node.op) != 0) continue;
    auto it = kIndicesInput.find(node.op);
    if (it != kIndicesInput.end() && it->second == i) continue;
    return false;
  }
  return true;
}

}  // namespace kiln::engine::compile
