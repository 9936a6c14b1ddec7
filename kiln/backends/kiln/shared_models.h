#pragma once

#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/runtime/core/aligned_buffer.h>
#include <kiln/runtime/core/freeable_buffer.h>
#include <kiln/runtime/core/result.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace kiln::backends {

/// What identifies one shareable loaded model (DESIGN.md §3, "Shared loading"): the model
/// package's content hash, the specialization identifier and the cache location. Delegates
/// whose keys are equal share one loaded model.
struct SharedModelKey {
  uint64_t package_hash = 0;
  std::string specialization;  ///< `SpecializationOptions::identifier()`
  std::string cache_dir;       ///< as the delegate was configured; "" for no persistence

  friend bool operator<(const SharedModelKey& a, const SharedModelKey& b) {
    return std::tie(a.package_hash, a.specialization, a.cache_dir) <
           std::tie(b.package_hash, b.specialization, b.cache_dir);
  }
  friend bool operator==(const SharedModelKey& a, const SharedModelKey& b) = default;
};

/// A loaded model together with everything it references: the package bytes (with their owner,
/// e.g. the program's data), the aligned copy made when those bytes were misaligned, and the
/// package view whose `ir::Model` the loaded model points into. Holding a `SharedModel` keeps
/// all of it alive, so a delegate sharing the model never depends on the delegate that loaded it.
/// The members are destroyed model first, then the view, then the bytes.
/// Thread-safety: immutable after `adopt`; `model` itself is safe to bind from several threads.
struct SharedModel {
  runtime::FreeableBuffer package_bytes;
  runtime::AlignedBuffer package_copy;
  std::unique_ptr<engine::package::PackageView> package;
  std::shared_ptr<engine::LoadedModel> model;  // last: destroyed first

  /// Takes ownership of a loaded model and what it references. `model` must have been loaded
  /// from `*package`, which reads `package_copy` when it is set, else `package_bytes`. Moving
  /// these buffers does not move their bytes, so `model` stays valid.
  static std::shared_ptr<SharedModel> adopt(runtime::FreeableBuffer package_bytes,
                                            runtime::AlignedBuffer package_copy,
                                            std::unique_ptr<engine::package::PackageView> package,
                                            std::shared_ptr<engine::LoadedModel> model);

  /// `model` as a pointer that keeps this whole bundle alive (an aliasing `shared_ptr`).
  static std::shared_ptr<engine::LoadedModel> model_of(std::shared_ptr<SharedModel> shared);
};

/// Where the registry calls the test hook (see `set_shared_load_fault_hook`).
enum class SharedLoadFaultPoint {
  /// A caller found its key being loaded by another thread and is about to block until that
  /// load publishes (the registry lock is not held while the hook runs).
  BeforeSharedLoadWait,
  /// A caller is about to run its loader: the first for its key, or a waiter taking over a
  /// failed load (the registry lock is not held).
  BeforeSharedLoad,
};

/// Test-only: installs `hook` to be called at each `SharedLoadFaultPoint` of every registry in
/// the process, so tests can order threads deterministically (e.g. let the first loader fail
/// only once a waiter is about to block). An empty function removes it. The hook runs on the
/// calling thread without the registry lock held; it may block. Not for production use: it is
/// process-wide and not synchronized with registries in use, so set it only while no shared
/// load is running.
void set_shared_load_fault_hook(std::function<void(SharedLoadFaultPoint)> hook);

/// What a registry has done since it was made, for tests.
struct SharedModelCounters {
  uint64_t loads_started =
      0;                     ///< loader calls (first loads, reloads of expired entries, takeovers)
  uint64_t shared_hits = 0;  ///< calls answered with a live model, without loading
  uint64_t waits = 0;        ///< times a caller blocked on another thread's load
  uint64_t takeovers = 0;    ///< loads run by a waiter after the load it waited on failed
};

/// The process-wide registry of shared loaded models (DESIGN.md §3, "Shared loading"). It holds
/// `weak_ptr`s: a model lives while some delegate holds it, and a key whose model has expired is
/// loaded again on its next use.
///
/// Thread-safety: every method may be called from several threads. A key is loaded by one thread
/// at a time: concurrent callers of a key being loaded wait for that load instead of loading it
/// again. When that load fails, its caller gets the error and one waiter takes over (runs its own
/// loader) while the others keep waiting on it.
class SharedModelRegistry {
 public:
  /// Produces the model for a key; called without the registry lock held.
  using Loader = std::function<runtime::Result<std::shared_ptr<SharedModel>>()>;

  /// The registry KilnBackend delegates share (never destroyed).
  static SharedModelRegistry& instance();

  /// The live model under `key`, else the result of `load()` (published under `key` on success).
  /// Blocks while another thread loads `key`. Errors: those of `load()` when this caller ran it
  /// (its own load or a takeover); InvalidArgument when `load` returns no model.
  runtime::Result<std::shared_ptr<SharedModel>> get_or_load(const SharedModelKey& key,
                                                            const Loader& load);

  /// The live model under `key`, or null (never loads, never waits).
  std::shared_ptr<SharedModel> find(const SharedModelKey& key) const;

  SharedModelCounters counters() const;

 private:
  struct Entry {
    std::weak_ptr<SharedModel> model;
    bool loading = false;  // a thread is running a loader for this key
    bool handoff = false;  // a load failed and a waiter should take over (loading stays set)
    int waiters = 0;       // callers blocked on this key
  };
  class LoadGuard;

  void forget_if_unused(const SharedModelKey& key);

  mutable std::mutex mutex_;
  std::condition_variable published_;
  std::map<SharedModelKey, Entry> entries_;
  SharedModelCounters counters_;
};

}  // namespace kiln::backends
