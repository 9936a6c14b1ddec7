#include <kiln/runtime/core/status.h>

#include <cstdio>

namespace kiln::runtime {

std::string Status::to_string() const {
  if (ok()) return "Ok";
  char code[16];
  std::snprintf(code, sizeof(code), "0x%02x", static_cast<unsigned>(code_));
  std::string out(runtime::to_string(code_));
  out += " (";
  out += code;
  out += "): ";
  out += message_;
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return Status(code_, std::move(message));
}

std::ostream& operator<<(std::ostream& os, const Status& status) {
  return os << status.to_string();
}

}  // namespace kiln::runtime
