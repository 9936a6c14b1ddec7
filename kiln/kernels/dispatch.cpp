#include <kiln/kernels/dispatch.h>

#include <kiln/kernels/adapter.h>

#include <algorithm>
#include <string>

namespace kiln::kernels {

using runtime::Error;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;

Status check_dtype(std::string_view op, std::string_view subject, ScalarType dtype,
                   Span<const ScalarType> accepted) {
  if (std::find(accepted.begin(), accepted.end(), dtype) != accepted.end()) return Status();
  std::string expected;
  for (size_t i = 0; i < accepted.size(); ++i) {
    if (i > 0) expected += i + 1 == accepted.size() ? " or " : ", ";
    expected += runtime::to_string(accepted[i]);
  }
  return Status(Error::InvalidType, internal::action(op) + ": " + std::string(subject) +
                                        " has dtype " + std::string(runtime::to_string(dtype)) +
                                        " (expected " + expected + ")");
}

}  // namespace kiln::kernels
