#pragma once

#include <kiln/engine/cache/cache_key.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/arena_pool.h>
#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/specialization/specialization_options.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine::artifact {
struct FunctionRecord;
}  // namespace kiln::engine::artifact

namespace kiln::engine::package {
class PackageView;
}

namespace kiln::engine {

class LoadedModel;
struct BoundFunction;  // internal: one function and shapes, built at bind or on first use

/// One function of a loaded model bound to one set of input shapes: what a caller runs.
/// Sessions bound to the same function and shapes share one compiled function (and its
/// pre-packed weights) while the model keeps it (see `LoadedModel::bind` for the per-shape
/// plans it lets go of); their runs are serialized by it. The session keeps its model and its
/// compiled function alive.
///
/// A session bound from a cache hit is lazy (see `LoadedModel::bind`): its compiled function
/// is built on the first `run` or `function()` of any session of that function and shapes.
/// Thread-safety: `run` and `function` may be called from several threads (runs are serialized;
/// concurrent first uses build the function once, the others wait for it).
class Session {
 public:
  /// Runs the function, building it first when it is not built yet; see
  /// `compile::CompiledFunction::run` for the contract. Errors: InvalidArgument naming the
  /// input or output whose count, dtype or shape is wrong (the shape given and the one bound);
  /// a kernel's error with the node named; any error of building the function (see `function`).
  runtime::Status run(runtime::Span<const runtime::Tensor* const> inputs,
                      runtime::Span<runtime::Tensor* const> outputs);
  /// Same, letting the caller grow each output first (see `CompiledFunction::run`).
  runtime::Status run(runtime::Span<const runtime::Tensor* const> inputs,
                      runtime::Span<runtime::Tensor* const> outputs,
                      const compile::CompiledFunction::OutputResizer& resize_output);
  /// The compiled function, built now when it is not built yet. The pointer stays valid while
  /// the session (or any session of the same function and shapes) lives. Errors: as
  /// `compile::specialize`, with the function and shapes named ("build function 'f' for input
  /// shapes [1, 8]: ..."); a failed build is tried again on the next call.
  runtime::Result<const compile::CompiledFunction*> function() const;
  /// Whether the compiled function has been built (always true for a session bound on a miss).
  bool is_built() const;

 private:
  friend class LoadedModel;
  Session(std::shared_ptr<const LoadedModel> model, std::shared_ptr<BoundFunction> bound)
      : model_(std::move(model)), bound_(std::move(bound)) {}
  /// The session's own plan, built now (a deferred entry's, when the model still gives the
  /// function a per-shape plan; else the generic plan it runs on).
  runtime::Result<compile::CompiledFunction*> built() const;
  /// The plan the next run uses: as `built`, except a deferred entry's first run, which goes
  /// to the generic plan.
  runtime::Result<compile::CompiledFunction*> runnable() const;

