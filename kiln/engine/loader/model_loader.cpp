#include <kiln/engine/loader/model_loader.h>

#include <set>

#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/thread_team.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/bound_function.h>
#include <kiln/engine/loader/cache_entries.h>
#include <kiln/engine/package/model_check.h>
#include <kiln/engine/package/package.h>
#include <kiln/engine/specialization/devices.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <set>

namespace kiln::engine {

using loader_detail::adopt_cached;
using loader_detail::Adopted;
using loader_detail::has_generic_plan;
using loader_detail::has_static_inputs;
using loader_detail::layout_payload;
using loader_detail::make_cache_key;
using loader_detail::PayloadChecker;
using loader_detail::record_of;
using loader_detail::shapes_text;
using loader_detail::static_functions;
using loader_detail::StaticFunction;
using runtime::Error;
using runtime::Result;
using runtime::Status;

Result<compile::CompiledFunction*> Session::built() const {
  compile::CompiledFunction* function = bound_->ready.load(std::memory_order_acquire);
  if (function != nullptr) return function;
  if (bound_->fallback) return model_->tier_up(*bound_);
  return model_->build(*bound_);
}

Result<compile::CompiledFunction*> Session::runnable() const {
  compile::CompiledFunction* function = bound_->ready.load(std::memory_order_acquire);
  if (function != nullptr) return function;
  // A deferred entry's first run: on the generic plan, which bind built.
  if (bound_->fallback && !bound_->first_run_taken.exchange(true, std::memory_order_acq_rel)) {
    return model_->build(*bound_->fallback);
  }
  return built();
}

Status Session::run(runtime::Span<const runtime::Tensor* const> inputs,
                    runtime::Span<runtime::Tensor* const> outputs) {
  model_->touch(*bound_);
  KILN_ASSIGN_OR_RETURN(compile::CompiledFunction * function, runnable());
  return function->run(inputs, outputs);
}

Status Session::run(runtime::Span<const runtime::Tensor* const> inputs,
                    runtime::Span<runtime::Tensor* const> outputs,
                    const compile::CompiledFunction::OutputResizer& resize_output) {
  model_->touch(*bound_);
  KILN_ASSIGN_OR_RETURN(compile::CompiledFunction * function, runnable());
  return function->run(inputs, outputs, resize_output);
}

Result<const compile::CompiledFunction*> Session::function() const {
  KILN_ASSIGN_OR_RETURN(compile::CompiledFunction * function, built());
  return static_cast<const compile::CompiledFunction*>(function);
}

bool Session::is_built() const { return bound_->ready.load(std::memory_order_acquire) != nullptr; }

Result<compile::CompiledFunction*> LoadedModel::build(BoundFunction& bound) const {
  std::lock_guard<std::mutex> lock(bound.mutex);
  if (compile::CompiledFunction* built = bound.ready.load(std::memory_order_acquire)) return built;
  // A function the entry records is rebuilt without the proofs its plan passed when made.
  compile::CompileOptions recorded = compile_;
  recorded.proofs_recorded = true;
  auto compiled = bound.expected
                      ? compile::specialize(model_, bound.name, bound.sizes, options_, recorded)
                      : specialize_shape(bound);
  const std::string context = "build function '" + bound.name + "' for " +
                              (bound.generic ? std::string("every input shape (shape-generic)")
                                             : "input shapes " + shapes_text(bound.sizes));
  if (!compiled.ok()) return compiled.status().with_context(context);
  if (bound.expected && record_of(**compiled, bound.name, bound.sizes) != *bound.expected) {
    // Not the plan the entry proved: built again with every proof. The entry's packed weights
    // are found by their layouts, so the new plan is still right (a weight it needs in another
    // layout is packed now); the entry is stale, not wrong.
    compiled = compile::specialize(model_, bound.name, bound.sizes, options_, compile_);
    if (!compiled.ok()) return compiled.status().with_context(context);
    std::lock_guard<std::mutex> warnings_lock(warnings_mutex_);
    build_warnings_.push_back("function '" + bound.name + "' for input shapes " +
                              shapes_text(bound.sizes) + " did not match the plan of cache entry " +
                              report_.cache_entry + " (" +
                              std::to_string(compile_.packed->num_packed()) +
                              " weights packed again so far); using the plan derived now");
  }
  bound.compiled = std::move(compiled).get();
  bound.ready.store(bound.compiled.get(), std::memory_order_release);
  return bound.compiled.get();
}

Result<Session> LoadedModel::bind(std::string_view function,
                                  const std::vector<std::vector<int64_t>>& input_sizes) {
  // With expect_frequent_reshapes, a function of symbolic inputs has one shape-generic plan,
  // bound under no shapes, for every shape.
  // Without it, one plan per shape, within the bounds of shape_entry.
  const ir::Graph* graph = model_.find_function(function);
  const bool has_generic =
      graph != nullptr && has_generic_plan(*graph, options_.expect_frequent_reshapes);
  const bool all_generic = options_.expect_frequent_reshapes && has_generic;
  Key key{std::string(function), all_generic ? std::vector<std::vector<int64_t>>{} : input_sizes};
  std::shared_ptr<BoundFunction> bound =
      all_generic || graph == nullptr || has_static_inputs(*graph) ? entry(key, all_generic)
                                                                   : shape_entry(key, has_generic);
  // A lazy entry (from the adopted artifact) is built on first use. Any other is built now, so
  // that bind reports what does not compile; for a deferred one, that is the generic plan its
  // first run uses.
  const std::shared_ptr<BoundFunction> now = bound->fallback ? bound->fallback : bound;
  if (now->expected) return Session(shared_from_this(), std::move(bound));
  auto built = build(*now);
  if (!built.ok()) {
    // Keep no entry for what does not compile (binding shapes that do not fit must not grow
    // the map); a concurrent bind of the same key that is building it keeps its own pointer.
    std::lock_guard<std::mutex> lock(mutex_);
    forget(*now, /*built_too=*/false);
    if (bound != now) forget(*bound, false);
    return built.status();
  }
  if (now->generic && !options_.expect_frequent_reshapes &&
      !loader_detail::generic_plan_runs_fast(**built, *graph)) {
    // The default's generic plan would run slower than per-shape plans: the function keeps
    // per-shape plans (within kShapePlansKept) instead.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slow_generic_.insert(std::string(function));
      forget(*now, /*built_too=*/true);
      if (bound != now) forget(*bound, true);
    }
    return bind(function, input_sizes);
  }
  if (now->generic) {
    Status fits = (*built)->accepts(input_sizes);
    if (!fits.ok()) {
      if (bound != now) {
        std::lock_guard<std::mutex> lock(mutex_);
        forget(*bound, false);
      }
      return fits.with_context("bind function '" + std::string(function) + "'");
    }
  }
  return Session(shared_from_this(), std::move(bound));
}

