#pragma once

#include <kiln/runtime/backend/options.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::runtime {

/// Load-time options for several backends: backend id → its options. Given to
/// `Module::load`, `Module::load_method` or `Program::load_method`; each delegate's `init` sees
/// only the options registered under its own backend id.
///
/// Ownership: the map copies every key, backend id and string value it is given, so the
/// caller's BackendOptions (and any strings) may be destroyed right after `set_options`.
/// A map may be reused for several loads and modules; loads copy what they need.
///
/// Precedence (applied by Module and Program): a map given to `load_method` (or
/// `load(method, map)`) applies to that method; otherwise the map given to `load(map)`
/// applies; otherwise none. Options a map does not set take the backend's defaults. Maps are
/// not merged: the more specific map replaces the other for the method it is given to.
///
/// Thread-safety: not synchronized; do not modify a map while a load reads it.
class LoadBackendOptionsMap {
 public:
  /// Sets (or replaces) the options of `backend_id` with copies of `options`. Errors:
  /// InvalidArgument for an empty backend id or a key set twice in `options`.
  Status set_options(std::string_view backend_id, Span<const BackendOption> options);

  /// Typed builders (e.g. `KilnBackendOptions`) that expose `backend_id()` and `view()`.
  template <typename Builder>
    requires requires(const Builder& b) {
      { b.backend_id() } -> std::convertible_to<std::string_view>;
      { b.view() } -> std::convertible_to<Span<const BackendOption>>;
    }
  Status set_options(const Builder& builder) {
    return set_options(builder.backend_id(), builder.view());
  }

  /// The options for `backend_id`; empty when none were set.
  Span<const BackendOption> get_options(std::string_view backend_id) const;
  bool has_options(std::string_view backend_id) const;
  /// Backend ids with options, in the order they were first set.
  std::vector<std::string> backend_ids() const;
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  /// Removes `backend_id`'s options; true when there were some.
  bool erase(std::string_view backend_id);

 private:
  std::vector<std::pair<std::string, std::vector<BackendOption>>> entries_;
};

}  // namespace kiln::runtime
