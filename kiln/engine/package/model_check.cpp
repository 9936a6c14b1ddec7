#include <kiln/engine/package/model_check.h>

#include <set>
#include <string>
#include <vector>

namespace kiln::engine::package {

namespace {

using runtime::Error;
using runtime::Status;

std::string range(size_t count) {
  return count == 0 ? "none, the table is empty" : "0.." + std::to_string(count - 1);
}

class ModelChecker {
 public:
  ModelChecker(const ir::Model& model, Error code, const std::string& action)
      : model_(model), code_(code), action_(action) {}

  Status check() {
    for (size_t i = 0; i < model_.weights.size(); ++i) {
      const ir::Weight& w = model_.weights[i];
      std::string where = "weight " + std::to_string(i) + " '" + w.name + "'";
      if (!runtime::is_valid_scalar_type(static_cast<int>(w.dtype))) {
        return fail(where, "dtype " + std::to_string(static_cast<int>(w.dtype)) + " (expected 0.." +
                               std::to_string(runtime::kNumScalarTypes - 1) + ")");
      }
      if (!weight_byte_count(w.dtype, w.sizes)) {
        return fail(where, "sizes have a negative size or more than 2^64 bytes");
      }
    }
    std::set<std::string> names;
    for (const ir::Graph& f : model_.functions) {
      if (!names.insert(f.name).second) {
        return fail("function '" + f.name + "'", "name is used twice (expected unique names)");
      }
      if (Status s = check_function(f); !s.ok()) return s;
    }
    return Status();
  }

 private:
  Status fail(const std::string& where, const std::string& problem) const {
    return Status(code_, action_ + ": " + where + ": " + problem);
  }

  // `where()` and `what()` make the message's parts: only for a bad index (checking a large
  // model must not build a string per index).
  template <typename Where, typename What>
  Status check_index(const Where& where, const What& what, int64_t index, size_t count,
                     bool allow_absent) const {
    if ((allow_absent && index == -1) || (index >= 0 && static_cast<size_t>(index) < count)) {
      return Status();
    }
    return fail(where(), what() + " is " + std::to_string(index) + " (expected " +
                             (allow_absent ? "-1 or " : "") + range(count) + ")");
  }

  template <typename Where>
  Status check_value(const Where& where, const ir::Value& v) const {
    if (!runtime::is_valid_scalar_type(static_cast<int>(v.type.dtype))) {
      return fail(where(), "dtype " + std::to_string(static_cast<int>(v.type.dtype)) +
                               " (expected 0.." + std::to_string(runtime::kNumScalarTypes - 1) +
                               ")");
    }
    if (!v.type.rank_known && !v.type.shape.empty()) {
      return fail(where(), "has unknown rank but " + std::to_string(v.type.shape.size()) +
                               " dims (expected none)");
    }
    KILN_RETURN_IF_ERROR(check_index(
        where, [] { return std::string("weight"); }, v.weight, model_.weights.size(), true));
    if (v.weight < 0) return Status();
    const ir::Weight& w = model_.weights[v.weight];
    if (w.dtype != v.type.dtype) {
      return fail(where(), "dtype " + std::string(runtime::to_string(v.type.dtype)) +
                               " differs from its weight " + std::to_string(v.weight) + " (" +
                               std::string(runtime::to_string(w.dtype)) + ")");
    }
    if (!v.type.rank_known) return Status();
    bool same = v.type.shape.size() == w.sizes.size();
    for (size_t d = 0; same && d < w.sizes.size(); ++d) {
      same = !v.type.shape[d].is_static() || v.type.shape[d].value() == w.sizes[d];
    }
    if (!same) {
      return fail(where(), "shape " + v.type.to_string() + " differs from its weight " +
                               std::to_string(v.weight) + " (" + std::to_string(w.sizes.size()) +
                               " dims)");
    }
    return Status();
  }

  Status check_node(const std::string& function, const ir::Node& node, size_t num_values) const {
    auto where = [&] { return function + " node '" + node.name + "' (" + node.op + ")"; };
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      auto what = [i] { return "input " + std::to_string(i); };
      KILN_RETURN_IF_ERROR(check_index(where, what, node.inputs[i], num_values, true));
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      auto what = [i] { return "output " + std::to_string(i); };
      KILN_RETURN_IF_ERROR(check_index(where, what, node.outputs[i], num_values, false));
    }
    for (const ir::Attribute& a : node.attributes) {
      if (const auto* ref = std::get_if<ir::WeightRef>(&a.value)) {
        auto what = [&] { return "attribute '" + a.name + "' weight"; };
        KILN_RETURN_IF_ERROR(check_index(where, what, ref->weight, model_.weights.size(), false));
      }
    }
    for (size_t r = 0; r < node.regions.size(); ++r) {
      const ir::Region& region = node.regions[r];
      std::string inner = where() + " region " + std::to_string(r);
      for (const ir::Node& n : region.nodes) {
        KILN_RETURN_IF_ERROR(check_node(inner, n, num_values));
      }
      for (size_t i = 0; i < region.outputs.size(); ++i) {
        auto what = [i] { return "output " + std::to_string(i); };
        KILN_RETURN_IF_ERROR(
            check_index([&] { return inner; }, what, region.outputs[i], num_values, false));
      }
    }
    return Status();
  }