void LoadedModel::forget(const BoundFunction& bound, bool built_too) {
  auto it = bound_.find(Key{bound.name, bound.sizes});
  if (it != bound_.end() && it->second.get() == &bound &&
      (built_too || bound.ready.load(std::memory_order_acquire) == nullptr)) {
    bound_.erase(it);
  }
}

std::shared_ptr<BoundFunction> LoadedModel::entry(const Key& key, bool generic) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = bound_.find(key);
  if (it == bound_.end()) {
    it = bound_
             .emplace(key,
                      std::make_shared<BoundFunction>(key.first, key.second, std::nullopt, generic))
             .first;
  }
  return it->second;
}

Status LoadedModel::prepare(std::string_view function) {
  const ir::Graph* graph = model_.find_function(function);
  if (graph == nullptr) {
    return Status(runtime::Error::NotFound,
                  "prepare function '" + std::string(function) + "': no such function");
  }
  if (!options_.expect_frequent_reshapes || !has_generic_plan(*graph, true)) return Status();
  std::shared_ptr<BoundFunction> bound = entry(Key{std::string(function), {}}, true);
  return build(*bound).status();
}

std::vector<FunctionPlacement> LoadedModel::placement() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FunctionPlacement> report;
  for (const auto& [key, bound] : bound_) {
    const compile::CompiledFunction* function = bound->ready.load(std::memory_order_acquire);
    if (function != nullptr) {
      report.push_back(FunctionPlacement{key.first, key.second, function->placement()});
    }
  }
  return report;
}

