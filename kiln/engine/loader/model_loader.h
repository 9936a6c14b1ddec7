#pragma once

#include <kiln/engine/cache/cache_key.h>
#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/cpu/packed_constants.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/specialization/specialization_options.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine::cache {
class ModelCache;
}
namespace kiln::engine::package {
class PackageView;
}

namespace kiln::engine {

class LoadedModel;

/// One function of a loaded model bound to one set of input shapes: what a caller runs.
/// Sessions bound to the same function and shapes share one compiled function (and its
/// pre-packed weights); their runs are serialized by it. The session keeps its model alive.
/// Thread-safety: `run` may be called from several threads (calls are serialized).
class Session {
 public:
  /// Runs the function; see `compile::CompiledFunction::run` for the contract. Errors:
  /// InvalidArgument naming the input or output whose count, dtype or shape is wrong (the
  /// shape given and the one bound); a kernel's error with the node named.
  runtime::Status run(runtime::Span<const runtime::Tensor* const> inputs,
                      runtime::Span<runtime::Tensor* const> outputs) {
    return function_->run(inputs, outputs);
  }
  /// Same, letting the caller grow each output first (see `CompiledFunction::run`).
  runtime::Status run(runtime::Span<const runtime::Tensor* const> inputs,
                      runtime::Span<runtime::Tensor* const> outputs,
                      const compile::CompiledFunction::OutputResizer& resize_output) {
    return function_->run(inputs, outputs, resize_output);
  }
  const compile::CompiledFunction& function() const { return *function_; }

 private:
  friend class LoadedModel;
  Session(std::shared_ptr<const LoadedModel> model,
          std::shared_ptr<compile::CompiledFunction> function)
      : model_(std::move(model)), function_(std::move(function)) {}

  std::shared_ptr<const LoadedModel> model_;
  std::shared_ptr<compile::CompiledFunction> function_;
};

/// Where the steps of one bound function run.
struct FunctionPlacement {
  std::string function;
  std::vector<std::vector<int64_t>> input_sizes;
  std::vector<compile::PlacementEntry> steps;
};

/// What a load did about the cache and the packed weights.
struct LoadReport {
  /// "hit": the compiled artifact came from the cache and its packed weights were used in
  /// place; "miss": the model was specialized and (unless a warning says otherwise) stored;
  /// "off": no cache (none given, or its directory is empty), or no function of the model has
  /// static inputs (functions are then specialized on first use of each shape, uncached).
  std::string cache = "off";
  std::string cache_entry;         ///< The entry's file on a hit; empty otherwise.
  uint64_t packed_constants = 0;   ///< Weights packed (reordered) during the load.
  uint64_t adopted_constants = 0;  ///< Weights taken packed from the artifact.
  /// Why a hit was not used or a store failed (the load itself succeeded).
  std::vector<std::string> warnings;
};

/// The engine's version, as cache keys record it: the engine and its CPU kernel provider
/// (a new version of either never reads entries of the other).
std::string engine_version();

/// A model loaded for one `SpecializationOptions`: its functions, specialized per input shapes
/// on first use (functions whose inputs are all static are specialized at load).
///
/// Lifetime: the `ir::Model` (or the package bytes) passed to `ModelLoader::load` must outlive
/// the loaded model and every session; weights are referenced, never copied. Thread-safety:
/// `bind` and `placement` are safe from several threads.
class LoadedModel : public std::enable_shared_from_this<LoadedModel> {
 public:
  /// Binds `function` to `input_sizes` (one per function input), specializing it the first
  /// time these shapes are seen and keeping the result for later binds. Errors: as
  /// `compile::specialize` (NotFound for an unknown function, InvalidArgument naming an input
  /// whose shape does not fit, NotSupported naming a node the engine cannot compile).
  runtime::Result<Session> bind(std::string_view function,
                                const std::vector<std::vector<int64_t>>& input_sizes);

  /// Where each step of each function specialized so far runs (node, op, device, fused nodes),
  /// ordered by function name then shapes.
  std::vector<FunctionPlacement> placement() const;

  const specialization::SpecializationOptions& options() const { return options_; }
  /// The model's function names, in model order.
  std::vector<std::string> function_names() const;
  /// What the load did (cache state, weights packed or adopted).
  const LoadReport& load_report() const { return report_; }
  /// The packed weights of every function and shape bound so far.
  const cpu::PackedConstants& packed_constants() const { return *compile_.packed; }

 private:
  friend class ModelLoader;
  LoadedModel(const ir::Model& model, specialization::SpecializationOptions options,
              compile::CompileOptions compile)
      : model_(model), options_(std::move(options)), compile_(std::move(compile)) {}

  using Key = std::pair<std::string, std::vector<std::vector<int64_t>>>;
  const ir::Model& model_;
  specialization::SpecializationOptions options_;
  compile::CompileOptions compile_;
  LoadReport report_;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<compile::CompiledFunction>> compiled_;
};

/// Loads models for the CPU device (DESIGN.md §4).
class ModelLoader {
 public:
  /// Loads `model` for `options`: checks that the options allow the CPU and specializes every
  /// function whose inputs all have static shapes, so their first `bind` is immediate. All
  /// functions and shapes of the result share one store of packed weights.
  ///
  /// With a `cache` (non-null, non-empty directory) the static functions' compiled artifact
  /// is looked up under a `cache::CacheKey` of the model's package hash, those functions and
  /// shapes, the options' identifier (plus ";fuse=0" when fusion is off), `engine_version()`
  /// and `specialization::cpu_features()`. A hit adopts the artifact's packed weights in place
  /// (mapped, not copied or repacked) and derives the plans again, checking them against the
  /// artifact's fingerprints; a miss, or an artifact that does not match, specializes and
  /// stores a new artifact. Cache problems never fail a load: they become warnings in
  /// `load_report()`. `model` must outlive the result. Errors: NotSupported naming the
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
