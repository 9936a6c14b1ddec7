#pragma once

#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/package/package.h>
#include <kiln/engine/specialization/specialization_options.h>
#include <kiln/runtime/backend/interface.h>
#include <kiln/runtime/core/result.h>

#include <optional>
#include <string>
#include <string_view>

namespace kiln::backends {

/// KilnBackend's compile specs: export-time settings stored with a delegate in the program
/// (DESIGN.md §5 `--expect-frequent-reshapes`, `--aot`). Values are raw bytes:
///
/// - `expect_frequent_reshapes` ("true" or "false"): the export-time default of the load-time
///   option of the same name, which overrides it when given.
/// - `aot_artifact` (a named-data key of the program, UTF-8): a compiled artifact made at export
///   time by `engine::ModelLoader::compile_artifact` (a whole cache entry file). At init, when
///   the cache (`cache_dir`) has no entry for the delegate's key, the artifact is installed
///   there if it is exactly that key's entry (same package, functions, shapes, specialization
///   identifier, engine version and CPU features), so the load that follows is a hit and packs
///   nothing. An artifact that does not match (made for other options or another CPU, or
///   corrupt) is skipped with a warning (`kiln_load_counters`) and the model is compiled as
///   usual; with an empty `cache_dir` it is not used either (noted the same way).
inline constexpr std::string_view kExpectFrequentReshapesSpec = "expect_frequent_reshapes";
inline constexpr std::string_view kAotArtifactSpec = "aot_artifact";

/// A delegate's compile specs, parsed.
struct KilnCompileSpecs {
  /// `expect_frequent_reshapes`, when given.
  std::optional<bool> expect_frequent_reshapes;
  /// `aot_artifact`: the named-data key of the embedded artifact; empty when not given.
  std::string aot_artifact;
};

/// Parses `specs`. Errors: InvalidArgument naming the compile spec for an unknown key (listing
/// the known ones, with a did-you-mean), a key given twice, an `expect_frequent_reshapes` value
/// other than "true" or "false", or an empty `aot_artifact`.
runtime::Result<KilnCompileSpecs> parse_compile_specs(
    runtime::Span<const runtime::CompileSpec> specs);

/// What installing an embedded artifact did: `installed` when it was stored into the cache;
/// otherwise `warning` says why it was not used (empty when the cache already held the entry).
struct AotInstallResult {
  bool installed = false;
  std::string warning;
};

/// Installs `artifact` (the bytes stored under the named-data key `name`) into the cache at
/// `cache_dir` as the entry `engine::ModelLoader::load(package, options, cache, compile)` will
/// look up, unless the cache already holds that entry. Never fails: an artifact that cannot be
/// used (no static function, empty `cache_dir`, other key, corrupt bytes, a store that failed)
/// gives a warning naming `name` and the reason.
AotInstallResult install_aot_artifact(const std::string& name,
                                      runtime::Span<const uint8_t> artifact,
                                      const engine::package::PackageView& package,
                                      const engine::specialization::SpecializationOptions& options,
                                      const engine::compile::CompileOptions& compile,
                                      const std::string& cache_dir);

}  // namespace kiln::backends