  std::shared_ptr<const LoadedModel> model_;
  std::shared_ptr<BoundFunction> bound_;
};

/// Where the steps of one bound function run.
struct FunctionPlacement {
  std::string function;
  std::vector<std::vector<int64_t>> input_sizes;
  std::vector<compile::PlacementEntry> steps;
};

/// What a load did about the cache and the packed weights.
struct LoadReport {
  /// "hit": the compiled artifact came from the cache, listing exactly the model's static
  /// functions and shapes, and its packed weights were adopted in place (the functions are
  /// built on first use, see `deferred_functions`); "miss": the model was specialized and (unless a
  /// warning says otherwise) stored; "off": no cache (none given, or its directory is empty), or no
  /// function of the model has static inputs (functions are then specialized on first use of each
  /// shape, uncached).
  std::string cache = "off";
  std::string cache_entry;        ///< The entry's file on a hit; empty otherwise.
  uint64_t packed_constants = 0;  ///< Weights packed (reordered) during the load.
  /// Weights taken packed from the artifact: on a hit, every packed weight it holds (adopted
  /// in place at load; the functions' ops use them when they are built, without repacking).
  uint64_t adopted_constants = 0;
  /// On a hit: the functions of the artifact that the load did not build (all but those named
  /// in `CompileOptions::build_on_hit`). Each is built (plan derived, kernels created) on its
  /// first use through a session and checked then against the artifact's plan fingerprint
  /// (see `LoadedModel::bind`). 0 otherwise: a miss builds every static function at load.
  uint64_t deferred_functions = 0;
  /// Why a hit was not used or a store failed (the load itself succeeded).
  std::vector<std::string> warnings;
  /// On a miss with `CompileOptions::store_in_background`: the artifact is being written by a
  /// background job (`wait_for_background_stores`); its problems are not in `warnings`.
  bool stored_in_background = false;
};

/// How many per-shape plans a function of symbolic inputs that has a shape-generic plan gets
/// without `expect_frequent_reshapes` (its first shape's, then those of shapes run twice; every
/// other shape runs on the generic plan: see `LoadedModel::bind`), and how many per-shape cache
/// entries a function stores in a loaded model. Trade-off: the generic plan runs a GPT prefill
/// 1.0-1.2x and a decode step about 1.3x as long as a plan specialized for the shape, but builds
/// nothing per new shape.
inline constexpr size_t kShapePlansBeforeGeneric = 4;
/// How many per-shape plans a loaded model keeps for a function of symbolic inputs without a
/// shape-generic plan (an LSTM, GRU or RNN; a Conv or ConvTranspose without
/// `expect_frequent_reshapes`): beyond, the least recently used
/// is let go (see `LoadedModel::bind`). Trade-off: a process cycling through more shapes than
/// this builds plans again (an OCR detector: about 5 ms a call, oneDNN's kernels coming from its
/// primitive cache); more keep more memory (each plan holds its kernels and packings; their
/// activations share the model's arenas, one per thread running at once, as large as the
/// largest plan's: 8.5 MB for the detector at 320 x 320).
inline constexpr size_t kShapePlansKept = 16;

/// The engine's version, as cache keys record it: the engine's plan version, its build
/// fingerprint and its CPU kernel provider (a build of other code, or another version of
/// oneDNN, never reads entries of the other).
std::string engine_version();

/// A hash of the engine's and kernels' sources this library was built from (16 hex digits;
/// tests and benchmarks aside): builds of different code have different fingerprints even
/// when their versions are equal, so neither adopts the other's cache entries or compiled
/// artifacts.
std::string_view engine_build_fingerprint();

/// A model loaded for one `SpecializationOptions`: its functions, specialized per input shapes
/// on first use (functions whose inputs are all static are specialized at load, or on a cache
/// hit on their first use).
///
/// Lifetime: the `ir::Model` (or the package bytes) passed to `ModelLoader::load` must outlive
/// the loaded model and every session; weights are referenced, never copied. Thread-safety:
/// every method is safe from several threads.
class LoadedModel : public std::enable_shared_from_this<LoadedModel> {
 public:
  /// Binds `function` to `input_sizes` (one per function input).
  ///
  /// Without `expect_frequent_reshapes`, a function of symbolic inputs gets a plan of its own
  /// for its first shape. A second shape shows that the shapes change: a function that has a
  /// shape-generic plan (below) builds it then, and runs the first call of each new shape on it;
  /// a shape's second run gets a plan of its own (a tier up: the bind's session switches to
  /// it), until the function has `kShapePlansBeforeGeneric`; then every other shape stays on
  /// the generic plan. So a decoder's loop, whose past grows by one position a call, compiles
  /// nothing per step, and a shape called again and again still runs on a plan made for it.
  /// Unless that generic plan would leave floating-point work other than moving
  /// data on the reference kernels (an Erf, say: `loader_detail::generic_plan_runs_fast`), in
  /// which case the function gets a plan for each new shape as one without a generic plan does
  /// (a Conv, ConvTranspose, LSTM, GRU or RNN): beyond `kShapePlansKept` shapes, the model lets go
  /// of the plan of its least recently used shape (bound or run longest ago); its memory is freed
  /// once no session holds it, and a later bind of that shape builds it again. So a model fed ever
  /// new shapes (a decoder's growing past, texts of every length) keeps a bounded number of
  /// plans and, where it can, stops compiling per call.
  ///
  /// With `expect_frequent_reshapes`
  /// in the options, a function of symbolic inputs without an LSTM, GRU or RNN (kept per shape:
  /// no run-time-shape kernels; nor a Conv or ConvTranspose but 2-D ones of a weight, and those
  /// only where kiln's loops run: `compile::ShapedOp`) has one shape-generic plan for every
  /// shape (`compile::specialize_generic`), built on its first bind (or by `prepare`): binding a
  /// new shape then builds nothing, and only checks that the shape fits the input types. A function
  /// and shapes recorded
  /// in the cache entry the load adopted (a hit) is bound lazily: the session is returned at
  /// once and the function is built on its first use, from the adopted packed weights (nothing
  /// is repacked). Its plan is then checked against the artifact's fingerprint; a plan that
  /// differs is still used (packed weights are found by their layouts, so any weight the new
  /// plan needs in another layout is packed then) and a warning goes to `build_warnings()`.
  /// Other functions and shapes are specialized here the first time they are seen; the result
  /// is kept for later binds. With a cache at the load, a function of symbolic inputs
  /// specialized here for some shapes gets an artifact of its own (key: the package, the
  /// function and those shapes, the options), stored after it is specialized (in the
  /// background with `CompileOptions::store_in_background`; only for the first
  /// `kShapePlansBeforeGeneric` shapes the loaded model specializes for the function, so that a
  /// process fed ever new shapes does not write an entry per call; a shape-generic plan gets
  /// one too, keyed without shapes); the next process that binds the
  /// same function and shapes adopts its packed weights instead of packing them (what a
  /// Winograd Conv's weight transform costs), and builds only the plan and kernels. Errors (at
  /// bind, or for a lazy session at its first use): as `compile::specialize` (NotFound for an
  /// unknown function, InvalidArgument naming an input whose shape does not fit, NotSupported
  /// naming a node the engine cannot compile).
  runtime::Result<Session> bind(std::string_view function,
                                const std::vector<std::vector<int64_t>>& input_sizes);

