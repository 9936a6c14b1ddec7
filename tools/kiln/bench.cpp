// `kiln bench`: load time, first run and latency statistics of one method, measured in this
// process. Lives in kiln_tool_support so the tests drive it on programs built in code.

#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/extension/module/module.h>
#include <tools/kiln/bench.h>
#include <tools/kiln/method_inputs.h>
#include <tools/kiln/option_args.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <thread>

namespace kiln::tools {

using extension::Module;
using runtime::Error;
using runtime::EValue;
using runtime::MethodMeta;
using runtime::Result;
using runtime::Status;

namespace {

constexpr const char* kKilnBackendId = "KilnBackend";
constexpr const char* kNumThreadsKey = "num_threads";

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool has_kiln_delegate(const MethodMeta& meta) {
  return std::any_of(meta.delegates.begin(), meta.delegates.end(),
                     [](const auto& delegate) { return delegate.backend_id == kKilnBackendId; });
}

// The cache state of one load, from KilnBackend's counters before and after it: "hit" when
// every KilnBackend delegate mapped a stored specialization, "miss" when any specialized (and
// stored), "off" when none used a cache (a portable method, or an empty cache_dir).
std::string cache_state(const backends::KilnLoadCounters& before,
                        const backends::KilnLoadCounters& after) {
  if (after.cache_misses != before.cache_misses) return "miss";
  if (after.cache_hits != before.cache_hits) return "hit";
  return "off";
}

std::string format_ms(double ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f ms", ms);
  return buffer;
}

// The `--input` arguments of each input set: an input given N > 1 times makes N sets; inputs
// given once are in each. Errors: InvalidArgument when two inputs are given different numbers
// of times above one.
Result<std::vector<std::vector<std::string>>> input_sets(const std::vector<std::string>& inputs) {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> files;  // per name, its arguments in order
  for (const std::string& arg : inputs) {
    std::string name = arg.substr(0, arg.find('='));  // malformed ones: prepare_inputs reports
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      names.push_back(name);
      files.push_back({arg});
    } else {
      files[static_cast<size_t>(it - names.begin())].push_back(arg);
    }
  }
  size_t sets = 1;
  std::string first_cycled;
  for (size_t i = 0; i < names.size(); ++i) {
    if (files[i].size() == 1) continue;
    if (sets != 1 && files[i].size() != sets) {
      return Status(Error::InvalidArgument,
                    "bench: input '" + names[i] + "' is given " + std::to_string(files[i].size()) +
                        " times and input '" + first_cycled + "' " + std::to_string(sets) +
                        " times (expected inputs given more than once to be given equally often)");
    }
    sets = files[i].size();
    if (first_cycled.empty()) first_cycled = names[i];
  }
  std::vector<std::vector<std::string>> out(sets);
  for (size_t s = 0; s < sets; ++s) {
    for (const auto& list : files) out[s].push_back(list.size() == 1 ? list[0] : list[s]);
  }
  return out;
}

std::vector<BenchInput> describe_inputs(const std::vector<MethodInput>& prepared) {
  std::vector<BenchInput> out;
  for (const MethodInput& input : prepared) {
    if (!input.tensor) continue;
    const auto sizes = input.tensor->sizes();
    out.push_back({input.name, std::string(runtime::to_string(input.tensor->dtype())),
                   std::vector<int64_t>(sizes.begin(), sizes.end()), input.source});
  }
  return out;
}

}  // namespace