size_t LoadedModel::num_built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t built = 0;
  for (const auto& entry : bound_) {
    built += entry.second->ready.load(std::memory_order_acquire) != nullptr ? 1 : 0;
  }
  return built;
}

size_t LoadedModel::num_bound() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bound_.size();
}

std::vector<std::string> LoadedModel::build_warnings() const {
  std::lock_guard<std::mutex> lock(warnings_mutex_);
  return build_warnings_;
}

std::vector<std::string> LoadedModel::function_names() const {
  std::vector<std::string> names;
  for (const auto& graph : model_.functions) names.push_back(graph.name);
  return names;
}

namespace {

// Raised whenever plans change for the same model and options (4: 1-D Convs of few channels
// as windows x weights; 5: LSTMs of small batches on kiln's cell; 6: ops of little work on
// kiln's loops or the reference kernels; 7: blocked Convs in functions with depthwise Convs,
// large Winograd-shaped Convs blocked and direct, streaming MatMuls; 8: Muls by a constant
// scalar fused as post-ops; 9: ConvTransposes fused with their bias and activations; 10: Convs
// of large weights on brgemm in nhwc among blocked ones; 11: InstanceNormalization on kiln's
// rows; 12: Convs of at most 8 output channels on kiln's loops; 13: small pools on kiln's
// loops; 14: blocked 1x1 Convs on kiln's loops; 15: same-shape Adds and Muls on kiln's
// loops; 16: strided blocked 1x1 Convs too; 17: SiLU fused as a Swish post-op, activations
// fused into instance and group normalizations; 18-19: kiln's vector loops and fused GELUs only
// with AVX-512; 20: MatMuls by a constant B on kiln's AVX2 loops without AVX-512; 21: those of
// a decoder's 1-4 rows too; 22: shape-generic element-wise ops on kiln's loops; 23: Convs to one
// block of output channels over large images direct, not Winograd; Concats of blocked pieces
// in the pieces' layout; 24: ConvTransposes of few values a pixel on kiln's loops; 25: a
// decoder's streaming MatMuls read B as oneDNN's blocked MatMul packs it, on AVX-512; 26:
// shape-generic MatMuls on kiln's AVX-512 loops; 27: Transposes on kiln's loops; 28: the build
// fingerprint joins the version; 29: shape-generic plans of Conv networks; 30: depthwise Convs
// on kiln's loops), so that entries of older plans are not adopted. The build
// fingerprint beside it changes with any change of the code, so a plan change that forgets
// this number still never adopts an older build's entries.
constexpr char kEngineVersion[] = "kiln-engine 30";

// Builds the functions of `records` named in `names` (bound lazily from a hit) now. A build
// that fails is left for the function's first use, which reports it (as without this).
void build_now(LoadedModel& loaded, const std::vector<artifact::FunctionRecord>& records,
               const std::vector<std::string>& names) {
  for (const artifact::FunctionRecord& record : records) {
    if (std::find(names.begin(), names.end(), record.name) == names.end()) continue;
    auto session = loaded.bind(record.name, record.input_sizes);
    if (session.ok()) (void)session->function();
  }
}

// Whether `records` name exactly `functions` with their shapes, in order.
bool same_functions(const std::vector<artifact::FunctionRecord>& records,
                    const std::vector<StaticFunction>& functions) {
  if (records.size() != functions.size()) return false;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].name != functions[i].name || records[i].input_sizes != functions[i].sizes) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string engine_version() {
  return std::string(kEngineVersion) + " build " + std::string(engine_build_fingerprint()) + " / " +
         cpu::provider_version();
}

