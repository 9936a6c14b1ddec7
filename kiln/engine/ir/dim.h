#pragma once

#include <kiln/runtime/core/result.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kiln::engine::ir {

/// One dimension of a shape: a concrete size, a named symbol ("seq"), or an expression derived
/// from symbols ("seq - 1", "past_len + 1", "W / 8"). Expressions are kept simplified: constants
/// folded and linear terms combined, so equal dims compare equal. A value type.
class Dim {
 public:
  /// A concrete size.
  Dim(int64_t value = 0);  // NOLINT(google-explicit-constructor)
  /// A named symbol; an empty name is an anonymous unknown ("?"), distinct from every other.
  static Dim symbol(const std::string& name);

  bool is_static() const;
  /// The concrete size; only when `is_static()`.
  int64_t value() const;
  /// "8", "seq", "seq - 1", "W / 8".
  std::string to_string() const;

  /// Substitutes symbols from `bindings` and evaluates. Errors: InvalidArgument naming a symbol
  /// without a binding, or a division by zero.
  runtime::Result<int64_t> evaluate(const std::map<std::string, int64_t>& bindings) const;

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  /// Floor division.
  friend Dim operator/(const Dim& a, const Dim& b);
  friend bool operator==(const Dim& a, const Dim& b);
  friend bool operator!=(const Dim& a, const Dim& b) { return !(a == b); }

  struct Node;
  /// Internal: wraps an expression node.
  explicit Dim(std::shared_ptr<const Node> node) : node_(std::move(node)) {}

 private:
  std::shared_ptr<const Node> node_;
};

}  // namespace kiln::engine::ir
