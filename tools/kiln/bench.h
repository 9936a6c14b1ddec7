#pragma once

#include <kiln/engine/compile/step_profile.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/executor/method_meta.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tools {

/// What `kiln bench` measures, as given by its flags.
struct BenchArgs {
  /// The .kiln program.
  std::string program;
  /// The method to measure; empty: "forward", or the program's only method.
  std::string method;
  /// `NAME=FILE.npy` per input read from a file; the other inputs get seeded random data. An
  /// input given several times (say N files) makes N input sets, cycled through by the runs:
  /// run k uses each such input's (k mod N)-th file (inputs given once are in every set), so
  /// the calls change shape the way a model with frequent reshapes sees them.
  std::vector<std::string> inputs;
  /// `BACKEND.KEY=VALUE` load-time backend options.
  std::vector<std::string> options;
  /// Intra-op threads, passed as `KilnBackend.num_threads` when the method has a KilnBackend
  /// delegate. Unset: the backend's default.
  std::optional<int64_t> threads;
  /// Untimed runs after the first run.
  int64_t warmup = 3;
  /// Timed runs, after the warm-up.
  int64_t runs = 10;
  /// Milliseconds to sleep before each timed run (untimed): an application that calls the
  /// model now and then, whose idle threads have gone to sleep between calls. 0: back to back.
  int64_t pause_ms = 0;
  /// Seed of the random inputs.
  uint64_t seed = 0;
  /// Loads of the method after the first, each by a new Module of the same program in this
  /// process (timed, then released), before the first run: what a process that has already
  /// loaded the model pays to load it again. KilnBackend delegates load them unshared
  /// (`share_multifunction_model=false`), so each is a whole load (from the cache when
  /// `cache_dir` holds its specialization), not a reuse of the first load's model.
  int64_t later_loads = 0;
  /// Print one JSON object instead of text.
  bool json = false;
  /// Time every engine step of the timed runs (`engine::profiling`).
  bool profile = false;
};

/// Adds the positional program and the flags of `kiln bench` to `app`, storing into `args`,
/// which must outlive `app.parse`. CLI11 rejects out-of-range values while parsing (a
/// `CLI::ValidationError` naming the flag): --threads 1..256, --warmup 0.., --runs 1..,
/// --pause-ms 0..60000.
void add_bench_flags(CLI::App& app, BenchArgs& args);

/// Statistics of the timed runs, in milliseconds.
struct LatencyStats {
  double median = 0;  ///< The middle sample; the mean of the two middle ones for an even count.
  double p90 = 0;     ///< Nearest rank: the smallest sample with at least 90% of them <= it.
  double min = 0;
  double mean = 0;
};

/// The statistics of `samples_ms`. Errors: InvalidArgument when it is empty.
runtime::Result<LatencyStats> latency_stats(std::vector<double> samples_ms);

/// How the thread count reached the backends.
struct ThreadPlan {
  /// The intra-op thread count of the run: --threads, else a `KilnBackend.num_threads` option,
  /// else the KilnBackend default (the cores available) when the method has such a delegate,
  /// else 1 (the portable kernels run on the calling thread).
  int64_t threads = 1;
  /// True when a KilnBackend delegate receives `num_threads`; false when no delegate takes it
  /// (then `threads` is recorded only).
  bool applied = false;
};

/// Parses `args.options` into the load-time map and adds `KilnBackend.num_threads` from
/// `args.threads` when `meta` has a KilnBackend delegate. Errors: those of
/// `parse_option_args`; InvalidArgument when --threads and `--option KilnBackend.num_threads`
/// are both given.
runtime::Result<runtime::LoadBackendOptionsMap> bench_backend_options(
    const BenchArgs& args, const runtime::MethodMeta& meta, ThreadPlan& plan);

/// One input as the benchmark fed it.
struct BenchInput {
  std::string name;
  std::string dtype;  ///< "f32", "i64", …
  std::vector<int64_t> shape;
  std::string source;  ///< "from FILE" or "random (seed N)".
};

