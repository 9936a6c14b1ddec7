#include <kiln/runtime/executor/kernel_registry.h>

#include <map>
#include <mutex>

namespace kiln::runtime {

const EValue* Attributes::find(std::string_view name) const {
  for (const auto& entry : entries_) {
    if (entry.first == name) return &entry.second;
  }
  return nullptr;
}

namespace {

Status wrong_type(std::string_view name, const EValue& value, std::string_view expected) {
  return Status(Error::InvalidType, "read attribute '" + std::string(name) + "': it is " +
                                        std::string(to_string(value.tag())) + " (expected " +
                                        std::string(expected) + ")");
}

}  // namespace

Result<int64_t> Attributes::get_int(std::string_view name, int64_t fallback) const {
  const EValue* value = find(name);
  if (value == nullptr) return fallback;
  if (value->is_int()) return value->to_int();
  if (value->is_bool()) return static_cast<int64_t>(value->to_bool());
  return wrong_type(name, *value, "int");
}

Result<double> Attributes::get_double(std::string_view name, double fallback) const {
  const EValue* value = find(name);
  if (value == nullptr) return fallback;
  if (value->is_double()) return value->to_double();
  if (value->is_int()) return static_cast<double>(value->to_int());
  return wrong_type(name, *value, "double");
}

Result<std::string> Attributes::get_string(std::string_view name, std::string fallback) const {
  const EValue* value = find(name);
  if (value == nullptr) return fallback;
  if (value->is_string()) return value->to_string();
  return wrong_type(name, *value, "string");
}

Result<std::vector<int64_t>> Attributes::get_ints(std::string_view name,
                                                  std::vector<int64_t> fallback) const {
  const EValue* value = find(name);
  if (value == nullptr) return fallback;
  if (value->is_int_list()) return value->to_int_list();
  return wrong_type(name, *value, "int list");
}

Result<std::vector<double>> Attributes::get_doubles(std::string_view name,
                                                    std::vector<double> fallback) const {
  const EValue* value = find(name);
  if (value == nullptr) return fallback;
  if (value->is_double_list()) return value->to_double_list();
  if (value->is_int_list()) {
    const auto& ints = value->to_int_list();
    return std::vector<double>(ints.begin(), ints.end());
  }
  return wrong_type(name, *value, "double list");
}

namespace {

struct KernelTable {
  std::mutex mutex;
  std::map<std::string, KernelFunction, std::less<>> kernels;
};

KernelTable& table() {
  static KernelTable* instance = new KernelTable();  // never destroyed
  return *instance;
}

}  // namespace

Status register_kernel(std::string_view op, KernelFunction function) {
  if (op.empty() || function == nullptr) {
    return Status(Error::InvalidArgument, "register kernel '" + std::string(op) +
                                              "': empty op or null function");
  }
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (!t.kernels.emplace(std::string(op), function).second) {
    return Status(Error::InvalidArgument,
                  "register kernel '" + std::string(op) + "': already registered");
  }
  return Status();
}

KernelFunction get_kernel(std::string_view op) {
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.kernels.find(op);
  return it == t.kernels.end() ? nullptr : it->second;
}

std::vector<std::string> registered_kernels() {
  auto& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<std::string> ops;
  for (const auto& entry : t.kernels) ops.push_back(entry.first);
  return ops;
}

KernelRegistration::KernelRegistration(std::string_view op, KernelFunction function) {
  (void)register_kernel(op, function);
}

}  // namespace kiln::runtime
