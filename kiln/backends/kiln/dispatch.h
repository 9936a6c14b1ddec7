#pragma once

#include <kiln/backends/kiln/manifest.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::backends {

/// What a delegate's arguments must be, fixed at init: their names (for messages), the inputs'
/// dtypes and ranks and the outputs' dtypes, in the delegate call's order.
struct ArgumentTypes {
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  std::vector<runtime::ScalarType> input_dtypes;
  /// Empty optional: any rank (the IR does not know it, or enumerated functions disagree).
  std::vector<std::optional<size_t>> input_ranks;
  std::vector<runtime::ScalarType> output_dtypes;
};

/// One call's checked arguments. Reused across calls (the vectors keep their capacity).
struct CallArguments {
  Shapes shapes;
  std::vector<const runtime::Tensor*> inputs;
  std::vector<runtime::Tensor*> outputs;
};

/// Checks a call's arguments against `types` (count, tensor-ness, dtype, rank) and fills `call`
/// with the input shapes and the tensors. `subject` starts every message ("execute function
/// 'main'"). Errors: InvalidArgument naming the argument, its value and the expected one.
runtime::Status check_arguments(const std::string& subject, const ArgumentTypes& types,
                                runtime::Span<runtime::EValue* const> inputs,
                                runtime::Span<runtime::EValue* const> outputs, CallArguments& call);

/// "([1, 64], [1, 64])": one call's input shapes.
std::string shapes_to_string(const Shapes& shapes);

/// A delegate's bound sessions, found by the call's input shapes with one map lookup.
///
/// A closed table accepts only the shapes added at init (a static function, or the functions of
/// an enumerated manifest); an open one (a function with symbolic inputs) accepts any shapes and
/// has sessions added as new shapes arrive, keeping those of the `open_capacity` shapes used
/// most recently (a session dropped is bound again when its shapes come back; the engine keeps
/// what it built for them, see `engine::LoadedModel::bind`), so that a delegate fed ever new
/// shapes holds a bounded number of sessions and plans. Not thread-safe: the delegate's lock
/// guards it.
class SessionTable {
 public:
  /// A function bound to one set of input shapes.
  struct Entry {
    std::string function;
    engine::Session session;
    uint64_t last_used = 0;  // the table's clock at its last add or find
  };

  explicit SessionTable(bool closed = true, size_t open_capacity = engine::kShapePlansKept)
      : closed_(closed), open_capacity_(open_capacity < 1 ? 1 : open_capacity) {}

  bool closed() const { return closed_; }
  /// Adds `function` bound to `shapes`; for a closed table, also to `accepted()`. The shapes
  /// must not be in the table yet (the manifest's are distinct). An open table at capacity
  /// first drops its least recently used entry. The reference is valid until the next `add`.
  Entry& add(const Shapes& shapes, std::string function, engine::Session session);
  /// The entry bound to `shapes`, or null.
  Entry* find(const Shapes& shapes);
  /// How many entries the table holds.
  size_t size() const { return entries_.size(); }
  /// The input shapes a closed table accepts, in the order added (the manifest's order); empty
  /// for an open table (any shapes).
  const std::vector<Shapes>& accepted() const { return accepted_; }
  /// InvalidArgument for a call whose `shapes` no entry accepts: names the shapes received and
  /// those accepted (with their functions when there are several).
  runtime::Status no_match(const std::string& subject, const Shapes& shapes) const;

 private:
  bool closed_;
  size_t open_capacity_;
  uint64_t clock_ = 0;
  std::map<Shapes, Entry> entries_;
  std::vector<Shapes> accepted_;
};

}  // namespace kiln::backends