Result<std::shared_ptr<LoadedModel>> ModelLoader::load(
    const ir::Model& model, const specialization::SpecializationOptions& options,
    cache::ModelCache* cache, const compile::CompileOptions& compile) {
  if (!options.allows(specialization::ComputeKind::Cpu)) {
    return Status(Error::NotSupported,
                  "load model: options '" + options.identifier() +
                      "' do not allow the CPU (expected units to include cpu, the only kind "
                      "this engine places work on)");
  }
  // As a package's reader would: indices in range, values flowing forward.
  KILN_RETURN_IF_ERROR(package::check_model(model, Error::InvalidArgument, "load model"));
  std::optional<uint64_t> model_hash;
  if (cache != nullptr && !cache->dir().empty()) {
    auto hash = package::package_hash(model);
    if (!hash.ok()) return hash.status().with_context("load model");
    model_hash = *hash;
  }
  return load_with_hash(model, options, model_hash ? cache : nullptr, model_hash.value_or(0),
                        compile);
}

Result<std::shared_ptr<LoadedModel>> ModelLoader::load_with_hash(
    const ir::Model& model, const specialization::SpecializationOptions& options,
    cache::ModelCache* cache, uint64_t model_hash, const compile::CompileOptions& compile) {
  if (!options.allows(specialization::ComputeKind::Cpu)) {
    return Status(Error::NotSupported,
                  "load model: options '" + options.identifier() +
                      "' do not allow the CPU (expected units to include cpu, the only kind "
                      "this engine places work on)");
  }
  compile::CompileOptions with_store = compile;
  if (!with_store.packed) with_store.packed = std::make_shared<cpu::PackedConstants>();
  auto make_loaded = [&] {
    std::shared_ptr<LoadedModel> made(new LoadedModel(model, options, with_store));
    if (cache != nullptr && !cache->dir().empty()) {
      made->cache_dir_ = cache->dir();
      made->cache_options_ = cache->options();
      made->model_hash_ = model_hash;
    }
    return made;
  };
  std::shared_ptr<LoadedModel> loaded = make_loaded();
  std::vector<StaticFunction> functions = static_functions(model);

  // Only functions specialized at load (static inputs) have an artifact to store; a model
  // whose functions all have symbolic inputs specializes on first use of each shape, uncached.
  bool use_cache = cache != nullptr && !cache->dir().empty() && !functions.empty();
  cache::CacheKey key;
  std::optional<Adopted> cached;
  if (use_cache) {
    key = make_cache_key(model_hash, functions, options, compile);
    // With functions to build on a hit and a packed store of the load's own (dropped whole if
    // the entry is corrupt), the payload is hashed on a second thread while they build.
    const bool overlap = !compile.build_on_hit.empty() && !compile.packed;
    cached = adopt_cached(*cache, key, *with_store.packed, loaded->report_,
                          overlap ? cache::PayloadCheck::Later : cache::PayloadCheck::Now);
  }
  const bool hit = cached && same_functions(cached->functions, functions);
  if (hit) {
    // A hit builds nothing but `build_on_hit`: each other function is built on first use and
    // checked then against its record, so the load costs the same for one function or many.
    for (const artifact::FunctionRecord& record : cached->functions) {
      loaded->bound_.emplace(
          LoadedModel::Key{record.name, record.input_sizes},
          std::make_shared<BoundFunction>(record.name, record.input_sizes, record));
    }
  }
  if (cached && cached->unchecked) {
    PayloadChecker check(*cached->unchecked);
    if (hit) build_now(*loaded, cached->functions, compile.build_on_hit);
    Status verified = check.get();
    if (!verified.ok()) {
      // Nothing built from the entry has left the load: drop the model and its packed store.
      cache->reject(*cached->unchecked, verified.message());
      with_store.packed = std::make_shared<cpu::PackedConstants>();
      loaded = make_loaded();
      cached.reset();
    }
  }
  LoadReport& report = loaded->report_;
  if (cached && hit) {
    report.cache = "hit";
    report.adopted_constants = cached->num_packed;
    report.deferred_functions = functions.size() - loaded->num_built();
    return loaded;
  }

  std::vector<artifact::FunctionRecord> records;
  for (const StaticFunction& f : functions) {
    Result<Session> session = loaded->bind(f.name, f.sizes);
    if (!session.ok()) return session.status().with_context("load model");
    auto compiled = session->function();
    if (!compiled.ok()) return compiled.status().with_context("load model");
    records.push_back(record_of(**compiled, f.name, f.sizes));
  }
  report.packed_constants = with_store.packed->num_packed();
  report.adopted_constants = with_store.packed->num_adopted_used();
  if (!use_cache) return loaded;

  if (cached) {
    report.warnings.push_back(
        "cache entry " + report.cache_entry + " did not match this model's static functions (" +
        std::to_string(report.packed_constants) + " weights packed again); storing a new one");
    report.cache_entry.clear();
  }
  report.cache = "miss";
  if (compile.store_in_background) {
    // The job owns what the artifact's pieces point into: the records and the packed weights.
    run_in_background([dir = cache->dir(), cache_options = cache->options(), key, model_hash,
                       records = std::move(records), packed = with_store.packed] {
      cache::ModelCache background(dir, cache_options);
      artifact::ArtifactPieces payload;
      layout_payload(records, *packed, payload);
      (void)background.store(key, payload.pieces, model_hash);  // failures: the cache's warnings
    });
    report.stored_in_background = true;
    return loaded;
  }
  artifact::ArtifactPieces payload;
  layout_payload(records, *with_store.packed, payload);
  uint64_t failed_before = cache->stats().failed_stores;
  Status stored = cache->store(key, payload.pieces, model_hash);
  if (!stored.ok()) {
    report.warnings.push_back("compiled artifact not stored: " + stored.message());
  } else if (cache->stats().failed_stores != failed_before) {
    auto warnings = cache->warnings();
    report.warnings.push_back(
        "compiled artifact not stored: " +
        (warnings.empty() ? std::string("see the cache's warnings") : warnings.back()));
  }
  return loaded;
}

