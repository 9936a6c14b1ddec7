#include <kiln/backends/kiln/manifest.h>

#include <nlohmann/json.hpp>

#include <map>
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

// `field` names the value in messages; it defaults to `key` (entries pass "list[2].function").
Result<std::string> read_string(const json& root, const std::string& key, std::string field = {}) {
  if (field.empty()) field = key;
  auto it = root.find(key);
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

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t dim : shape) out += (out.empty() ? "" : ", ") + std::to_string(dim);
  return "[" + out + "]";
}

std::string shapes_text(const Shapes& shapes) {
  std::string out;
  for (const auto& shape : shapes) out += (out.empty() ? "" : ", ") + shape_text(shape);
  return "[" + out + "]";
}

// One dim of an enumerated shape: an integer in 1..kMaxManifestDim. JSON numbers arrive as
// signed, unsigned or floating values; 64.0 and 1e3 are floats and rejected as non-integers.
Result<int64_t> read_dim(const json& value, const std::string& field) {
  std::string expected = " (expected an integer in 1.." + std::to_string(kMaxManifestDim) + ")";
  if (value.is_number_unsigned()) {
    auto dim = value.get<uint64_t>();
    if (dim == 0) return field_error(field, "is 0" + expected);
    if (dim > static_cast<uint64_t>(kMaxManifestDim)) {
      return field_error(field, "is " + std::to_string(dim) + ", too large" + expected);
    }
    return static_cast<int64_t>(dim);
  }
  if (value.is_number_integer()) {
    return field_error(field, "is " + std::to_string(value.get<int64_t>()) + expected);
  }
  if (value.is_number_float()) {
    return field_error(field, "is " + value.dump() + ", not an integer" + expected);
  }
  return field_error(field, "is a " + type_of(value) + expected);
}

Result<Shapes> read_shapes(const json& entry, const std::string& entry_field, size_t num_inputs) {
  std::string field = entry_field + ".input_shapes";
  std::string expected =
      "(expected an array of " + std::to_string(num_inputs) + " shapes, one per input_names item)";
  auto it = entry.find("input_shapes");
  if (it == entry.end()) return field_error(field, "is missing " + expected);
  if (!it->is_array()) return field_error(field, "is a " + type_of(*it) + " " + expected);
  if (it->size() != num_inputs) {
    return field_error(field, "has " + std::to_string(it->size()) + " shapes " + expected);
  }
  Shapes shapes;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& shape = (*it)[i];
    std::string shape_field = field + "[" + std::to_string(i) + "]";
    if (!shape.is_array()) {
      return field_error(shape_field, "is a " + type_of(shape) + " (expected an array of dims)");
    }
    std::vector<int64_t> dims;
    for (size_t d = 0; d < shape.size(); ++d) {
      KILN_ASSIGN_OR_RETURN(int64_t dim,
                            read_dim(shape[d], shape_field + "[" + std::to_string(d) + "]"));
      dims.push_back(dim);
    }
    shapes.push_back(std::move(dims));
  }
  return shapes;
}

Result<EnumeratedFunction> read_entry(const json& entry, const std::string& field,
                                      size_t num_inputs) {
  if (!entry.is_object()) {
    return field_error(
        field, "is a " + type_of(entry) + " (expected an object with function and input_shapes)");
  }
  for (const auto& [key, value] : entry.items()) {
    if (key != "function" && key != "input_shapes") {
      return field_error(field + "." + key, "is unknown (expected function, input_shapes)");
    }
  }
  EnumeratedFunction function;
  KILN_ASSIGN_OR_RETURN(function.function, read_string(entry, "function", field + ".function"));
  KILN_ASSIGN_OR_RETURN(function.input_shapes, read_shapes(entry, field, num_inputs));
  return function;
}

// The enumerated form: `enumerated` must be `true`, the list non-empty, names and shapes unique.
Status read_enumerated(const json& root, Manifest& manifest) {
  auto flag = root.find("enumerated");
  if (flag == root.end()) {
    return field_error("enumerated", "is missing (expected true with 'enumerated_functions')");
  }
  if (!flag->is_boolean() || !flag->get<bool>()) {
    return field_error("enumerated", "is " + flag->dump() + " (expected true)");
  }
  const json& list = root.at("enumerated_functions");
  if (!list.is_array()) {
    return field_error("enumerated_functions",
                       "is a " + type_of(list) + " (expected an array of functions)");
  }
  if (list.empty()) {
    return field_error("enumerated_functions", "is empty (expected at least one function)");
  }
  std::map<std::string, size_t> names;
  std::map<Shapes, size_t> shapes;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string field = "enumerated_functions[" + std::to_string(i) + "]";
    KILN_ASSIGN_OR_RETURN(EnumeratedFunction function,
                          read_entry(list[i], field, manifest.input_names.size()));
    auto name = names.emplace(function.function, i);
    if (!name.second) {
      return field_error(field + ".function", "repeats '" + function.function + "' of item " +
                                                  std::to_string(name.first->second) +
                                                  " (expected unique functions)");
    }
    auto shape = shapes.emplace(function.input_shapes, i);
    if (!shape.second) {
      return field_error(field + ".input_shapes", "is " + shapes_text(function.input_shapes) +
                                                      ", equal to that of item " +
                                                      std::to_string(shape.first->second) +
                                                      " (expected distinct shapes per function)");
    }
    manifest.enumerated_functions.push_back(std::move(function));
  }
  manifest.enumerated = true;
  return Status();
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
  bool has_list = root.contains("enumerated_functions");
  if (has_function && (has_list || root.contains("enumerated"))) {
    return field_error(has_list ? "enumerated_functions" : "enumerated",
                       "is given with 'function' (expected exactly one of 'function' and "
                       "'enumerated_functions')");
  }
  if (!has_function && !has_list) {
    return field_error(root.contains("enumerated") ? "enumerated_functions" : "function",
                       "is missing (expected exactly one of 'function' and "
                       "'enumerated_functions')");
  }
  if (has_list) {
    KILN_RETURN_IF_ERROR(read_enumerated(root, manifest));
    return manifest;
  }
  KILN_ASSIGN_OR_RETURN(manifest.function, read_string(root, "function"));
  return manifest;
}

}  // namespace kiln::backends
