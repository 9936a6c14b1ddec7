#include <kiln/exporter/enumerate.h>

#include <algorithm>
#include <set>

namespace kiln::exporter {

namespace ir = engine::ir;
using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

Status bad_flag(const std::string& text, const std::string& problem) {
  return Status(Error::InvalidArgument,
                "--enumerate '" + text + "': " + problem +
                    " (expected METHOD:INPUT:DIM=V1,V2,... with DIM a dimension index and each V "
                    "a positive integer)");
}

Result<int64_t> parse_int(const std::string& text, const std::string& part,
                          const std::string& flag) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return bad_flag(flag, part + " '" + text + "' is not a non-negative integer");
  }
  return std::stoll(text);
}

// The symbol's name when `dim` is a plain symbol ("seq"), else empty.
std::string symbol_name(const ir::Dim& dim) {
  if (dim.is_static() || dim.constant() != 0) return "";
  const std::vector<ir::Dim::Term> terms = dim.terms();
  if (terms.size() != 1) return "";
  const ir::Dim::Term& term = terms[0];
  if (term.coefficient != 1 || term.op != 0 || term.is_anonymous()) return "";
  return term.key;
}

}  // namespace

std::string sanitized_symbol(const std::string& symbol) {
  std::string out;
  for (char c : symbol) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

Result<DimEnumeration> parse_enumeration(const std::string& text) {
  size_t first = text.find(':');
  size_t second = first == std::string::npos ? first : text.find(':', first + 1);
  size_t equals = second == std::string::npos ? second : text.find('=', second + 1);
  if (equals == std::string::npos || first == 0 || second == first + 1) {
    return bad_flag(text, "missing METHOD, INPUT, DIM or '='");
  }
  DimEnumeration e;
  e.method = text.substr(0, first);
  e.input = text.substr(first + 1, second - first - 1);
  KILN_ASSIGN_OR_RETURN(int64_t dim,
                        parse_int(text.substr(second + 1, equals - second - 1), "DIM", text));
  e.dim = static_cast<int>(dim);
  std::string list = text.substr(equals + 1);
  std::set<int64_t> seen;
  size_t at = 0;
  while (true) {
    size_t comma = list.find(',', at);
    std::string item = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    KILN_ASSIGN_OR_RETURN(int64_t value, parse_int(item, "value", text));
    if (value <= 0) return bad_flag(text, "value " + item + " is not positive");
    if (value > int64_t{2147483647}) {
      return bad_flag(text, "value " + item + " is above 2147483647, the largest dimension");
    }
    if (!seen.insert(value).second) return bad_flag(text, "value " + item + " is listed twice");
    e.values.push_back(value);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return e;
}

Result<std::vector<EnumeratedFunction>> enumerate_function(
    const ir::Graph& graph, const std::string& method, int partition,
    const std::vector<DimEnumeration>& flags) {
  // Axes: one per symbol, in flag order.
  struct Axis {
    std::string symbol;
    std::vector<int64_t> values;
    std::string flag;  // input:dim, for messages
  };
  std::vector<Axis> axes;
  for (const DimEnumeration& e : flags) {
    if (e.method != method) continue;
    std::string flag = "--enumerate " + e.method + ":" + e.input + ":" + std::to_string(e.dim);
    int index = graph.find_value(e.input);
    bool is_input = false;
    for (int input : graph.inputs) is_input = is_input || input == index;
    if (!is_input) {
      return Status(Error::InvalidArgument,
                    flag + ": method '" + method + "' has no input '" + e.input + "'");
    }
    const ir::Value& v = graph.values[static_cast<size_t>(index)];
    if (e.dim < 0 || static_cast<size_t>(e.dim) >= v.type.shape.size()) {
      return Status(Error::InvalidArgument, flag + ": input '" + e.input + "' has rank " +
                                                std::to_string(v.type.shape.size()) +
                                                " (expected DIM below it)");
    }
    const ir::Dim& dim = v.type.shape[static_cast<size_t>(e.dim)];
    std::string symbol = symbol_name(dim);
    if (symbol.empty()) {
      return Status(Error::InvalidArgument,
                    flag + ": dimension " + std::to_string(e.dim) + " of input '" + e.input +
                        "' is '" + dim.to_string() +
                        "' (expected a symbolic dimension named by one symbol)");
    }
    auto same =
        std::find_if(axes.begin(), axes.end(), [&](const Axis& a) { return a.symbol == symbol; });
    if (same != axes.end()) {
      if (same->values != e.values) {
        return Status(Error::InvalidArgument,
                      flag + " lists other values for symbol '" + symbol + "' than " + same->flag +
                          " (expected the same list for one symbolic dimension)");
      }
      continue;
    }
    axes.push_back(Axis{symbol, e.values, flag});
  }
  // Every input dim must become static.
  std::set<std::string> bound;
  for (const Axis& a : axes) bound.insert(a.symbol);
  for (int input : graph.inputs) {
    const ir::Value& v = graph.values[static_cast<size_t>(input)];
    for (size_t d = 0; d < v.type.shape.size(); ++d) {
      const ir::Dim& dim = v.type.shape[d];
      if (dim.is_static()) continue;
      std::string symbol = symbol_name(dim);
      if (symbol.empty() || bound.count(symbol) == 0) {
        return Status(Error::InvalidArgument,
                      "--enumerate for method '" + method + "': dimension " + std::to_string(d) +
                          " of input '" + v.name + "' is '" + dim.to_string() +
                          "' and no --enumerate flag lists its values (expected every symbolic "
                          "input dimension enumerated)");
      }
    }
  }
  // The cartesian product, the last axis fastest.
  std::vector<EnumeratedFunction> functions;
  std::vector<size_t> at(axes.size(), 0);
  while (true) {
    EnumeratedFunction f;
    f.name = method + "_" + std::to_string(partition);
    for (size_t a = 0; a < axes.size(); ++a) {
      int64_t value = axes[a].values[at[a]];
      f.bindings[axes[a].symbol] = value;
      f.symbols.push_back(axes[a].symbol);
      f.name += "_" + sanitized_symbol(axes[a].symbol) + "_" + std::to_string(value);
    }
    for (int input : graph.inputs) {
      std::vector<int64_t> shape;
      for (const ir::Dim& dim : graph.values[static_cast<size_t>(input)].type.shape) {
        KILN_ASSIGN_OR_RETURN(int64_t size, dim.evaluate(f.bindings));
        shape.push_back(size);
      }
      f.input_shapes.push_back(std::move(shape));
    }
    // No derived dim may be zero or negative (e.g. `seq - 1` at seq = 1).
    for (const ir::Value& v : graph.values) {
      if (v.weight >= 0) continue;
      for (const ir::Dim& dim : v.type.shape) {
        if (dim.is_static()) continue;
        auto size = dim.evaluate(f.bindings);
        if (!size.ok() || *size > 0) continue;
        std::string where;
        for (size_t a = 0; a < axes.size(); ++a) {
          where += (where.empty() ? "" : ", ") + axes[a].flag + " value " +
                   std::to_string(axes[a].values[at[a]]) + " (" + axes[a].symbol + ")";
        }
        return Status(Error::InvalidArgument,
                      where + " makes dimension '" + dim.to_string() + "' of value '" + v.name +
                          "' " + std::to_string(*size) + " (expected every dimension > 0)");
      }
    }
    functions.push_back(std::move(f));
    size_t a = axes.size();
    while (a > 0 && ++at[a - 1] == axes[a - 1].values.size()) at[--a] = 0;
    if (a == 0) break;
  }
  return functions;
}

ir::Graph static_function(const ir::Graph& graph, const EnumeratedFunction& function) {
  ir::Graph out = graph;
  out.name = function.name;
  for (size_t i = 0; i < out.inputs.size(); ++i) {
    ir::Value& v = out.values[static_cast<size_t>(out.inputs[i])];
    v.type.shape.assign(function.input_shapes[i].begin(), function.input_shapes[i].end());
  }
  return out;
}

}  // namespace kiln::exporter
