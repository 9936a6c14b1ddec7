// The per-shape plans of functions of symbolic inputs (LoadedModel::bind): how many a loaded
// model keeps, the order it lets them go in, and their cache entries.
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/bound_function.h>
#include <kiln/engine/loader/cache_entries.h>
#include <kiln/engine/loader/model_loader.h>

#include <chrono>

namespace kiln::engine {

using loader_detail::adopt_cached;
using loader_detail::Adopted;
using loader_detail::has_static_inputs;
using loader_detail::layout_payload;
using loader_detail::make_cache_key;
using loader_detail::PayloadChecker;
using loader_detail::record_of;
using loader_detail::StaticFunction;
using runtime::Result;
using runtime::Status;

std::shared_ptr<BoundFunction> LoadedModel::shape_entry(const Key& key, bool generic_fallback) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = bound_.find(key);
  if (it != bound_.end()) {
    touch(*it->second);
    return it->second;
  }
  auto make = [&](std::shared_ptr<BoundFunction> fallback) {
    auto made = std::make_shared<BoundFunction>(key.first, key.second, std::nullopt, false,
                                                std::move(fallback));
    touch(*made);
    bound_.emplace(key, made);
    return made;
  };
  // The function's per-shape entries (after its generic one, which has no shapes).
  const auto first = bound_.lower_bound(Key{key.first, {}});
  auto of_function = [&](auto visit) {
    for (auto at = first; at != bound_.end() && at->first.first == key.first; ++at) {
      if (!at->second->generic) visit(at);
    }
  };
  auto older = [](auto a, auto b) {
    return a->second->last_used.load(std::memory_order_relaxed) <
           b->second->last_used.load(std::memory_order_relaxed);
  };
  if (generic_fallback && slow_generic_.count(key.first) == 0) {
    // Plans of their own (built, or claimed at a second run) and deferred entries.
    size_t plans = 0, deferred = 0;
    auto oldest_deferred = bound_.end();
    of_function([&](auto at) {
      if (!at->second->fallback || at->second->claimed) {
        ++plans;
        return;
      }
      ++deferred;
      if (oldest_deferred == bound_.end() || older(at, oldest_deferred)) oldest_deferred = at;
    });
    if (plans == 0) return make(nullptr);  // the function's first shape: a plan of its own
    std::shared_ptr<BoundFunction> generic = generic_entry(key.first);
    touch(*generic);
    if (plans >= kShapePlansBeforeGeneric) return generic;
    // Sessions holding a dropped deferred entry keep it; the model lets it go.
    if (deferred >= kShapePlansKept) bound_.erase(oldest_deferred);
    return make(std::move(generic));
  }
  size_t kept = 0;
  auto oldest = bound_.end();
  of_function([&](auto at) {
    ++kept;
    if (oldest == bound_.end() || older(at, oldest)) oldest = at;
  });
  // Sessions holding the dropped entry keep it (and its plan) alive; the model lets it go.
  if (kept >= kShapePlansKept) bound_.erase(oldest);
  return make(nullptr);
}

std::shared_ptr<BoundFunction> LoadedModel::generic_entry(const std::string& function) {
  Key key{function, {}};
  auto it = bound_.find(key);
  if (it == bound_.end()) {
    it =
        bound_
            .emplace(key, std::make_shared<BoundFunction>(function, key.second, std::nullopt, true))
            .first;
  }
  return it->second;
}

bool LoadedModel::claim_shape_plan(BoundFunction& bound) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bound.claimed) return true;
  if (bound.settled.load(std::memory_order_relaxed)) return false;
  size_t plans = 0;
  for (auto at = bound_.lower_bound(Key{bound.name, {}});
       at != bound_.end() && at->first.first == bound.name; ++at) {
    const BoundFunction& other = *at->second;
    if (!other.generic && (!other.fallback || other.claimed)) ++plans;
  }
  // An entry the model let go of gets no plan either: the model would not count it.
  auto it = bound_.find(Key{bound.name, bound.sizes});
  if (plans >= kShapePlansBeforeGeneric || it == bound_.end() || it->second.get() != &bound) {
    bound.settled.store(true, std::memory_order_release);
    return false;
  }
  bound.claimed = true;
  return true;
}

Result<compile::CompiledFunction*> LoadedModel::tier_up(BoundFunction& bound) const {
  if (bound.settled.load(std::memory_order_acquire) || !claim_shape_plan(bound)) {
    compile::CompiledFunction* generic = bound.fallback->ready.load(std::memory_order_acquire);
    return generic != nullptr ? Result<compile::CompiledFunction*>(generic)
                              : build(*bound.fallback);
  }
  return build(bound);
}

void LoadedModel::touch(BoundFunction& bound) const {
  bound.last_used.store(use_clock_.fetch_add(1, std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
}

bool LoadedModel::claim_shape_store(const std::string& function) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t& stores = shape_stores_of_[function];
  if (stores >= kShapePlansBeforeGeneric) return false;
  ++stores;
  return true;
}

namespace {

// The shapes a build's profile names (as compile::specialize and specialize_generic do).
std::string build_label(const BoundFunction& bound) {
  return bound.generic ? std::string("any") : profiling::shapes_text(bound.sizes);
}

// Whether `entry`'s payload passes `check` (the profile records the wait the build did not
// hide); a failing entry is given to `cache.reject`.
bool passes(PayloadChecker& check, cache::ModelCache& cache, const cache::MappedEntry& entry,
            const BoundFunction& bound) {
  const auto wait_start = std::chrono::steady_clock::now();
  Status verified = check.get();
  if (profiling::enabled()) {
    profiling::add_build_phase(
        bound.name, build_label(bound), "cache entry check (what the build did not hide)",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wait_start)
            .count());
  }
  if (!verified.ok()) cache.reject(entry, verified.message());
  return verified.ok();
}

}  // namespace