void add_bench_flags(CLI::App& app, BenchArgs& args) {
  app.add_option("program", args.program, "The .kiln program")->required();
  app.add_option("--method", args.method,
                 "Method to measure (default: 'forward', or the program's only method)");
  app.add_option("--input", args.inputs,
                 "NAME=FILE.npy for an input (repeatable); inputs not given get seeded random "
                 "data; an input given N times makes N input sets the runs cycle through")
      ->allow_extra_args(false);
  app.add_option("--option", args.options,
                 "BACKEND.KEY=VALUE load-time backend option (repeatable); true/false is a "
                 "bool, an integer an int, anything else a string")
      ->allow_extra_args(false);
  app.add_option("--threads", args.threads,
                 "Intra-op threads (KilnBackend.num_threads; recorded only when the method has "
                 "no KilnBackend delegate)")
      ->check(CLI::Range(int64_t{1}, int64_t{256}));
  app.add_option("--warmup", args.warmup, "Untimed runs after the first run (default: 3)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  app.add_option("--runs", args.runs, "Timed runs (default: 10)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--pause-ms", args.pause_ms,
                 "Sleep this many milliseconds before each timed run, untimed: a model called "
                 "now and then, its idle threads asleep between calls (default: 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{60000}));
  app.add_option("--seed", args.seed, "Seed of the random inputs (default: 0)");
  app.add_option("--later-loads", args.later_loads,
                 "Load the method this many times more, each by a new module in this process "
                 "(KilnBackend delegates unshared), before the first run; their times are "
                 "reported as later loads (default: 0)")
      ->check(CLI::Range(int64_t{0}, int64_t{100}));
  app.add_flag("--json", args.json, "Print one JSON object instead of text");
  app.add_flag("--profile", args.profile,
               "Time each engine step over the timed runs and list the slowest (timing adds "
               "a little to each run)");
}

Result<LatencyStats> latency_stats(std::vector<double> samples_ms) {
  if (samples_ms.empty()) {
    return Status(Error::InvalidArgument, "compute latency statistics: no samples (expected 1+)");
  }
  std::sort(samples_ms.begin(), samples_ms.end());
  const size_t n = samples_ms.size();
  LatencyStats stats;
  stats.median = n % 2 == 1 ? samples_ms[n / 2] : (samples_ms[n / 2 - 1] + samples_ms[n / 2]) / 2;
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  stats.p90 = samples_ms[std::max<size_t>(rank, 1) - 1];
  stats.min = samples_ms.front();
  stats.mean = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(n);
  return stats;
}

Result<runtime::LoadBackendOptionsMap> bench_backend_options(const BenchArgs& args,
                                                             const MethodMeta& meta,
                                                             ThreadPlan& plan) {
  std::optional<int64_t> option_threads;
  std::string option_text;
  for (const auto& text : args.options) {
    KILN_ASSIGN_OR_RETURN(OptionArg arg, parse_option_arg(text));
    if (arg.backend_id != kKilnBackendId || arg.option.key != kNumThreadsKey) continue;
    option_text = text;
    if (const auto* value = std::get_if<int64_t>(&arg.option.value)) option_threads = *value;
  }
  if (args.threads && !option_text.empty()) {
    return Status(Error::InvalidArgument, "bench: --threads " + std::to_string(*args.threads) +
                                              " and --option '" + option_text +
                                              "' both set the thread count (expected one of them)");
  }
  const bool kiln_delegate = has_kiln_delegate(meta);
  std::vector<std::string> options = args.options;
  if (args.threads && kiln_delegate) {
    options.push_back(std::string(kKilnBackendId) + "." + kNumThreadsKey + "=" +
                      std::to_string(*args.threads));
  }
  plan.applied = kiln_delegate && (args.threads || !option_text.empty());
  if (args.threads) {
    plan.threads = *args.threads;
  } else if (option_threads) {
    plan.threads = *option_threads;
  } else if (kiln_delegate) {
    plan.threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  } else {
    plan.threads = 1;
  }
  return parse_option_args(options);
}

namespace {

// `args.later_loads` more loads of the method, each by a new Module (released before the next),
// with the options of the first load and, for KilnBackend delegates, sharing off.
Status later_loads(const BenchArgs& args, const MethodMeta& meta, BenchReport& report) {
  if (args.later_loads == 0) return Status();
  BenchArgs unshared = args;
  if (has_kiln_delegate(meta)) {
    const std::string share =
        std::string(kKilnBackendId) + "." + std::string(backends::kShareMultifunctionModelKey);
    for (const auto& text : args.options) {
      if (text.rfind(share + "=", 0) == 0) {
        return Status(Error::InvalidArgument,
                      "bench: --later-loads loads the method again with " + share +
                          "=false, and --option '" + text +
                          "' sets it too (expected --later-loads without it)");
      }
    }
    unshared.options.push_back(share + "=false");
  }
  ThreadPlan plan;
  KILN_ASSIGN_OR_RETURN(auto options, bench_backend_options(unshared, meta, plan));
  const backends::KilnLoadCounters before = backends::kiln_load_counters();
  for (int64_t i = 0; i < args.later_loads; ++i) {
    Module later(args.program, Module::LoadMode::Mmap);
    auto start = Clock::now();
    KILN_RETURN_IF_ERROR(later.load().with_context("bench: later load"));
    KILN_RETURN_IF_ERROR(later.load_method(report.method, options.empty() ? nullptr : &options)
                             .with_context("bench: later load"));
    report.later_load_ms.push_back(ms_since(start));
  }
  report.later_cache = cache_state(before, backends::kiln_load_counters());
  return Status();
}

}  // namespace

namespace {
std::string format_mib(uint64_t kib) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(kib) / 1024.0);
  return text;
}
}  // namespace