  /// With `expect_frequent_reshapes` in the options and `function` of symbolic inputs (with a
  /// shape-generic plan: see `bind`): builds
  /// the function's shape-generic plan now (`compile::specialize_generic`), the one every
  /// `bind` of it then shares whatever the shapes, so no call pays for building it. Otherwise
  /// does nothing. Errors: NotFound for an unknown function; as `compile::specialize_generic`.
  runtime::Status prepare(std::string_view function);

  /// Where each step of each function built so far runs (node, op, device, fused nodes),
  /// ordered by function name then shapes. A lazily bound function appears once built.
  std::vector<FunctionPlacement> placement() const;

  const specialization::SpecializationOptions& options() const { return options_; }
  /// The model's function names, in model order.
  std::vector<std::string> function_names() const;
  /// What the load did (cache state, weights packed or adopted). Fixed once the load returns.
  const LoadReport& load_report() const { return report_; }
  /// How many functions-and-shapes are built so far (at load, by `bind`, or by a lazy
  /// session's first use).
  size_t num_built() const;
  /// How many functions-and-shapes have an entry: built, or bound and not built yet (a lazy
  /// or deferred session's).
  size_t num_bound() const;
  /// Warnings raised while building lazily bound functions since the load (a plan that does not
  /// match the artifact's fingerprint), in order.
  std::vector<std::string> build_warnings() const;
  /// Functions of symbolic inputs specialized after the load whose shapes' artifact came from
  /// the cache (`shape_cache_hits`), or was stored (or is being stored in the background) for
  /// the next process (`shape_cache_stores`). See `bind`.
  uint64_t shape_cache_hits() const { return shape_hits_.load(); }
  uint64_t shape_cache_stores() const { return shape_stores_.load(); }
  /// The packed weights of every function and shape bound so far.
  const cpu::PackedConstants& packed_constants() const { return *compile_.packed; }

