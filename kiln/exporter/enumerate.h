#pragma once

#include <kiln/engine/ir/graph.h>
#include <kiln/runtime/core/result.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

/// Enumerated input shapes (`kiln export --enumerate METHOD:INPUT:DIM=V1,V2,...`, DESIGN.md §8):
/// a function with symbolic input dims expands into one static function per combination of the
/// listed values, which KilnBackend dispatches to by the inputs' shapes.
namespace kiln::exporter {

/// One `--enumerate` flag: input `input` of method `method`, dimension index `dim`, `values`.
struct DimEnumeration {
  std::string method;
  std::string input;
  int dim = 0;
  std::vector<int64_t> values;
};

/// Parses "METHOD:INPUT:DIM=V1,V2,...". Errors: InvalidArgument naming the flag and the part
/// that is wrong (missing parts, a DIM or value that is not a non-negative/positive integer,
/// an empty or duplicated value).
runtime::Result<DimEnumeration> parse_enumeration(const std::string& text);

/// One static function of an enumerated method.
struct EnumeratedFunction {
  std::string name;                                ///< `<method>_<partition>_<symbol>_<value>...`
  std::map<std::string, int64_t> bindings;         ///< symbol → value
  std::vector<std::string> symbols;                ///< the enumerated symbols, in flag order
  std::vector<std::vector<int64_t>> input_shapes;  ///< every input's shape, in input order
};

/// The functions `graph` expands into for the flags of `method`, partition `partition`: flags
/// naming the same symbolic dim are one axis (their value lists must agree), different dims
/// combine as a cartesian product, in flag order. Errors: InvalidArgument naming the flag for
/// an input `graph` lacks, a dim index out of range, a static dim, a dim that is not a plain
/// symbol, disagreeing lists for one symbol, an input dim left symbolic by the flags, or a
/// value that makes any dim of any value zero or negative (naming the input, the dimension,
/// the value and the derived dim).
runtime::Result<std::vector<EnumeratedFunction>> enumerate_function(
    const engine::ir::Graph& graph, const std::string& method, int partition,
    const std::vector<DimEnumeration>& flags);

/// `symbol` as it appears in function names: characters other than letters and digits → '_'.
std::string sanitized_symbol(const std::string& symbol);

/// `graph` with its inputs' shapes made static per `function` (renamed to its name).
engine::ir::Graph static_function(const engine::ir::Graph& graph,
                                  const EnumeratedFunction& function);

}  // namespace kiln::exporter