uint64_t process_status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10);
    }
  }
  return 0;
}

Result<BenchReport> run_bench(const BenchArgs& args) {
  BenchReport report;
  report.rss_before_kib = process_status_kib("VmRSS");
  report.program = args.program;
  report.warmup = args.warmup;
  report.pause_ms = args.pause_ms;
  Module module(args.program, Module::LoadMode::Mmap);

  auto start = Clock::now();
  KILN_RETURN_IF_ERROR(module.load());
  report.program_load_ms = ms_since(start);

  KILN_ASSIGN_OR_RETURN(report.method, choose_method(module, args.method));
  KILN_ASSIGN_OR_RETURN(MethodMeta meta, module.method_meta(report.method));
  KILN_ASSIGN_OR_RETURN(auto options, bench_backend_options(args, meta, report.thread_plan));
  // Inputs are read before the method loads so that the load time covers only kiln.
  KILN_ASSIGN_OR_RETURN(auto set_args, input_sets(args.inputs));
  std::vector<std::vector<MethodInput>> prepared_sets;
  for (const auto& set : set_args) {
    KILN_ASSIGN_OR_RETURN(auto prepared, prepare_inputs(meta, set, args.seed));
    prepared_sets.push_back(std::move(prepared));
  }
  report.inputs = describe_inputs(prepared_sets[0]);

  backends::KilnLoadCounters before = backends::kiln_load_counters();
  if (args.profile) {  // the builds of the load and the first run, and the first run's steps
    engine::profiling::reset();
    engine::profiling::set_enabled(true);
  }
  auto mark_builds = [&](const char* when) {
    if (!args.profile) return;
    const size_t made = engine::profiling::builds().size();
    report.build_when.resize(std::max(made, report.build_when.size()), when);
  };
  start = Clock::now();
  KILN_RETURN_IF_ERROR(module.load_method(report.method, options.empty() ? nullptr : &options));
  report.method_load_ms = ms_since(start);
  backends::KilnLoadCounters after = backends::kiln_load_counters();
  report.cache = cache_state(before, after);
  for (size_t i = after.recent_warnings.size() -
                  std::min<size_t>(after.recent_warnings.size(), after.warnings - before.warnings);
       i < after.recent_warnings.size(); ++i) {
    std::cerr << "kiln bench: warning: " << after.recent_warnings[i] << "\n";
  }

  mark_builds("load");
  KILN_RETURN_IF_ERROR(later_loads(args, meta, report));
  mark_builds("later load");

  KILN_ASSIGN_OR_RETURN(runtime::Method * method, module.method(report.method));
  std::vector<std::vector<EValue>> input_sets;
  for (const auto& prepared : prepared_sets) input_sets.push_back(input_values(prepared, *method));
  for (size_t s = 0; s < input_sets.size(); ++s) {
    start = Clock::now();
    KILN_RETURN_IF_ERROR(module.execute(report.method, input_sets[s]).status());
    double ms = ms_since(start);
    if (s == 0) report.first_run_ms = ms;
    if (input_sets.size() > 1) report.input_sets.push_back({describe_inputs(prepared_sets[s]), ms});
  }
  if (args.profile) {
    mark_builds("first run");
    engine::profiling::set_enabled(false);
    report.builds = engine::profiling::builds();
    report.build_when.resize(report.builds.size(), "first run");
    report.first_run_profile = engine::profiling::step_times();
  }
  auto inputs_of_run = [&](int64_t k) -> const std::vector<EValue>& {
    return input_sets[static_cast<size_t>(k) % input_sets.size()];
  };

  for (int64_t i = 0; i < args.warmup; ++i) {
    KILN_RETURN_IF_ERROR(module.execute(report.method, inputs_of_run(i)).status());
  }
  report.run_ms.reserve(static_cast<size_t>(args.runs));
  if (args.profile) {
    engine::profiling::reset();
    engine::profiling::set_enabled(true);
  }
  for (int64_t i = 0; i < args.runs; ++i) {
    if (args.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(args.pause_ms));
    start = Clock::now();
    runtime::Status status = module.execute(report.method, inputs_of_run(i)).status();
    report.run_ms.push_back(ms_since(start));
    if (!status.ok()) {
      engine::profiling::set_enabled(false);
      return status;
    }
  }
  if (args.profile) {
    engine::profiling::set_enabled(false);
    report.profile = engine::profiling::step_times();
  }
  KILN_ASSIGN_OR_RETURN(report.latency, latency_stats(report.run_ms));
  report.peak_rss_kib = process_status_kib("VmHWM");
  return report;
}