 private:
  friend class ModelLoader;
  friend class Session;
  LoadedModel(const ir::Model& model, specialization::SpecializationOptions options,
              compile::CompileOptions compile)
      : model_(model), options_(std::move(options)), compile_(std::move(compile)) {}

  using Key = std::pair<std::string, std::vector<std::vector<int64_t>>>;
  /// The entry of `key`, made when absent (under `mutex_`).
  std::shared_ptr<BoundFunction> entry(const Key& key, bool generic);
  /// The entry of `key` (a function of symbolic inputs bound to shapes, no generic plan asked
  /// for), made when absent: beyond `kShapePlansBeforeGeneric` per function, the function's
  /// generic plan when `generic_fallback`; else beyond `kShapePlansKept`, a new entry and the
  /// least recently used one of the function dropped (see `bind`).
  std::shared_ptr<BoundFunction> shape_entry(const Key& key, bool generic_fallback);
  /// The generic entry of `function`, made when absent (under `mutex_`).
  std::shared_ptr<BoundFunction> generic_entry(const std::string& function);
  /// Drops `bound` from the entries (under `mutex_`) if it is still the one of its key, and
  /// unbuilt unless `built_too`.
  void forget(const BoundFunction& bound, bool built_too);
  /// Whether deferred `bound` gets a plan of its own: once per entry, while its function has
  /// fewer than `kShapePlansBeforeGeneric`; else it is `settled` on the generic plan.
  bool claim_shape_plan(BoundFunction& bound) const;
  /// A deferred entry past its first run: its own plan, built now when claimed, or the generic.
  runtime::Result<compile::CompiledFunction*> tier_up(BoundFunction& bound) const;
  /// Marks `bound` as used now (the order `shape_entry` drops plans in).
  void touch(BoundFunction& bound) const;
  /// Whether a shape artifact of `function` may be stored: true for its first
  /// `kShapePlansBeforeGeneric` stores in this loaded model.
  bool claim_shape_store(const std::string& function) const;
  /// Builds `bound` unless it is built; serialized per function and shapes.
  runtime::Result<compile::CompiledFunction*> build(BoundFunction& bound) const;
  /// Specializes a function of symbolic inputs bound after the load for its shapes (or its
  /// shape-generic plan, for a generic `bound`), through the cache when the load had one: a
  /// stored artifact of this function and shapes (or of its generic plan: no shapes in the key)
  /// gives its packed weights (adopted, not packed again); else the artifact is stored after.
  runtime::Result<std::unique_ptr<compile::CompiledFunction>> specialize_shape(
      const BoundFunction& bound) const;
  /// Stores the artifact of `record` under `key` (in the background when the options say so):
  /// its plan and every packing of the model so far.
  void store_shape(const cache::CacheKey& key, const artifact::FunctionRecord& record) const;

