#include <tools/kiln/option_args.h>

#include <charconv>

namespace kiln::tools {

using runtime::BackendOption;
using runtime::Error;
using runtime::LoadBackendOptionsMap;
using runtime::Result;
using runtime::Status;

namespace {

std::variant<bool, int64_t, std::string> typed_value(std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (!text.empty() && text.front() == '+') ++begin;  // from_chars rejects a leading '+'
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (begin != end && ec == std::errc() && ptr == end) return value;
  return std::string(text);
}

}  // namespace

Result<OptionArg> parse_option_arg(std::string_view text) {
  const auto fail = [&](const std::string& problem) {
    return Status(Error::InvalidArgument, "parse --option '" + std::string(text) + "': " + problem +
                                              " (expected BACKEND.KEY=VALUE, e.g. " +
                                              "KilnBackend.compute_unit=cpu_only)");
  };
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) return fail("has no '='");
  const std::string_view lhs = text.substr(0, eq);
  const size_t dot = lhs.find('.');
  if (dot == std::string_view::npos) return fail("has no '.' between backend and key");
  if (dot == 0) return fail("backend id is empty");
  if (dot + 1 == lhs.size()) return fail("key is empty");
  OptionArg arg;
  arg.backend_id = std::string(lhs.substr(0, dot));
  arg.option.key = std::string(lhs.substr(dot + 1));
  arg.option.value = typed_value(text.substr(eq + 1));
  return arg;
}

Result<LoadBackendOptionsMap> parse_option_args(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::vector<BackendOption>>> grouped;
  for (const auto& text : args) {
    KILN_ASSIGN_OR_RETURN(OptionArg arg, parse_option_arg(text));
    auto it = grouped.begin();
    while (it != grouped.end() && it->first != arg.backend_id) ++it;
    if (it == grouped.end()) it = grouped.insert(grouped.end(), {arg.backend_id, {}});
    for (const auto& existing : it->second) {
      if (existing.key == arg.option.key) {
        return Status(Error::InvalidArgument,
                      "parse --option '" + text + "': key '" + arg.option.key + "' of backend '" +
                          arg.backend_id + "' is already set to " +
                          runtime::option_value_string(existing) + " (expected each key once)");
      }
    }
    it->second.push_back(std::move(arg.option));
  }
  LoadBackendOptionsMap map;
  for (const auto& [backend_id, options] : grouped) {
    KILN_RETURN_IF_ERROR(map.set_options(backend_id, options));
  }
  return map;
}

Result<std::pair<std::string, std::string>> parse_name_value(std::string_view text,
                                                             std::string_view flag) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    return Status(Error::InvalidArgument, "parse " + std::string(flag) + " '" + std::string(text) +
                                              "': not of the form NAME=FILE (expected e.g. "
                                              "x=input.npy)");
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

}  // namespace kiln::tools
