#pragma once

#include <kiln/runtime/core/status.h>

#include <cassert>
#include <optional>
#include <type_traits>
#include <utility>

namespace kiln::runtime {

/// Either a value of type `T` or a non-ok `Status`. Access the value only after `ok()`;
/// doing otherwise is a programming error caught by an assertion in debug builds.
template <typename T>
class [[nodiscard]] Result {
 public:
  /// A result holding `value`.
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  /// A failed result. `status` must not be ok; an ok status becomes `Error::Internal`.
  Result(Status status)  // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? Status(Error::Internal, "Result built from an ok Status")
                            : std::move(status)) {}
  Result(Error code, std::string message) : Result(Status(code, std::move(message))) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  Error error() const { return status_.code(); }

  T& get() & {
    assert(ok());
    return *value_;
  }
  const T& get() const& {
    assert(ok());
    return *value_;
  }
  T&& get() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return get(); }
  const T& operator*() const& { return get(); }
  T&& operator*() && { return std::move(*this).get(); }
  T* operator->() { return &get(); }
  const T* operator->() const { return &get(); }

 private:
  std::optional<T> value_;
  Status status_;
};

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

/// `KILN_ASSIGN_OR_RETURN(auto x, make_x());` declares `x` from a Result or returns its Status.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).get()

}  // namespace kiln::runtime
