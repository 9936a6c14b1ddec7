#pragma once

// The compiled-artifact cache entries ModelLoader stores and adopts (DESIGN.md §4 "Cache"):
// their keys and payloads, adopting their packed weights into a store, and checking their
// payloads while a build uses them. Internal to the loader.

#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/loader/model_loader.h>

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::loader_detail {

/// A function of static inputs and their sizes.
struct StaticFunction {
  std::string name;
  std::vector<std::vector<int64_t>> sizes;
};

/// The model's functions whose inputs are all static, in order.
std::vector<StaticFunction> static_functions(const ir::Model& model);

/// The key of the artifact of `functions` (the static functions of the model `model_hash`, or
/// one function at the shapes it was bound to).
cache::CacheKey make_cache_key(uint64_t model_hash, const std::vector<StaticFunction>& functions,
                               const specialization::SpecializationOptions& options,
                               const compile::CompileOptions& compile);

/// The artifact payload of `records` and every packing of `packed`, as pieces pointing into it.
void layout_payload(const std::vector<artifact::FunctionRecord>& records,
                    const cpu::PackedConstants& packed, artifact::ArtifactPieces& out);

/// What a cache lookup found: the artifact's function records and how many packed weights
/// were adopted from it.
struct Adopted {
  std::vector<artifact::FunctionRecord> functions;
  uint64_t num_packed = 0;
  /// Looked up with PayloadCheck::Later: the entry, whose payload (the adopted packed
  /// weights) must pass `check_payload` before anything built from it is used.
  std::optional<cache::MappedEntry> unchecked;
};

/// Looks the artifact of `key` up and adopts its packed weights into `packed`; its records on
/// a hit. An entry that does not read adds a warning to `report` and is a miss.
std::optional<Adopted> adopt_cached(cache::ModelCache& cache, const cache::CacheKey& key,
                                    cpu::PackedConstants& packed, LoadReport& report,
                                    cache::PayloadCheck payload_check = cache::PayloadCheck::Now);

/// The check of a cache entry's payload, run while the caller builds from it. A large payload
/// (hashing it takes longer than starting a thread, 0.1-0.3 ms) gets a helper thread; whoever
/// claims the check first, the helper or the caller asking for the result, hashes it. A helper
/// that starts late (on a virtual machine, starting a thread on an idle CPU has taken several
/// milliseconds) finds it taken and leaves, so the caller never waits longer than the hash
/// itself takes.
class PayloadChecker {
 public:
  PayloadChecker() = default;
  explicit PayloadChecker(const cache::MappedEntry& entry);
  bool valid() const { return shared_ != nullptr; }
  /// The check's result: hashed now unless the helper claimed it first, then its result.
  runtime::Status get();

 private:
  static constexpr int kHelper = 1, kCaller = 2;
  struct Shared {
    explicit Shared(cache::MappedEntry e) : entry(std::move(e)) {}
    const cache::MappedEntry entry;  // keeps the mapping alive for a helper that starts late
    std::atomic<int> claimed{0};
    std::promise<runtime::Status> helper_result;
  };
  std::shared_ptr<Shared> shared_;
  std::future<runtime::Status> helper_;
};

}  // namespace kiln::engine::loader_detail
