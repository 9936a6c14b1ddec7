#pragma once

#include <kiln/runtime/backend/interface.h>

#include <string>
#include <string_view>
#include <vector>

namespace kiln::engine {
class LoadedModel;
}

namespace kiln::backends {

/// The id KilnBackend is registered under (in the shared `kiln` library, at static init).
inline constexpr std::string_view kKilnBackendId = "KilnBackend";

/// KilnBackend's load-time option keys (DESIGN.md §3). Each is optional:
///
/// - `compute_unit` (string, default `all`): `all`, `cpu_only`, `cpu_and_gpu`, `prefer_cpu`,
///   `prefer_gpu`: the compute unit kinds a specialization may use and the one it prefers.
///   Every value gets its own specialization. Takes effect at init. Only the CPU is placed on
///   today, so a value that excludes it fails init.
/// - `expect_frequent_reshapes` (bool, default false, or the delegate's compile spec of the same
///   name when the program was exported with one): the inputs' shapes change between calls.
///   A function of symbolic inputs then gets one shape-generic plan, built at init
///   (`engine::LoadedModel::prepare`), that runs every shape: a new shape costs no compilation
///   (GPT prefill at 1 thread: a new sequence length's first call takes its usual time instead
///   of about 10 ms more). Its MatMuls, row and element-wise ops run on kiln's run-time-shape
///   loops, its Convs, ConvTransposes, pools, Resizes and Concats on kiln's loops made for each
///   shape met (no code generated: `engine::compile::ShapedOp`, where the CPU has AVX-512), the
///   rest on the reference kernels; a call costs about what it costs on a plan compiled for its
///   shape (GPT prefill 1.0-1.2 x, the OCR detector 1.0 x). Functions of static inputs
///   (enumerated ones included), and functions with an LSTM, GRU or RNN (no run-time-shape form
///   of them; their reference kernels are 10-50x slower), are compiled per shape as without
///   it. Takes effect at init (part of the specialization
///   identifier). Given at load time, it overrides the export-time value.
/// - `share_multifunction_model` (bool, default false): delegates of the process (across methods
///   and modules) that load the same package (by content hash) with the same specialization and
///   `cache_dir` share one loaded model: one copy of the packed weights and one specialization
///   per function and shape. Only delegates with the option on share; one with it off always
///   loads its own. Trade-off: less memory and load time, but runs of the same function and
///   shapes from different delegates are serialized, and the model keeps the `num_threads` of
///   the delegate that loaded it. Takes effect at init (a second init waits for a load of the
///   same key in flight). See `shared_models.h`.
/// - `cache_dir` (string, default `$KILN_CACHE_DIR`, else `$XDG_CACHE_HOME/kiln`, else
///   `~/.cache/kiln`; empty: no persistence): where specializations persist. Init looks the
///   compiled artifact of the model's static functions up there (a hit maps the pre-packed
///   weights instead of packing them) and stores it after a miss, on a background thread: init
///   returns once the model is specialized, and the write finishes before the process exits
///   normally (`engine::wait_for_background_stores` waits for it sooner). A directory that
///   cannot be written leaves the load uncached (in the cache's warnings), never failed.
/// - `num_threads` (int 1..1024, default: the cores available): intra-op threads of the
///   engine's oneDNN ops. Trade-off: more threads cut latency until they contend with other
///   work. Takes effect at init.
/// - `winograd` (bool, default true): 3x3 stride-1 Convs run on Winograd kernels where oneDNN
///   has them (`engine::compile::CompileOptions::winograd`). Trade-off: such Convs take 1.2-2.4x
///   less time, with more rounding (relative differences around 1e-5); false gives the direct
///   kernels. Takes effect at init (a separate cache entry).
///
/// `KilnBackendOptions` (`kiln_backend_options.h`) sets them with typed setters.
///
/// Besides these load-time options, a delegate may carry export-time compile specs
/// (`compile_specs.h`): `expect_frequent_reshapes` ("true"/"false", the default of the option
/// above) and `aot_artifact` (the named-data key of a compiled artifact made at export time,
/// installed into `cache_dir` at init when it matches, so the first load compiles nothing).
inline constexpr std::string_view kComputeUnitKey = "compute_unit";
inline constexpr std::string_view kExpectFrequentReshapesKey = "expect_frequent_reshapes";
inline constexpr std::string_view kShareMultifunctionModelKey = "share_multifunction_model";
inline constexpr std::string_view kCacheDirKey = "cache_dir";
inline constexpr std::string_view kNumThreadsKey = "num_threads";
inline constexpr std::string_view kWinogradKey = "winograd";

/// The settings one delegate was initialized with: the options given, defaults filling the rest.
struct KilnBackendConfig {
  std::string compute_unit = "all";
  bool expect_frequent_reshapes = false;
  bool share_multifunction_model = false;
  std::string cache_dir;
  int num_threads = 1;
  bool winograd = true;
  /// The `aot_artifact` compile spec (a named-data key); empty when the delegate has none.
  std::string aot_artifact;
};

/// The default `cache_dir` from the environment (see the option), "" when no home is known.
std::string default_cache_dir();

/// What the KilnBackend inits of this process did with the cache, for tools (`kiln bench`
/// reports a load as "hit", "miss" or "off" from the difference across it).
struct KilnLoadCounters {
  uint64_t cache_hits = 0;    ///< inits whose compiled artifact came from the cache
  uint64_t cache_misses = 0;  ///< inits that specialized and stored (or tried to)
  uint64_t uncached = 0;      ///< inits with an empty `cache_dir`
  uint64_t aot = 0;           ///< inits that installed their `aot_artifact` into the cache
  uint64_t warnings = 0;      ///< cache problems met (entries not used, stores that failed)
  std::vector<std::string> recent_warnings;  ///< the last 16, oldest first
};
KilnLoadCounters kiln_load_counters();

/// The compiling backend (DESIGN.md §3): runs a delegate's model package on the engine.
///
/// The delegate blob is a JSON manifest (see `manifest.h`) naming a model package stored in the
/// program's named data and either one function to run or, in the enumerated form, a list of
/// static functions with the input shapes each one takes. `init` validates the options and the
/// manifest, opens the package in place (no weight copies; the package bytes stay alive with
/// the handle), installs the delegate's embedded compiled artifact into the cache when it has
/// one (`aot_artifact` compile spec) and it matches, loads the package for the options'
/// specialization through the model loader factory
/// (`model_loader_factory.h`; by default `engine::ModelLoader` with the cache) and binds a
/// session for each function and shapes known at init (every enumerated function; the one
/// function when its inputs are static). `execute` checks the arguments' count, dtype and rank,
/// picks the session bound to the inputs' shapes (one map lookup; a function with symbolic
/// inputs is bound on first use of each shape and kept), runs it and resizes the outputs
/// through the method.
///
/// Thread-safety: the backend object is stateless and shared; one handle serializes its own
/// executions with a lock.
class KilnBackend : public runtime::BackendInterface {
 public:
  bool is_available() const override { return true; }
  std::vector<runtime::OptionSpec> option_specs() const override;
  /// Errors: InvalidArgument naming the option (wrong type, unknown key, value out of range), the
  /// compile spec (unknown key, listing the known ones; a value not accepted, with the value and
  /// what is expected; see `parse_compile_specs`), or the manifest field (see `parse_manifest`;
  /// also an unknown package key, a function absent from the package, input or output names that
  /// differ from the function's; for an enumerated function, listed shapes that contradict its
  /// inputs' ranks or static dims, naming the function and input, or dtypes that differ from the
  /// first function's); NotSupported for options that exclude the CPU; the engine's errors when the
  /// package is invalid or a function fails to specialize or bind, naming the function and shapes;
  /// NotFound naming the named-data key of the `aot_artifact` compile spec when the program lacks
  /// it. An embedded artifact that does not match never fails init (a warning in
  /// `kiln_load_counters`). A failed init keeps nothing (an artifact already installed into the
  /// cache stays: it is a valid entry).
  runtime::Result<runtime::DelegateHandle*> init(
      runtime::BackendInitContext& context, runtime::FreeableBuffer* processed,
      runtime::Span<const runtime::CompileSpec> compile_specs) const override;
  /// Errors: InvalidArgument naming the argument whose count, kind, dtype or rank is wrong, or,
  /// when no bound function takes the inputs' shapes, naming the shapes received and those
  /// accepted (nothing runs); the engine's errors with the function named.
  runtime::Status execute(runtime::BackendExecutionContext& context,
                          runtime::DelegateHandle* handle,
                          runtime::Span<runtime::EValue* const> inputs,
                          runtime::Span<runtime::EValue* const> outputs) const override;
  void destroy(runtime::DelegateHandle* handle) const override;

  /// The settings a handle from `init` was made with (for tools and tests).
  static const KilnBackendConfig& config_of(const runtime::DelegateHandle* handle);
  /// The input shapes `execute` accepts on a handle from `init`, one `Shapes` (a shape per input,
  /// in `input_names` order) per accepted call: for the enumerated manifest form, each listed
  /// function's `input_shapes` in manifest order; for a function with static inputs, its one set;
  /// for a function with symbolic inputs, an empty list (any shapes of the right ranks). Fixed at
  /// init, so safe to call concurrently with `execute`.
  static std::vector<std::vector<std::vector<int64_t>>> accepted_input_shapes(
      const runtime::DelegateHandle* handle);
  /// The loaded model a handle from `init` runs on; handles sharing a model return the same
  /// pointer (for tools and tests). Valid while the handle lives.
  static const engine::LoadedModel* model_of(const runtime::DelegateHandle* handle);
};

}  // namespace kiln::backends