  const ir::Model& model_;
  specialization::SpecializationOptions options_;
  compile::CompileOptions compile_;
  /// The arenas of the per-shape plans of functions of symbolic inputs (`specialize_shape`).
  std::shared_ptr<compile::ArenaPool> arena_pool_ = std::make_shared<compile::ArenaPool>();
  LoadReport report_;
  /// The load's cache (empty `cache_dir_`: none) and package hash, for the artifacts of
  /// functions of symbolic inputs specialized after the load, one per function and shapes.
  std::string cache_dir_;
  cache::CacheOptions cache_options_;
  uint64_t model_hash_ = 0;
  mutable std::atomic<uint64_t> shape_hits_{0}, shape_stores_{0};
  mutable std::mutex mutex_;  // guards bound_, shape_stores_of_ and slow_generic_
  std::map<Key, std::shared_ptr<BoundFunction>> bound_;
  /// Functions whose generic plan would run slower than per-shape plans
  /// (`loader_detail::generic_plan_runs_fast`): the default options keep per-shape plans.
  std::set<std::string> slow_generic_;
  mutable std::map<std::string, size_t> shape_stores_of_;  // per function
  mutable std::atomic<uint64_t> use_clock_{0};             // for BoundFunction::last_used
  mutable std::mutex warnings_mutex_;
  mutable std::vector<std::string> build_warnings_;
};

/// Loads models for the CPU device (DESIGN.md §4).
class ModelLoader {
 public:
  /// Loads `model` for `options`: checks that the options allow the CPU and specializes every
  /// function whose inputs all have static shapes (on a cache hit: on first use, below), so
  /// their first `bind` is immediate. All
  /// functions and shapes of the result share one store of packed weights.
  ///
  /// With a `cache` (non-null, non-empty directory) the static functions' compiled artifact
  /// is looked up under a `cache::CacheKey` of the model's package hash, those functions and
  /// shapes, the options' identifier (plus ";fuse=0" when fusion is off, and ";threads=N" with
  /// the intra-op threads `compile.num_threads` gives: plans differ by it), `engine_version()`
  /// and `specialization::cpu_features()`. A hit adopts the artifact's packed weights in place
  /// (mapped, not copied or repacked) and builds no function: each is built on its first use
  /// (see `LoadedModel::bind`), so a warm load does not grow with the number of functions, and
  /// the first run of each function pays for its plan and kernels instead; functions named in
  /// `compile.build_on_hit` are built during the load, while a second thread checks the
  /// entry's payload checksum (a payload that fails is a corrupt entry: removed, and the load
  /// goes on as a miss). A miss, or an
  /// artifact whose functions and shapes are not the model's static ones, specializes every
  /// static function here and stores a new artifact. Cache problems never fail a load: they become
  /// warnings in `load_report()`. `model` must outlive the result. Errors: NotSupported naming the
  /// options' identifier when they do not allow the CPU; any error of specializing a static
  /// function (see `compile::specialize`).
  static runtime::Result<std::shared_ptr<LoadedModel>> load(
      const ir::Model& model, const specialization::SpecializationOptions& options,
      cache::ModelCache* cache = nullptr, const compile::CompileOptions& compile = {});

  /// Same, for a verified package: weights are read in place from the package bytes, which
  /// (with `package`) must outlive the result.
  static runtime::Result<std::shared_ptr<LoadedModel>> load(
      const package::PackageView& package, const specialization::SpecializationOptions& options,
      cache::ModelCache* cache = nullptr, const compile::CompileOptions& compile = {});

  /// The key under which `load(package, options, cache, compile)` looks up and stores the
  /// compiled artifact of the package's static functions (see `load`). Computes, compiles
  /// nothing. Errors: NotSupported when no function of the package has only static inputs (such
  /// a model is never cached: its load reports "off").
  static runtime::Result<cache::CacheKey> cache_key(
      const package::PackageView& package, const specialization::SpecializationOptions& options,
      const compile::CompileOptions& compile = {});

  /// Specializes the package's static functions for `options` and returns the whole cache entry
  /// file (header with `cache_key(package, options, compile)`, artifact payload, checksums) that
  /// a cache miss of `load` with the same arguments stores, byte for byte. Meant for
  /// ahead-of-time compilation: a program embeds it, and `cache::ModelCache::store_entry`
  /// installs it on a device whose engine version and CPU features match, so the next `load`
  /// there is a hit that packs nothing. The entry records this machine's
  /// `specialization::cpu_features()`; elsewhere its key differs and it is not used.
  /// `compile.packed` is ignored (a fresh store, so the entry holds this model's packings only).
  /// Errors: as `cache_key`; as `load` (options without the CPU, a function that fails to
  /// specialize).
  static runtime::Result<std::vector<uint8_t>> compile_artifact(
      const package::PackageView& package, const specialization::SpecializationOptions& options,
      const compile::CompileOptions& compile = {});

 private:
  static runtime::Result<std::shared_ptr<LoadedModel>> load_with_hash(
      const ir::Model& model, const specialization::SpecializationOptions& options,
      cache::ModelCache* cache, uint64_t model_hash, const compile::CompileOptions& compile);
};

}  // namespace kiln::engine