Result<std::shared_ptr<LoadedModel>> ModelLoader::load(
    const package::PackageView& package, const specialization::SpecializationOptions& options,
    cache::ModelCache* cache, const compile::CompileOptions& compile) {
  compile::CompileOptions with_weights = compile;
  with_weights.weight_data.clear();
  for (size_t i = 0; i < package.num_weights(); ++i) {
    with_weights.weight_data.push_back(package.weight_data(i));
  }
  with_weights.verify_weight = [&package](size_t weight) { return package.verify_weight(weight); };
  return load_with_hash(package.model(), options, cache, package.content_hash(), with_weights);
}

Result<cache::CacheKey> ModelLoader::cache_key(const package::PackageView& package,
                                               const specialization::SpecializationOptions& options,
                                               const compile::CompileOptions& compile) {
  std::vector<StaticFunction> functions = static_functions(package.model());
  if (functions.empty()) {
    return Status(Error::NotSupported,
                  "cache key of model package " + cache::to_hex(package.content_hash()) +
                      ": no function has only static inputs (expected at least one; a model "
                      "without one is specialized per shape on use and never cached)");
  }
  return make_cache_key(package.content_hash(), functions, options, compile);
}

Result<std::vector<uint8_t>> ModelLoader::compile_artifact(
    const package::PackageView& package, const specialization::SpecializationOptions& options,
    const compile::CompileOptions& compile) {
  auto key = cache_key(package, options, compile);
  if (!key.ok()) return key.status().with_context("compile artifact");
  compile::CompileOptions fresh = compile;
  fresh.packed = nullptr;  // the artifact holds this model's packings only
  auto loaded = load(package, options, /*cache=*/nullptr, fresh);
  if (!loaded.ok()) return loaded.status().with_context("compile artifact");
  std::vector<artifact::FunctionRecord> records;
  for (const StaticFunction& f : static_functions(package.model())) {
    // Specialized by the load: bind returns the compiled function, compiling nothing.
    Result<Session> session = (*loaded)->bind(f.name, f.sizes);
    if (!session.ok()) return session.status().with_context("compile artifact");
    auto compiled = session->function();
    if (!compiled.ok()) return compiled.status().with_context("compile artifact");
    records.push_back(record_of(**compiled, f.name, f.sizes));
  }
  artifact::ArtifactPieces payload;
  layout_payload(records, (*loaded)->packed_constants(), payload);
  return cache::encode_entry(*key, payload.pieces);
}

}  // namespace kiln::engine
