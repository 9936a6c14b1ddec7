#pragma once

#include <kiln/runtime/core/error.h>

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::runtime {

/// The outcome of an operation: an `Error` code and, when it failed, a message that names the
/// culprit, what it was and what was expected. `Status` is cheap to return when ok (no
/// allocation). Thread-safety: a value type; distinct objects may be used from any thread.
class [[nodiscard]] Status {
 public:
  /// An ok status.
  Status() = default;
  /// A status with `code`; `message` is copied. An `Error::Ok` code ignores the message.
  Status(Error code, std::string message)
      : code_(code), message_(code == Error::Ok ? std::string() : std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == Error::Ok; }
  Error code() const { return code_; }
  const std::string& message() const { return message_; }

  /// "InvalidArgument (0x10): <message>", or "Ok".
  std::string to_string() const;

  /// Prefixes the message with `context` and ": ", keeping the code; used to add the outer
  /// action ("load method 'forward'") as an error travels up.
  Status with_context(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  Error code_ = Error::Ok;
  std::string message_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);

/// Returns early from the enclosing function when `expr` (a Status) is not ok.
#define KILN_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::kiln::runtime::Status kiln_status_ = (expr);  \
    if (!kiln_status_.ok()) return kiln_status_;    \
  } while (false)

}  // namespace kiln::runtime
