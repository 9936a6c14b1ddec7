#include <kiln/runtime/backend/options.h>

namespace kiln::runtime {

std::string_view option_type_name(const BackendOption& option) {
  switch (option.value.index()) {
    case 0: return "bool";
    case 1: return "int";
    default: return "string";
  }
}

std::string option_value_string(const BackendOption& option) {
  if (const bool* b = std::get_if<bool>(&option.value)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&option.value)) return std::to_string(*i);
  return "\"" + std::get<std::string>(option.value) + "\"";
}

}  // namespace kiln::runtime
