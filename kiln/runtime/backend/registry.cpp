#include <kiln/runtime/backend/registry.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace kiln::runtime {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<BackendInterface>, std::less<>> backends;
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: used from static destructors
  return *instance;
}

}  // namespace

Status register_backend(std::string_view backend_id, std::shared_ptr<BackendInterface> backend) {
  if (backend_id.empty() || backend == nullptr) {
    return Status(Error::InvalidArgument,
                  "register backend '" + std::string(backend_id) +
                      "': empty id or null backend (expected a name and a backend)");
  }
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto [it, inserted] = r.backends.emplace(std::string(backend_id), std::move(backend));
  if (!inserted) {
    return Status(Error::InvalidArgument, "register backend '" + std::string(backend_id) +
                                              "': already registered (expected a new id)");
  }
  return Status();
}

bool unregister_backend(std::string_view backend_id) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.backends.find(backend_id);
  if (it == r.backends.end()) return false;
  r.backends.erase(it);
  return true;
}

std::shared_ptr<BackendInterface> get_backend(std::string_view backend_id) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.backends.find(backend_id);
  return it == r.backends.end() ? nullptr : it->second;
}

std::vector<std::string> registered_backends() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> ids;
  for (const auto& entry : r.backends) ids.push_back(entry.first);
  return ids;
}

BackendRegistration::BackendRegistration(std::string_view backend_id,
                                         std::shared_ptr<BackendInterface> backend) {
  (void)register_backend(backend_id, std::move(backend));
}

}  // namespace kiln::runtime
