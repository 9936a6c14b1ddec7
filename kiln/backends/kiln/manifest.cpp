#include <kiln/backends/kiln/manifest.h>

#include <nlohmann/json.hpp>

#include <set>

namespace kiln::backends {

using json = nlohmann::json;
using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

const std::set<std::string>& known_fields() {
  static const std::set<std::string> fields = {"package",  "input_names", "output_names",
                                               "function", "enumerated",  "enumerated_functions"};
  return fields;
}

Status field_error(const std::string& field, const std::string& problem) {
  return Status(Error::InvalidArgument, "parse manifest: field '" + field + "' " + problem);
}

std::string type_of(const json& value) { return value.type_name(); }

Result<std::string> read_string(const json& root, const std::string& field) {
  auto it = root.find(field);
  if (it == root.end()) return field_error(field, "is missing (expected a string)");
  if (!it->is_string()) {
    return field_error(field, "is a " + type_of(*it) + " (expected a string)");
  }
  std::string value = it->get<std::string>();
  if (value.empty()) return field_error(field, "is empty (expected a non-empty string)");
  return value;
}

Result<std::vector<std::string>> read_names(const json& root, const std::string& field) {
  auto it = root.find(field);
  if (it == root.end()) return field_error(field, "is missing (expected an array of strings)");
  if (!it->is_array()) {
    return field_error(field, "is a " + type_of(*it) + " (expected an array of strings)");
  }
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& item = (*it)[i];
    std::string where = "item " + std::to_string(i);
    if (!item.is_string()) {
      return field_error(field, where + " is a " + type_of(item) + " (expected a string)");
    }
    std::string name = item.get<std::string>();
    if (name.empty()) return field_error(field, where + " is empty (expected a name)");
    if (!seen.insert(name).second) {
      return field_error(field, where + " repeats the name '" + name + "' (expected unique names)");
    }
    names.push_back(std::move(name));
  }
  return names;
}

}  // namespace

Result<Manifest> parse_manifest(runtime::Span<const uint8_t> bytes) {
  json root = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Status(Error::InvalidArgument,
                  "parse manifest: the " + std::to_string(bytes.size()) +
                      " processed bytes are not JSON (expected a JSON object)");
  }
  if (!root.is_object()) {
    return Status(Error::InvalidArgument,
                  "parse manifest: it is a " + type_of(root) + " (expected a JSON object)");
  }
  for (const auto& [key, value] : root.items()) {
    if (known_fields().count(key) == 0) {
      return field_error(key,
                         "is unknown (expected package, input_names, output_names, "
                         "function, enumerated, enumerated_functions)");
    }
  }
  Manifest manifest;
  KILN_ASSIGN_OR_RETURN(manifest.package, read_string(root, "package"));
  KILN_ASSIGN_OR_RETURN(manifest.input_names, read_names(root, "input_names"));
  KILN_ASSIGN_OR_RETURN(manifest.output_names, read_names(root, "output_names"));
  bool has_function = root.contains("function");
  bool has_enumerated = root.contains("enumerated") || root.contains("enumerated_functions");
  if (has_function && has_enumerated) {
    return field_error(root.contains("enumerated") ? "enumerated" : "enumerated_functions",
                       "is given with 'function' (expected exactly one of 'function' and "
                       "'enumerated')");
  }
  if (!has_function && !has_enumerated) {
    return field_error("function", "is missing, and so is 'enumerated' (expected exactly one)");
  }
  if (has_enumerated) {
    // The enumerated form (one static function per listed shape set) comes with shape
    // dispatch; until then say so rather than misreading it.
    return Status(Error::NotSupported,
                  "parse manifest: field 'enumerated' is not supported yet (expected "
                  "'function': this build runs one function per delegate)");
  }
  KILN_ASSIGN_OR_RETURN(manifest.function, read_string(root, "function"));
  return manifest;
}

}  // namespace kiln::backends