namespace {

nlohmann::ordered_json steps_json(const std::vector<engine::profiling::StepTime>& times) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const auto& t : times) {
    steps.push_back({{"function", t.function},
                     {"step", t.step},
                     {"node", t.node},
                     {"op", t.op},
                     {"device", t.device},
                     {"calls", t.calls},
                     {"total_ms", t.total_ms},
                     {"mean_ms", t.total_ms / static_cast<double>(std::max<uint64_t>(t.calls, 1))},
                     {"total_flops", t.total_flops}});
  }
  return steps;
}

double build_ms(const engine::profiling::BuildTime& build) {
  double ms = 0;
  for (const auto& p : build.phases) ms += p.ms;
  return ms;
}

// --profile's lines on the builds (each phase, the slowest steps to create) and the first run's
// slowest steps against their mean over the timed runs (filled in later, so matched by name).
std::string build_text(const BenchReport& report) {
  std::ostringstream out;
  char line[320];
  for (size_t i = 0; i < report.builds.size(); ++i) {
    const auto& b = report.builds[i];
    out << "build     '" << b.function << "' for " << b.shapes << " at "
        << (i < report.build_when.size() ? report.build_when[i] : std::string("?")) << ": "
        << format_ms(build_ms(b)) << " (";
    for (size_t p = 0; p < b.phases.size(); ++p) {
      out << (p ? ", " : "") << b.phases[p].name << " " << format_ms(b.phases[p].ms);
    }
    out << ")\n";
    std::vector<engine::profiling::BuildTime::Step> slowest = b.steps;
    std::stable_sort(slowest.begin(), slowest.end(),
                     [](const auto& x, const auto& y) { return x.create_ms > y.create_ms; });
    for (size_t k = 0; k < slowest.size() && k < 8; ++k) {
      const auto& t = slowest[k];
      std::snprintf(line, sizeof(line), "  %9.4f ms to create  %-14s %-13s %s\n", t.create_ms,
                    t.op.c_str(), t.device.c_str(), t.node.c_str());
      out << line;
    }
  }
  if (!report.first_run_profile.empty()) {
    double total = 0;
    for (const auto& t : report.first_run_profile) total += t.total_ms;
    out << "first run engine steps: " << format_ms(total)
        << "; the slowest (then their mean over the timed runs):\n";
    for (size_t k = 0; k < report.first_run_profile.size() && k < 8; ++k) {
      const auto& t = report.first_run_profile[k];
      double mean = -1;
      for (const auto& later : report.profile) {
        if (later.function == t.function && later.step == t.step && later.calls > 0) {
          mean = later.total_ms / static_cast<double>(later.calls);
        }
      }
      char later_text[32] = "";
      if (mean >= 0) std::snprintf(later_text, sizeof(later_text), "(%.4f)", mean);
      std::snprintf(line, sizeof(line), "  %9.4f ms %-10s %-14s %-13s %s\n",
                    t.total_ms / static_cast<double>(std::max<uint64_t>(t.calls, 1)), later_text,
                    t.op.c_str(), t.device.c_str(), t.node.c_str());
      out << line;
    }
  }
  return out.str();
}

}  // namespace

