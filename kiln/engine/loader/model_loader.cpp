#include <kiln/engine/loader/model_loader.h>

#include <set>

#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/step_profile.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/thread_team.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/cache_entries.h>
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
using loader_detail::layout_payload;
using loader_detail::make_cache_key;
using loader_detail::PayloadChecker;
using loader_detail::static_functions;
using loader_detail::StaticFunction;
using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

// Everything of a compiled function's plan that a warm load must reproduce: each step's
// placement (node, op, device, fused nodes, implementation) and the arena size.
uint64_t plan_fingerprint(const compile::CompiledFunction& function) {
  std::string text = std::to_string(function.arena_bytes());
  for (const compile::PlacementEntry& step : function.placement()) {
    text += '\n' + step.node + '\t' + step.op + '\t' + step.device + '\t' + step.detail;
    for (const std::string& fused : step.fused) text += '\t' + fused;
  }
  return cache::checksum64(text.data(), text.size());
}

artifact::FunctionRecord record_of(const compile::CompiledFunction& compiled,
                                   const std::string& name,
                                   const std::vector<std::vector<int64_t>>& sizes) {
  return artifact::FunctionRecord{name, sizes, plan_fingerprint(compiled), compiled.arena_bytes(),
                                  static_cast<uint32_t>(compiled.placement().size())};
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& sizes) {
  std::string text;
  for (const auto& shape : sizes) {
    text += text.empty() ? "[" : ", [";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    text += ']';
  }
  return text.empty() ? "()" : text;
}

// Ops whose reference kernels are far slower than their oneDNN ones and that oneDNN has no
// run-time-shape form of: a shape-generic plan would run them 10-50x slower (OCR detection:
// 40x), so a function holding one keeps its per-shape plans even with expect_frequent_reshapes.
bool needs_per_shape_kernels(const ir::Graph& graph) {
  static const std::set<std::string> kOps = {"Conv", "ConvTranspose", "LSTM", "GRU", "RNN"};
  for (const ir::Node& node : graph.nodes) {
    if (kOps.count(node.op) != 0) return true;
  }
  return false;
}

// Whether every input of `graph` has a static shape.
bool has_static_inputs(const ir::Graph& graph) {
  for (int input : graph.inputs) {
    if (!graph.values[static_cast<size_t>(input)].type.static_sizes()) return false;
  }
  return true;
}

// Whether a function gets a shape-generic plan when expect_frequent_reshapes is set.
bool has_generic_plan(const ir::Graph& graph) {
  return !has_static_inputs(graph) && !needs_per_shape_kernels(graph);
}

}  // namespace

// One function bound to one set of input shapes: built at bind, or (bound from a cache hit)
// on first use. `ready` lets runs skip the lock once the function is built.
struct BoundFunction {
  BoundFunction(std::string name, std::vector<std::vector<int64_t>> sizes,
                std::optional<artifact::FunctionRecord> expected, bool generic = false)
      : name(std::move(name)),
        sizes(std::move(sizes)),
        expected(std::move(expected)),
        generic(generic) {}

  const std::string name;
  const std::vector<std::vector<int64_t>> sizes;           // empty for a shape-generic plan
  const std::optional<artifact::FunctionRecord> expected;  // the artifact's record, on a hit
  const bool generic;  // one shape-generic plan for every shape (expect_frequent_reshapes)
  std::mutex mutex;    // serializes the build
  std::shared_ptr<compile::CompiledFunction> compiled;  // set once, under `mutex`
  std::atomic<compile::CompiledFunction*> ready{nullptr};
};

Result<compile::CompiledFunction*> Session::built() const {
  compile::CompiledFunction* function = bound_->ready.load(std::memory_order_acquire);
  if (function != nullptr) return function;
  return model_->build(*bound_);
}

Status Session::run(runtime::Span<const runtime::Tensor* const> inputs,
                    runtime::Span<runtime::Tensor* const> outputs) {
  KILN_ASSIGN_OR_RETURN(compile::CompiledFunction * function, built());
  return function->run(inputs, outputs);
}

