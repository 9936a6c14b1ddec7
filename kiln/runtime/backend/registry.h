#pragma once

#include <kiln/runtime/backend/interface.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// Registers `backend` under `backend_id` for the whole process. Errors: InvalidArgument when
/// the id is empty or already registered. Thread-safe.
Status register_backend(std::string_view backend_id, std::shared_ptr<BackendInterface> backend);

/// Removes a registration (for tests); true when there was one. Delegates already loaded keep
/// the backend alive. Thread-safe.
bool unregister_backend(std::string_view backend_id);

/// The backend registered under `backend_id`, or null. Thread-safe.
std::shared_ptr<BackendInterface> get_backend(std::string_view backend_id);

/// Ids of every registered backend, sorted. Thread-safe.
std::vector<std::string> registered_backends();

/// Registers a backend from a static initializer:
/// `static BackendRegistration kReg("MyBackend", std::make_shared<MyBackend>());`
struct BackendRegistration {
  BackendRegistration(std::string_view backend_id, std::shared_ptr<BackendInterface> backend);
};

}  // namespace kiln::runtime