nlohmann::ordered_json bench_json(const BenchReport& report) {
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  for (const auto& input : report.inputs) {
    inputs.push_back({{"name", input.name},
                      {"dtype", input.dtype},
                      {"shape", input.shape},
                      {"source", input.source}});
  }
  nlohmann::ordered_json out = {
      {"program", report.program},
      {"method", report.method},
      {"threads", report.thread_plan.threads},
      {"threads_applied", report.thread_plan.applied},
      {"inputs", inputs},
      {"load_ms", report.load_ms()},
      {"program_load_ms", report.program_load_ms},
      {"method_load_ms", report.method_load_ms},
      {"cache", report.cache},
  };
  if (auto later = latency_stats(report.later_load_ms); later.ok()) {
    out["later_loads_ms"] = {{"median", later->median},
                             {"min", later->min},
                             {"all", report.later_load_ms},
                             {"cache", report.later_cache}};
  }
  out.update(nlohmann::ordered_json{
      {"first_run_ms", report.first_run_ms},
      {"warmup", report.warmup},
      {"runs", report.run_ms.size()},
      {"pause_ms", report.pause_ms},
      {"latency_ms",
       {{"median", report.latency.median},
        {"p90", report.latency.p90},
        {"min", report.latency.min},
        {"mean", report.latency.mean}}},
      {"run_ms", report.run_ms},
  });
  if (!report.input_sets.empty()) {
    nlohmann::ordered_json sets = nlohmann::ordered_json::array();
    for (const auto& set : report.input_sets) {
      nlohmann::ordered_json set_inputs = nlohmann::ordered_json::array();
      for (const auto& input : set.inputs) {
        set_inputs.push_back({{"name", input.name}, {"shape", input.shape}});
      }
      sets.push_back({{"inputs", set_inputs}, {"first_run_ms", set.first_run_ms}});
    }
    out["input_sets"] = sets;
  }
  if (report.peak_rss_kib > 0) {
    const double before = report.rss_before_kib / 1024.0, peak = report.peak_rss_kib / 1024.0;
    out["memory"] = {{"rss_before_mib", before},
                     {"peak_rss_mib", peak},
                     {"peak_growth_mib", std::max(0.0, peak - before)}};
  }
  if (!report.profile.empty()) out["profile"] = steps_json(report.profile);
  if (!report.first_run_profile.empty())
    out["first_run_profile"] = steps_json(report.first_run_profile);
  if (!report.builds.empty()) {
    nlohmann::ordered_json builds = nlohmann::ordered_json::array();
    for (size_t i = 0; i < report.builds.size(); ++i) {
      const auto& b = report.builds[i];
      nlohmann::ordered_json phases = nlohmann::ordered_json::array();
      for (const auto& p : b.phases) phases.push_back({{"name", p.name}, {"ms", p.ms}});
      nlohmann::ordered_json steps = nlohmann::ordered_json::array();
      for (const auto& t : b.steps) {
        steps.push_back(
            {{"node", t.node}, {"op", t.op}, {"device", t.device}, {"create_ms", t.create_ms}});
      }
      builds.push_back({{"function", b.function},
                        {"shapes", b.shapes},
                        {"when", i < report.build_when.size() ? report.build_when[i] : ""},
                        {"total_ms", build_ms(b)},
                        {"phases", phases},
                        {"steps", steps}});
    }
    out["builds"] = builds;
  }
  return out;
}

