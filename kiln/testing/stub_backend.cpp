#include <kiln/testing/stub_backend.h>

#include <kiln/runtime/backend/registry.h>

#include <cstring>

namespace kiln::testing {

using namespace kiln::runtime;  // NOLINT(google-build-using-namespace)

namespace {
struct DefaultHandle {
  int id;
};
}  // namespace

Result<DelegateHandle*> StubBackend::init(BackendInitContext& context, FreeableBuffer* processed,
                                          Span<const CompileSpec> compile_specs) const {
  int n = ++init_count;
  {
    InitRecord record;
    record.method_name = context.method_name();
    record.delegate_id = context.delegate_id();
    record.options.assign(context.options().begin(), context.options().end());
    if (processed != nullptr && processed->data() != nullptr) {
      const auto* bytes = static_cast<const uint8_t*>(processed->data());
      record.processed.assign(bytes, bytes + processed->size());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    inits_.push_back(std::move(record));
  }
  if (on_init) return on_init(context, processed, compile_specs);
  auto* handle = new DefaultHandle{n};
  std::lock_guard<std::mutex> lock(mutex_);
  default_handles_.insert(handle);
  return static_cast<DelegateHandle*>(handle);
}

Status StubBackend::execute(BackendExecutionContext& context, DelegateHandle* handle,
                            Span<EValue* const> inputs, Span<EValue* const> outputs) const {
  ++execute_count;
  if (on_execute) return on_execute(handle, inputs, outputs);
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i) {
    const Tensor& in = inputs[i]->to_tensor();
    Tensor& out = outputs[i]->to_tensor();
    KILN_RETURN_IF_ERROR(out.resize(in.sizes()));
    if (in.nbytes() > 0) std::memcpy(out.mutable_data(), in.data(), in.nbytes());
  }
  return Status();
}

void StubBackend::destroy(DelegateHandle* handle) const {
  ++destroy_count;
  if (on_destroy) {
    on_destroy(handle);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (default_handles_.erase(handle) > 0) delete static_cast<DefaultHandle*>(handle);
}

std::vector<StubBackend::InitRecord> StubBackend::inits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inits_;
}

StubBackend::Installed::~Installed() {
  unregister_backend(id);
  if (replaced != nullptr) (void)register_backend(id, replaced);
}

std::unique_ptr<StubBackend::Installed> StubBackend::install(const std::string& backend_id) {
  auto installed = std::make_unique<Installed>();
  installed->backend = std::make_shared<StubBackend>();
  installed->id = backend_id;
  // A real backend registered under this id (e.g. KilnBackend) steps aside for the test.
  installed->replaced = get_backend(backend_id);
  if (installed->replaced != nullptr) unregister_backend(backend_id);
  (void)register_backend(backend_id, installed->backend);
  return installed;
}

}  // namespace kiln::testing
