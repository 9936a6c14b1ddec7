#pragma once

#include <kiln/runtime/core/result.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

  /// One term of the canonical form (see `terms()`).
  struct Term;
  /// The constant part of the canonical form `constant() + sum(coefficient * atom)`.
  int64_t constant() const;
  /// The terms of the canonical form, ordered by key. Rebuilding `Dim(constant())` plus each
  /// term's `coefficient * atom` gives back an equal Dim. For serialization (model packages).
  std::vector<Term> terms() const;

  struct Node;
  /// Internal: wraps an expression node.
  explicit Dim(std::shared_ptr<const Node> node) : node_(std::move(node)) {}

 private:
  std::shared_ptr<const Node> node_;
};

/// A term `coefficient * atom` of a Dim's canonical form. The atom is a named symbol
/// (`op == 0`, `key` its name), an anonymous unknown (`op == 0`, `key` "?" then a number that
/// identifies it within this process), or a product or quotient (`op` '*' or '/') of `left` and
/// `right` that could not be simplified (then `key` is derived from them).
struct Dim::Term {
  int64_t coefficient = 1;
  std::string key;
  char op = 0;
  Dim left, right;

  bool is_anonymous() const { return op == 0 && !key.empty() && key[0] == '?'; }
};

}  // namespace kiln::engine::ir