/// One input set of a bench with several (see `BenchArgs::inputs`): its inputs and the time
/// of its first call, made in set order right after the method load.
struct BenchInputSet {
  std::vector<BenchInput> inputs;
  double first_run_ms = 0;
};

/// What one `kiln bench` measured.
struct BenchReport {
  std::string program;
  std::string method;
  ThreadPlan thread_plan;
  std::vector<BenchInput> inputs;  ///< Those of the first input set.
  /// With several input sets: each, in order (`first_run_ms` is the first set's); empty with
  /// one.
  std::vector<BenchInputSet> input_sets;
  double program_load_ms = 0;  ///< Reading and verifying the program (`Module::load`).
  double method_load_ms = 0;   ///< `Module::load_method`: delegate init, specialization.
  /// Whether the method's delegates found their compiled form in a cache: "hit", "miss", or
  /// "off" when no delegate caches (the portable backend never does).
  std::string cache = "off";
  /// With `later_loads`: each later load (program and method), in order, and what their
  /// delegates found in the cache ("miss" when any specialized, else "hit" or "off").
  std::vector<double> later_load_ms;
  std::string later_cache = "off";
  double first_run_ms = 0;
  int64_t warmup = 0;
  int64_t pause_ms = 0;        ///< Slept before each timed run.
  std::vector<double> run_ms;  ///< Each timed run, in order.
  LatencyStats latency;
  /// With --profile: each engine step's time over the timed runs, slowest first.
  std::vector<engine::profiling::StepTime> profile;
  /// With --profile: the engine's builds (specializations) from the method load to the end of
  /// the first run, in order, and when each was made: "load", "later load" or "first run".
  std::vector<engine::profiling::BuildTime> builds;
  std::vector<std::string> build_when;
  /// With --profile: each engine step's time in the first run (the first of each input set).
  std::vector<engine::profiling::StepTime> first_run_profile;

  /// The process's RSS before the program load and its peak at the end (KiB; 0 where the
  /// system does not say: Linux's /proc/self/status VmRSS and VmHWM).
  uint64_t rss_before_kib = 0;
  uint64_t peak_rss_kib = 0;

  double load_ms() const { return program_load_ms + method_load_ms; }
};

/// Kilobytes of a /proc/self/status field ("VmRSS", "VmHWM"); 0 when unknown.
uint64_t process_status_kib(const std::string& field);

/// Loads `args.program` and its method in this process (timed), prepares the inputs, runs the
/// method once (the first run; with several input sets, once per set, in order, each timed),
/// `args.warmup` times untimed and `args.runs` times timed (cycling through the sets).
/// Errors: those of `Module::load` and `load_method` (naming the program, method, backend or
/// option), of `prepare_inputs` (naming the input or file), of `bench_backend_options`, and of
/// a run (naming the instruction); InvalidArgument when inputs given several times are not
/// given the same number of times (naming them and the counts).
runtime::Result<BenchReport> run_bench(const BenchArgs& args);

/// The `--json` object: "program", "method", "threads", "threads_applied", "inputs",
/// "load_ms", "program_load_ms", "method_load_ms", "cache", "first_run_ms", "warmup", "runs",
/// "pause_ms",
/// "latency_ms" {"median", "p90", "min", "mean"}, "run_ms" (every timed run); with several
/// input sets, "input_sets": [{"inputs", "first_run_ms"}...]; with --profile,
/// "profile": [{"function", "step", "node", "op", "device", "calls", "total_ms", "mean_ms",
/// "total_flops"}...] (`total_flops`: the work of the step's calls, 0 for ops other than Conv,
/// ConvTranspose, MatMul and Gemm), "first_run_profile" (the same of the first run) and
/// "builds": [{"function", "shapes", "when", "total_ms", "phases": [{"name", "ms"}...],
/// "steps": [{"node", "op", "device", "create_ms"}...]}...]; "memory" {"rss_before_mib",
/// "peak_rss_mib", "peak_growth_mib"} where the system reports them.
nlohmann::ordered_json bench_json(const BenchReport& report);

/// The human-readable report, one fact per line.
std::string bench_text(const BenchReport& report);

}  // namespace kiln::tools