std::string bench_text(const BenchReport& report) {
  std::ostringstream out;
  out << "program   " << report.program << "\n"
      << "method    " << report.method << "\n";
  for (const auto& input : report.inputs) {
    out << "input     " << input.name << ": " << input.dtype << " "
        << runtime::shape_to_string(input.shape) << " " << input.source << "\n";
  }
  out << "threads   " << report.thread_plan.threads
      << (report.thread_plan.applied ? "" : " (recorded only: no KilnBackend delegate takes it)")
      << "\n"
      << "load      " << format_ms(report.load_ms()) << " (program "
      << format_ms(report.program_load_ms) << ", method " << format_ms(report.method_load_ms)
      << ", cache " << report.cache << ")\n";
  if (!report.later_load_ms.empty()) {
    out << "later     " << report.later_load_ms.size() << " more load(s) in this process:";
    for (double ms : report.later_load_ms) out << " " << format_ms(ms);
    out << " (cache " << report.later_cache << ")\n";
  }
  out << "first run " << format_ms(report.first_run_ms) << "\n";
  for (size_t s = 0; s < report.input_sets.size(); ++s) {
    out << "set " << s << "     first run " << format_ms(report.input_sets[s].first_run_ms);
    for (const auto& input : report.input_sets[s].inputs) {
      out << ", " << input.name << " " << runtime::shape_to_string(input.shape);
    }
    out << "\n";
  }
  out << build_text(report);
  out << "latency   median " << format_ms(report.latency.median) << ", p90 "
      << format_ms(report.latency.p90) << ", min " << format_ms(report.latency.min) << ", mean "
      << format_ms(report.latency.mean) << " (" << report.run_ms.size() << " runs after "
      << report.warmup << " warm-up)\n";
  if (report.peak_rss_kib > 0) {
    out << "memory    peak RSS " << format_mib(report.peak_rss_kib) << ", "
        << format_mib(report.peak_rss_kib > report.rss_before_kib
                          ? report.peak_rss_kib - report.rss_before_kib
                          : 0)
        << " above the RSS before the program load\n";
  }
  if (!report.profile.empty()) {
    double runs_total = 0, steps_total = 0;
    for (double ms : report.run_ms) runs_total += ms;
    for (const auto& t : report.profile) steps_total += t.total_ms;
    out << "profile   engine steps: " << format_ms(steps_total) << " of " << format_ms(runs_total)
        << " over the timed runs; the slowest:\n";
    char line[320];
    const auto runs = static_cast<double>(report.run_ms.size());
    for (size_t i = 0; i < report.profile.size() && i < 15; ++i) {
      const auto& t = report.profile[i];
      char rate[32] = "";
      if (t.total_flops > 0 && t.total_ms > 0) {
        std::snprintf(rate, sizeof(rate), "%7.1f GFLOP/s", t.total_flops / t.total_ms * 1e-6);
      }
      std::snprintf(line, sizeof(line), "  %5.1f%%  %9.4f ms/run  %-15s %-14s %-13s %s (%s)\n",
                    runs_total > 0 ? 100.0 * t.total_ms / runs_total : 0.0, t.total_ms / runs, rate,
                    t.op.c_str(), t.device.c_str(), t.node.c_str(), t.function.c_str());
      out << line;
    }
    double work_ms = 0, work_flops = 0;
    for (const auto& t : report.profile) {
      if (t.total_flops <= 0) continue;
      work_ms += t.total_ms;
      work_flops += t.total_flops;
    }
    if (work_flops > 0 && work_ms > 0) {
      std::snprintf(line, sizeof(line),
                    "          Conv and MatMul steps: %.4f GFLOP/run in %.4f ms/run (%.1f%% of the "
                    "runs): %.1f GFLOP/s\n",
                    work_flops / runs * 1e-9, work_ms / runs,
                    runs_total > 0 ? 100.0 * work_ms / runs_total : 0.0,
                    work_flops / work_ms * 1e-6);
      out << line;
    }
  }
  return out.str();
}

}  // namespace kiln::tools