Result<std::unique_ptr<compile::CompiledFunction>> LoadedModel::specialize_shape(
    const BoundFunction& bound) const {
  // A shape-generic plan has an entry of its own too (no shapes in its key), so that a warm
  // process adopts its packed weights instead of packing them again.
  // Per-shape plans take their arenas from the model's pool at each run: one arena, as large
  // as the largest plan's, per thread running them at once, however many shapes are kept.
  auto specialize = [&](const compile::CompileOptions& compile) {
    if (bound.generic) return compile::specialize_generic(model_, bound.name, options_, compile);
    compile::CompileOptions pooled = compile;
    pooled.arena_pool = arena_pool_;
    return compile::specialize(model_, bound.name, bound.sizes, options_, pooled);
  };
  const ir::Graph* graph = model_.find_function(bound.name);
  if (cache_dir_.empty() || graph == nullptr || has_static_inputs(*graph)) {
    // No cache, or a static function: the load's own artifact covers those.
    return specialize(compile_);
  }
  const std::vector<StaticFunction> functions = {StaticFunction{bound.name, bound.sizes}};
  const cache::CacheKey key = make_cache_key(model_hash_, functions, options_, compile_);
  cache::ModelCache cache(cache_dir_, cache_options_);
  LoadReport lookup;  // its warnings: an unusable entry is rebuilt and replaced
  const auto lookup_start = std::chrono::steady_clock::now();
  // The entry's packed weights go into a store of this build's own, staged over the model's:
  // its payload is hashed (on a second thread when large) while the plan is built from them,
  // and they reach the model's store, where other functions would use them, once it passes.
  auto staged = std::make_shared<cpu::PackedConstants>(compile_.packed.get());
  std::optional<Adopted> cached =
      adopt_cached(cache, key, *staged, lookup, cache::PayloadCheck::Later);
  PayloadChecker check;
  if (cached && cached->unchecked) check = PayloadChecker(*cached->unchecked);
  const double lookup_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - lookup_start)
          .count();
  // A shape the entry records is rebuilt without the proofs its plan passed when made; a plan
  // that then differs from the entry's is built again with them.
  const bool recorded = cached && cached->functions.size() == 1 &&
                        cached->functions[0].name == bound.name &&
                        cached->functions[0].input_sizes == bound.sizes;
  std::optional<Result<std::unique_ptr<compile::CompiledFunction>>> compiled;
  if (cached) {
    compile::CompileOptions trusted = compile_;
    trusted.proofs_recorded = recorded && !bound.generic;
    trusted.packed = staged;
    compiled = specialize(trusted);
    if (check.valid() && !passes(check, cache, *cached->unchecked, bound)) {
      cached.reset();  // nothing built from it has left this build: rebuilt and replaced
    }
    if (cached) compile_.packed->absorb(staged);
  }
  if (!cached) compiled = specialize(compile_);
  if (profiling::enabled()) {  // the lookup came first: the build's first phase
    profiling::add_build_phase(bound.name, build_label(bound),
                               cached && recorded ? "cache lookup (entry adopted)"
                                                  : "cache lookup (no entry for these shapes)",
                               lookup_ms, profiling::PhaseAt::Front);
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompiledFunction> built, std::move(*compiled));
  artifact::FunctionRecord record = record_of(*built, bound.name, bound.sizes);
  if (cached && recorded && cached->functions[0] != record) {
    KILN_ASSIGN_OR_RETURN(built, specialize(compile_));
    record = record_of(*built, bound.name, bound.sizes);
  } else if (cached && recorded) {
    shape_hits_.fetch_add(1);
    return built;
  }
  // A miss, or an entry whose plan differs: store this one (packed weights of every shape
  // so far, so that the next process adopts what it needs whatever it binds first), unless
  // this function has stored as many as the plans the model keeps (a generic plan, built once
  // per loaded model, is always stored).
  if (bound.generic || claim_shape_store(bound.name)) store_shape(key, record);
  return built;
}

void LoadedModel::store_shape(const cache::CacheKey& key,
                              const artifact::FunctionRecord& record) const {
  std::vector<artifact::FunctionRecord> records = {record};
  auto store = [dir = cache_dir_, options = cache_options_, key, hash = model_hash_,
                records = std::move(records), packed = compile_.packed] {
    cache::ModelCache background(dir, options);
    artifact::ArtifactPieces payload;
    layout_payload(records, *packed, payload);
    (void)background.store(key, payload.pieces, hash);  // failures: the cache's warnings
  };
  if (compile_.store_in_background) {
    run_in_background(std::move(store));
  } else {
    store();
  }
  shape_stores_.fetch_add(1);
}

}  // namespace kiln::engine
