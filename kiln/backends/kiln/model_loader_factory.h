#pragma once

#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/engine/package/package.h>
#include <kiln/engine/specialization/specialization_options.h>
#include <kiln/runtime/core/result.h>

#include <functional>
#include <memory>
#include <string>

namespace kiln::backends {

/// What a KilnBackend delegate asks for when it loads its model (DESIGN.md §3 "Init"): the
/// options it was initialized with, already validated and mapped to the engine's terms.
/// The package view is the delegate's; it outlives the loaded model (the delegate destroys the
/// model first).
struct ModelLoadRequest {
  /// The verified model package the delegate opened from the program's named data.
  const engine::package::PackageView& package;
  /// The `compute_unit` option as given (or its default, "all").
  std::string compute_unit;
  /// The `expect_frequent_reshapes` option as given (or its default, false).
  bool expect_frequent_reshapes = false;
  /// `compute_unit` and `expect_frequent_reshapes` mapped by
  /// `SpecializationOptions::from_compute_unit`.
  engine::specialization::SpecializationOptions options;
  /// How to compile (`num_threads` from the option).
  engine::compile::CompileOptions compile;
  /// The `cache_dir` option (or its default); empty: no persistence.
  std::string cache_dir;
};

/// Makes the loaded model of one delegate. Errors are returned to `init`, which fails with them
/// (with the delegate named).
using ModelLoaderFactory =
    std::function<runtime::Result<std::shared_ptr<engine::LoadedModel>>(const ModelLoadRequest&)>;

/// The default factory: `engine::ModelLoader::load(request.package, request.options, &cache,
/// request.compile)` with a `engine::cache::ModelCache` at `request.cache_dir` (none when it is
/// empty). Errors: as `ModelLoader::load`. Test factories may call it to get a real model.
runtime::Result<std::shared_ptr<engine::LoadedModel>> default_model_loader(
    const ModelLoadRequest& request);

/// Test seam: replaces, for every KilnBackend init of the process from now on, the factory
/// that makes the loaded model (an empty function restores the default). Meant for tests that
/// check what reaches the loader or inject a load failure; production code has no reason to
/// call it. Thread-safety: guarded by a mutex; an init takes a copy of the factory under the
/// mutex and calls it outside, so a replacement does not affect loads already running, and
/// concurrent inits may call the factory concurrently.
void set_model_loader_factory(ModelLoaderFactory factory);

/// Restores `default_model_loader` as the factory. Thread-safety: as `set_model_loader_factory`.
void reset_model_loader_factory();

/// Loads through the current factory (what KilnBackend's init calls). Errors: the factory's;
/// Internal when a replaced factory returns no model and no error.
runtime::Result<std::shared_ptr<engine::LoadedModel>> load_through_factory(
    const ModelLoadRequest& request);

}  // namespace kiln::backends