  // Dataflow, after the indices are known good: `node` reads only values `defined` (function
  // inputs, weights, outputs of earlier nodes; in a region, also of the region's earlier
  // nodes) and writes values nothing else writes, which it then defines.
  Status check_flow(const std::string& where, const ir::Graph& f, const ir::Node& node,
                    std::vector<char>& defined) const {
    auto here = [&] { return where + " node '" + node.name + "' (" + node.op + ")"; };
    auto name = [&](int v) { return "value " + std::to_string(v) + " '" + f.values[v].name + "'"; };
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int v = node.inputs[i];
      if (v >= 0 && !defined[static_cast<size_t>(v)]) {
        return fail(here(), "input " + std::to_string(i) + " reads " + name(v) +
                                " before anything writes it (expected a function input, a weight "
                                "or an output of an earlier node)");
      }
    }
    for (size_t r = 0; r < node.regions.size(); ++r) {
      const ir::Region& region = node.regions[r];
      const std::string inner = here() + " region " + std::to_string(r);
      std::vector<char> scope = defined;
      for (const ir::Node& n : region.nodes) KILN_RETURN_IF_ERROR(check_flow(inner, f, n, scope));
      for (size_t i = 0; i < region.outputs.size(); ++i) {
        if (!scope[static_cast<size_t>(region.outputs[i])]) {
          return fail(inner, "output " + std::to_string(i) + " is " + name(region.outputs[i]) +
                                 ", which nothing writes (expected a value defined before the "
                                 "node or in the region)");
        }
      }
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const auto v = static_cast<size_t>(node.outputs[i]);
      if (defined[v]) {
        return fail(here(), "output " + std::to_string(i) + " writes " + name(node.outputs[i]) +
                                ", which is already written (expected each value written once, "
                                "never a function input or a weight)");
      }
      defined[v] = 1;
    }
    return Status();
  }

  Status check_function(const ir::Graph& f) const {
    const std::string function = "function '" + f.name + "'";
    auto where = [&] { return function; };
    for (size_t i = 0; i < f.values.size(); ++i) {
      auto value_where = [&] {
        return where() + " value " + std::to_string(i) + " '" + f.values[i].name + "'";
      };
      KILN_RETURN_IF_ERROR(check_value(value_where, f.values[i]));
    }
    for (const ir::Node& node : f.nodes) {
      KILN_RETURN_IF_ERROR(check_node(function, node, f.values.size()));
    }
    for (size_t i = 0; i < f.inputs.size(); ++i) {
      auto what = [i] { return "input " + std::to_string(i); };
      KILN_RETURN_IF_ERROR(check_index(where, what, f.inputs[i], f.values.size(), false));
    }
    for (size_t i = 0; i < f.outputs.size(); ++i) {
      auto what = [i] { return "output " + std::to_string(i); };
      KILN_RETURN_IF_ERROR(check_index(where, what, f.outputs[i], f.values.size(), false));
    }
    std::vector<char> defined(f.values.size(), 0);
    for (int v : f.inputs) defined[static_cast<size_t>(v)] = 1;
    for (size_t i = 0; i < f.values.size(); ++i) defined[i] |= f.values[i].weight >= 0 ? 1 : 0;
    for (const ir::Node& node : f.nodes) {
      KILN_RETURN_IF_ERROR(check_flow(function, f, node, defined));
    }
    for (size_t i = 0; i < f.outputs.size(); ++i) {
      if (!defined[static_cast<size_t>(f.outputs[i])]) {
        const int v = f.outputs[i];
        return fail(where(), "output " + std::to_string(i) + " is value " + std::to_string(v) +
                                 " '" + f.values[static_cast<size_t>(v)].name +
                                 "', which nothing writes (expected a function input, a weight "
                                 "or a node's output)");
      }
    }
    return Status();
  }

  const ir::Model& model_;
  Error code_;
  const std::string& action_;
};

}  // namespace

std::optional<uint64_t> weight_byte_count(runtime::ScalarType dtype,
                                          const std::vector<int64_t>& sizes) {
  uint64_t count = runtime::element_size(dtype);
  for (int64_t size : sizes) {
    if (size < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(size), &count)) {
      return std::nullopt;
    }
  }
  return count;
}

runtime::Status check_model(const ir::Model& model, runtime::Error code,
                            const std::string& action) {
  return ModelChecker(model, code, action).check();
}

}  // namespace kiln::engine::package
