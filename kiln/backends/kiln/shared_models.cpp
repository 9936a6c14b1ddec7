#include <kiln/backends/kiln/shared_models.h>

#include <iterator>
#include <utility>

namespace kiln::backends {

using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

std::mutex hook_mutex;
std::shared_ptr<const std::function<void(SharedLoadFaultPoint)>> hook;

void run_hook(SharedLoadFaultPoint point) {
  std::shared_ptr<const std::function<void(SharedLoadFaultPoint)>> current;
  {
    std::lock_guard<std::mutex> lock(hook_mutex);
    current = hook;
  }
  if (current) (*current)(point);
}

}  // namespace

void set_shared_load_fault_hook(std::function<void(SharedLoadFaultPoint)> new_hook) {
  std::lock_guard<std::mutex> lock(hook_mutex);
  hook =
      new_hook
          ? std::make_shared<const std::function<void(SharedLoadFaultPoint)>>(std::move(new_hook))
          : nullptr;
}

std::shared_ptr<SharedModel> SharedModel::adopt(
    runtime::FreeableBuffer package_bytes, runtime::AlignedBuffer package_copy,
    std::unique_ptr<engine::package::PackageView> package,
    std::shared_ptr<engine::LoadedModel> model) {
  auto shared = std::make_shared<SharedModel>();
  shared->package_bytes = std::move(package_bytes);
  shared->package_copy = std::move(package_copy);
  shared->package = std::move(package);
  shared->model = std::move(model);
  return shared;
}

std::shared_ptr<engine::LoadedModel> SharedModel::model_of(std::shared_ptr<SharedModel> shared) {
  engine::LoadedModel* model = shared ? shared->model.get() : nullptr;
  return std::shared_ptr<engine::LoadedModel>(std::move(shared), model);
}

// The loading thread's obligation to its key: whatever way get_or_load returns, clear the
// in-flight mark (or hand it to a waiter when the load failed), publish the model and wake the
// waiters.
class SharedModelRegistry::LoadGuard {
 public:
  LoadGuard(SharedModelRegistry& registry, const SharedModelKey& key)
      : registry_(registry), key_(key) {}
  LoadGuard(const LoadGuard&) = delete;
  LoadGuard& operator=(const LoadGuard&) = delete;

  void publish(std::shared_ptr<SharedModel> model) { model_ = std::move(model); }

  ~LoadGuard() {
    std::lock_guard<std::mutex> lock(registry_.mutex_);
    Entry& entry = registry_.entries_[key_];  // present: an entry being loaded is never erased
    if (model_) {
      entry.model = model_;
      entry.loading = false;
    } else if (entry.waiters > 0) {
      entry.handoff = true;  // stays loading: the waiter that claims it loads next
    } else {
      entry.loading = false;
      registry_.forget_if_unused(key_);
    }
    registry_.published_.notify_all();
  }

 private:
  SharedModelRegistry& registry_;
  const SharedModelKey& key_;
  std::shared_ptr<SharedModel> model_;
};

SharedModelRegistry& SharedModelRegistry::instance() {
  // Never destroyed: delegates may be destroyed during static destruction.
  static auto* registry = new SharedModelRegistry();
  return *registry;
}

void SharedModelRegistry::forget_if_unused(const SharedModelKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  const Entry& entry = it->second;
  if (!entry.loading && entry.waiters == 0 && entry.model.expired()) entries_.erase(it);
}

Result<std::shared_ptr<SharedModel>> SharedModelRegistry::get_or_load(const SharedModelKey& key,
                                                                      const Loader& load) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {  // drop expired entries nobody uses
    const Entry& entry = it->second;
    bool unused = !entry.loading && entry.waiters == 0 && entry.model.expired();
    it = unused ? entries_.erase(it) : std::next(it);
  }
  for (;;) {
    Entry& entry = entries_[key];
    if (auto live = entry.model.lock()) {
      ++counters_.shared_hits;
      return live;
    }
    if (!entry.loading) {
      entry.loading = true;
      break;
    }
    // Counted as a waiter before the lock is dropped, so a load failing meanwhile hands off to
    // this caller instead of clearing the mark.
    ++entry.waiters;
    ++counters_.waits;
    lock.unlock();
    run_hook(SharedLoadFaultPoint::BeforeSharedLoadWait);
    lock.lock();
    published_.wait(lock, [&] { return !entry.loading || entry.handoff; });
    --entry.waiters;
    if (entry.handoff) {
      entry.handoff = false;
      ++counters_.takeovers;
      break;
    }
    // Published, or published and already dropped by every holder: look again.
  }
  ++counters_.loads_started;
  LoadGuard guard(*this, key);
  lock.unlock();
  run_hook(SharedLoadFaultPoint::BeforeSharedLoad);
  auto loaded = load();
  if (!loaded.ok()) return loaded.status();
  if (*loaded == nullptr) {
    return Status(Error::InvalidArgument, "load shared model of package hash " +
                                              std::to_string(key.package_hash) +
                                              ": the loader returned no model (expected one)");
  }
  guard.publish(*loaded);
  return loaded;
}

std::shared_ptr<SharedModel> SharedModelRegistry::find(const SharedModelKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.model.lock();
}

SharedModelCounters SharedModelRegistry::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

}  // namespace kiln::backends
