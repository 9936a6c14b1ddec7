#pragma once

#include <kiln/runtime/backend/interface.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace kiln::testing {

/// A backend for tests whose behaviour the test installs as hooks. Without hooks, `init`
/// succeeds with a fresh handle, `execute` copies input i to output i (resizing it), and
/// `destroy` frees the handle. It records what each init saw (options copied) and counts
/// calls. Register it with `StubBackend::install(id)` and remove it with the returned guard.
class StubBackend : public runtime::BackendInterface {
 public:
  struct InitRecord {
    std::string method_name;
    std::string delegate_id;
    std::vector<runtime::BackendOption> options;
    std::vector<uint8_t> processed;
  };

  using InitHook = std::function<runtime::Result<runtime::DelegateHandle*>(
      runtime::BackendInitContext&, runtime::FreeableBuffer*,
      runtime::Span<const runtime::CompileSpec>)>;
  using ExecuteHook = std::function<runtime::Status(
      runtime::DelegateHandle*, runtime::Span<runtime::EValue* const>,
      runtime::Span<runtime::EValue* const>)>;
  using DestroyHook = std::function<void(runtime::DelegateHandle*)>;

  bool is_available() const override { return available; }
  std::vector<runtime::OptionSpec> option_specs() const override { return specs; }
  runtime::Result<runtime::DelegateHandle*> init(
      runtime::BackendInitContext& context, runtime::FreeableBuffer* processed,
      runtime::Span<const runtime::CompileSpec> compile_specs) const override;
  runtime::Status execute(runtime::BackendExecutionContext& context,
                          runtime::DelegateHandle* handle,
                          runtime::Span<runtime::EValue* const> inputs,
                          runtime::Span<runtime::EValue* const> outputs) const override;
  void destroy(runtime::DelegateHandle* handle) const override;

  std::vector<InitRecord> inits() const;
  int num_inits() const { return init_count.load(); }

  // Hooks and settings a test installs before loading.
  InitHook on_init;
  ExecuteHook on_execute;
  DestroyHook on_destroy;
  bool available = true;
  /// Accepted options; tests set this to what they need (default: none accepted).
  std::vector<runtime::OptionSpec> specs;

  mutable std::atomic<int> init_count{0};
  mutable std::atomic<int> execute_count{0};
  mutable std::atomic<int> destroy_count{0};

  /// Registers a new StubBackend under `backend_id` (in place of the backend registered there,
  /// if any); unregisters it, and restores the replaced backend, when the guard dies.
  struct Installed {
    std::shared_ptr<StubBackend> backend;
    std::string id;
    std::shared_ptr<runtime::BackendInterface> replaced;
    ~Installed();
    StubBackend* operator->() const { return backend.get(); }
  };
  static std::unique_ptr<Installed> install(const std::string& backend_id);

 private:
  mutable std::mutex mutex_;
  mutable std::vector<InitRecord> inits_;
  mutable std::set<void*> default_handles_;  // handles made without on_init, freed by destroy
};

}  // namespace kiln::testing