Status Session::run(runtime::Span<const runtime::Tensor* const> inputs,
                    runtime::Span<runtime::Tensor* const> outputs,
                    const compile::CompiledFunction::OutputResizer& resize_output) {
  KILN_ASSIGN_OR_RETURN(compile::CompiledFunction * function, built());
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
  auto compiled =
      bound.generic    ? compile::specialize_generic(model_, bound.name, options_, compile_)
      : bound.expected ? compile::specialize(model_, bound.name, bound.sizes, options_, recorded)
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
  const ir::Graph* graph = model_.find_function(function);
  bool generic = options_.expect_frequent_reshapes && graph != nullptr && has_generic_plan(*graph);
  Key key{std::string(function), generic ? std::vector<std::vector<int64_t>>{} : input_sizes};
  std::shared_ptr<BoundFunction> bound = entry(key, generic);
  // Not from the adopted artifact: build now, so bind reports what does not compile. A lazy
  // entry (from the artifact) is built on first use.
  if (!bound->expected) {
    auto built = build(*bound);
    if (!built.ok()) {
      // Keep no entry for what does not compile (binding shapes that do not fit must not grow
      // the map); a concurrent bind of the same key that is building it keeps its own pointer.
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = bound_.find(key);
      if (it != bound_.end() && it->second == bound &&
          bound->ready.load(std::memory_order_acquire) == nullptr) {
        bound_.erase(it);
      }
      return built.status();
    }
    if (generic) {
      Status fits = (*built)->accepts(input_sizes);
      if (!fits.ok()) return fits.with_context("bind function '" + std::string(function) + "'");
    }
  }
  return Session(shared_from_this(), std::move(bound));
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
  if (!options_.expect_frequent_reshapes || !has_generic_plan(*graph)) return Status();
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
// shape-generic MatMuls on kiln's AVX-512 loops; 27: Transposes on kiln's loops), so that
// entries of older plans are not adopted.
constexpr char kEngineVersion[] = "kiln-engine 27";

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

namespace {

// Whether `entry`'s payload passes `check` (the profile records the wait the build did not
// hide); a failing entry is given to `cache.reject`.
bool passes(PayloadChecker& check, cache::ModelCache& cache, const cache::MappedEntry& entry,
            const BoundFunction& bound) {
  const auto wait_start = std::chrono::steady_clock::now();
  Status verified = check.get();
  if (profiling::enabled()) {
    profiling::add_build_phase(
        bound.name, profiling::shapes_text(bound.sizes),
        "cache entry check (what the build did not hide)",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wait_start)
            .count());
  }
  if (!verified.ok()) cache.reject(entry, verified.message());
  return verified.ok();
}

}  // namespace

std::string engine_version() {
  return std::string(kEngineVersion) + " / " + cpu::provider_version();
}

Result<std::unique_ptr<compile::CompiledFunction>> LoadedModel::specialize_shape(
    const BoundFunction& bound) const {
  const ir::Graph* graph = model_.find_function(bound.name);
  if (cache_dir_.empty() || graph == nullptr || has_static_inputs(*graph)) {
    // No cache, or a static function: the load's own artifact covers those.
    return compile::specialize(model_, bound.name, bound.sizes, options_, compile_);
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
    trusted.proofs_recorded = recorded;
    trusted.packed = staged;
    compiled = compile::specialize(model_, bound.name, bound.sizes, options_, trusted);
    if (check.valid() && !passes(check, cache, *cached->unchecked, bound)) {
      cached.reset();  // nothing built from it has left this build: rebuilt and replaced
    }
    if (cached) compile_.packed->absorb(staged);
  }
  if (!cached) compiled = compile::specialize(model_, bound.name, bound.sizes, options_, compile_);
  if (profiling::enabled()) {  // the lookup came first: the build's first phase
    profiling::add_build_phase(bound.name, profiling::shapes_text(bound.sizes),
                               cached && recorded ? "cache lookup (entry adopted)"
                                                  : "cache lookup (no entry for these shapes)",
                               lookup_ms, profiling::PhaseAt::Front);
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompiledFunction> built, std::move(*compiled));
  artifact::FunctionRecord record = record_of(*built, bound.name, bound.sizes);
  if (cached && recorded && cached->functions[0] != record) {
    KILN_ASSIGN_OR_RETURN(built,
                          compile::specialize(model_, bound.name, bound.sizes, options_, compile_));
    record = record_of(*built, bound.name, bound.sizes);
  } else if (cached && recorded) {
    shape_hits_.fetch_add(1);
    return built;
  }
  // A miss, or an entry whose plan differs: store this one (packed weights of every shape
  // so far, so that the next process adopts what it needs whatever it binds first).
  store_shape(key, record);
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

Result<std::shared_ptr<LoadedModel>> ModelLoader::load(
    const ir::Model& model, const specialization::SpecializationOptions& options,
    cache::ModelCache* cache, const compile::CompileOptions& compile) {
  if (!options.allows(specialization::ComputeKind::Cpu)) {
    return Status(Error::NotSupported,
                  "load model: options '" + options.identifier() +
                      "' do not allow the CPU (expected units to include cpu, the only kind "
                      "this engine places work on)");
  }
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
