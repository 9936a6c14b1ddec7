// kiln bench: its flags, the latency statistics, the thread option, and a whole measurement of
// a program built in code (every --json field present and sane), and --profile's builds.

#include <kiln/backends/kiln/test/kiln_test_programs.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/testing/program_builder.h>
#include <tools/kiln/bench.h>
#include <tools/kiln/npy.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

namespace kiln::tools {
namespace {

using kiln::testing::F32;
using kiln::testing::I64;
using kiln::testing::ProgramBuilder;
using runtime::Error;
using runtime::MethodMeta;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Parses `argv` (after the subcommand) as `kiln bench` would.
BenchArgs parse(std::vector<std::string> argv) {
  CLI::App app{"bench"};
  BenchArgs args;
  add_bench_flags(app, args);
  std::reverse(argv.begin(), argv.end());  // CLI11 takes the arguments back to front
  app.parse(argv);
  return args;
}

TEST(BenchFlags, DefaultsWhenOnlyTheProgramIsGiven) {
  const BenchArgs args = parse({"model.kiln"});
  EXPECT_EQ(args.program, "model.kiln");
  EXPECT_EQ(args.method, "");
  EXPECT_FALSE(args.threads.has_value());
  EXPECT_EQ(args.warmup, 3);
  EXPECT_EQ(args.runs, 10);
  EXPECT_EQ(args.seed, 0u);
  EXPECT_FALSE(args.json);
}

TEST(BenchFlags, ReadsEveryFlag) {
  const BenchArgs args =
      parse({"model.kiln", "--method", "prefill", "--input", "x=a.npy", "--input", "y=b.npy",
             "--option", "KilnBackend.compute_unit=cpu_only", "--threads", "4", "--warmup", "0",
             "--runs", "7", "--seed", "9", "--json"});
  EXPECT_EQ(args.method, "prefill");
  EXPECT_THAT(args.inputs, ElementsAre("x=a.npy", "y=b.npy"));
  EXPECT_THAT(args.options, ElementsAre("KilnBackend.compute_unit=cpu_only"));
  EXPECT_EQ(args.threads, 4);
  EXPECT_EQ(args.warmup, 0);
  EXPECT_EQ(args.runs, 7);
  EXPECT_EQ(args.seed, 9u);
  EXPECT_TRUE(args.json);
}

TEST(BenchFlags, RejectsOutOfRangeCountsNamingTheFlag) {
  const auto message = [](std::vector<std::string> argv) -> std::string {
    try {
      parse(std::move(argv));
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "parsed";
  };
  EXPECT_THAT(message({"m.kiln", "--runs", "0"}), HasSubstr("--runs"));
  EXPECT_THAT(message({"m.kiln", "--warmup", "-1"}), HasSubstr("--warmup"));
  EXPECT_THAT(message({"m.kiln", "--threads", "0"}), HasSubstr("--threads"));
  EXPECT_THAT(message({"m.kiln", "--threads", "many"}), HasSubstr("--threads"));
  EXPECT_THAT(message({"m.kiln", "--bogus"}), HasSubstr("--bogus"));
  EXPECT_THAT(message({}), HasSubstr("program"));
}

TEST(LatencyStats, OddCount) {
  auto stats = latency_stats({5, 1, 3, 2, 4});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_DOUBLE_EQ(stats->median, 3);
  EXPECT_DOUBLE_EQ(stats->p90, 5);  // rank ceil(4.5) = 5
  EXPECT_DOUBLE_EQ(stats->min, 1);
  EXPECT_DOUBLE_EQ(stats->mean, 3);
}

TEST(LatencyStats, EvenCountAveragesTheMiddlePair) {
  auto stats = latency_stats({4, 1, 3, 2});
  ASSERT_TRUE(stats.ok());
  EXPECT_DOUBLE_EQ(stats->median, 2.5);
  EXPECT_DOUBLE_EQ(stats->p90, 4);
  EXPECT_DOUBLE_EQ(stats->mean, 2.5);

  stats = latency_stats({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  ASSERT_TRUE(stats.ok());
  EXPECT_DOUBLE_EQ(stats->p90, 9);  // rank 9 of 10
  EXPECT_DOUBLE_EQ(stats->median, 5.5);
}

TEST(LatencyStats, OneSampleAndNone) {
  auto stats = latency_stats({2.5});
  ASSERT_TRUE(stats.ok());
  EXPECT_DOUBLE_EQ(stats->median, 2.5);
  EXPECT_DOUBLE_EQ(stats->p90, 2.5);
  EXPECT_EQ(latency_stats({}).error(), Error::InvalidArgument);
}

MethodMeta meta_with_backend(const std::string& backend_id) {
  MethodMeta meta;
  meta.name = "forward";
  if (!backend_id.empty()) meta.delegates.push_back({"d0", backend_id, 10});
  return meta;
}

TEST(BenchThreads, RecordedOnlyWithoutAKilnBackendDelegate) {
  BenchArgs args;
  args.threads = 2;
  ThreadPlan plan;
  auto map = bench_backend_options(args, meta_with_backend(""), plan);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_TRUE(map->empty());
  EXPECT_EQ(plan.threads, 2);
  EXPECT_FALSE(plan.applied);

  args.threads.reset();
  map = bench_backend_options(args, meta_with_backend("OtherBackend"), plan);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(plan.threads, 1);  // the portable kernels run on the calling thread
  EXPECT_FALSE(plan.applied);
}

TEST(BenchThreads, PassedAsNumThreadsToAKilnBackendDelegate) {
  BenchArgs args;
  args.threads = 3;
  args.options = {"KilnBackend.compute_unit=cpu_only"};
  ThreadPlan plan;
  auto map = bench_backend_options(args, meta_with_backend("KilnBackend"), plan);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(plan.threads, 3);
  EXPECT_TRUE(plan.applied);
  auto options = map->get_options("KilnBackend");
  ASSERT_EQ(options.size(), 2u);
  EXPECT_EQ(options[0].key, "compute_unit");
  EXPECT_EQ(options[1].key, "num_threads");
  EXPECT_EQ(std::get<int64_t>(options[1].value), 3);
}

TEST(BenchThreads, NumThreadsOptionIsRecorded) {
  BenchArgs args;
  args.options = {"KilnBackend.num_threads=5"};
  ThreadPlan plan;
  auto map = bench_backend_options(args, meta_with_backend("KilnBackend"), plan);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(plan.threads, 5);
  EXPECT_TRUE(plan.applied);
}

TEST(BenchThreads, ThreadsFlagAndOptionTogetherFail) {
  BenchArgs args;
  args.threads = 2;
  args.options = {"KilnBackend.num_threads=4"};
  ThreadPlan plan;
  auto map = bench_backend_options(args, meta_with_backend("KilnBackend"), plan);
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error(), Error::InvalidArgument);
  EXPECT_THAT(map.status().message(), HasSubstr("--threads 2"));
  EXPECT_THAT(map.status().message(), HasSubstr("KilnBackend.num_threads=4"));

  args.threads.reset();
  args.options = {"num_threads=4"};
  EXPECT_THAT(bench_backend_options(args, meta_with_backend(""), plan).status().message(),
              HasSubstr("expected BACKEND.KEY=VALUE"));
}

// --profile's report: each step's time and work; the Conv and MatMul steps' GFLOP/s, each and
// summed, in the text; `total_flops` in JSON.
TEST(BenchProfile, ReportsTheRatesOfTheStepsThatCountWork) {
  BenchReport report;
  report.program = "m.kiln";
  report.method = "forward";
  report.run_ms = {2.0, 2.0};
  engine::profiling::StepTime conv;
  conv.function = "main";
  conv.node = "conv1";
  conv.op = "Conv";
  conv.device = "cpu:onednn";
  conv.calls = 2;
  conv.total_ms = 3.0;
  conv.total_flops = 3e8;  // 100 GFLOP/s
  engine::profiling::StepTime relu = conv;
  relu.step = 1;
  relu.node = "relu1";
  relu.op = "Relu";
  relu.total_ms = 0.5;
  relu.total_flops = 0;
  report.profile = {conv, relu};

  const std::string text = bench_text(report);
  EXPECT_THAT(text, HasSubstr("1.5000 ms/run    100.0 GFLOP/s Conv"));
  EXPECT_THAT(text, HasSubstr("0.2500 ms/run                  Relu"));
  EXPECT_THAT(text, HasSubstr("Conv and MatMul steps: 0.1500 GFLOP/run in 1.5000 ms/run (75.0% "
                              "of the runs): 100.0 GFLOP/s"));
  const auto json = bench_json(report);
  ASSERT_EQ(json["profile"].size(), 2u);
  EXPECT_DOUBLE_EQ(json["profile"][0]["total_flops"].get<double>(), 3e8);
  EXPECT_DOUBLE_EQ(json["profile"][1]["total_flops"].get<double>(), 0.0);

  report.profile = {relu};  // no step that counts work: no summary line
  EXPECT_THAT(bench_text(report), ::testing::Not(HasSubstr("Conv and MatMul steps")));
}

class BenchRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_bench_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    program_ = (dir_ / "relu.kiln").string();
    auto status = ProgramBuilder()
                      .input("x", F32, {2, 3})
                      .node("Relu", {"x"}, {"h"})
                      .node("Add", {"h", "h"}, {"y"})
                      .output("y")
                      .build_to_file(program_);
    ASSERT_TRUE(status.ok()) << status;
  }
  void TearDown() override {
    engine::wait_for_background_stores();  // a cache miss writes its entry in the background
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  BenchArgs args() const {
    BenchArgs args;
    args.program = program_;
    args.warmup = 2;
    args.runs = 5;
    return args;
  }
  std::string write_x(runtime::ScalarType dtype, std::vector<int64_t> shape) const {
    const std::string path = (dir_ / "x.npy").string();
    const size_t bytes = 6 * runtime::element_size(dtype);
    auto status = write_npy(path, dtype, shape, std::vector<uint8_t>(bytes, 0));
    EXPECT_TRUE(status.ok()) << status;
    return path;
  }

  std::filesystem::path dir_;
  std::string program_;
};

TEST_F(BenchRunTest, JsonHasEveryFieldAndSaneValues) {
  auto report = run_bench(args());
  ASSERT_TRUE(report.ok()) << report.status();
  const auto json = bench_json(*report);
  for (const char* key :
       {"program", "method", "threads", "threads_applied", "inputs", "load_ms", "program_load_ms",
        "method_load_ms", "cache", "first_run_ms", "warmup", "runs", "latency_ms", "run_ms"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["program"], program_);
  EXPECT_EQ(json["method"], "forward");
  EXPECT_EQ(json["threads"], 1);
  EXPECT_EQ(json["threads_applied"], false);
  EXPECT_EQ(json["cache"], "off");
  EXPECT_EQ(json["warmup"], 2);
  EXPECT_EQ(json["runs"], 5);
  ASSERT_EQ(json["run_ms"].size(), 5u);
  ASSERT_EQ(json["inputs"].size(), 1u);
  EXPECT_EQ(json["inputs"][0]["name"], "x");
  EXPECT_EQ(json["inputs"][0]["dtype"], "f32");
  EXPECT_EQ(json["inputs"][0]["shape"], nlohmann::ordered_json({2, 3}));
  EXPECT_EQ(json["inputs"][0]["source"], "random (seed 0)");

  const double program_ms = json["program_load_ms"];
  const double method_ms = json["method_load_ms"];
  EXPECT_GE(program_ms, 0);
  EXPECT_GE(method_ms, 0);
  EXPECT_DOUBLE_EQ(json["load_ms"].get<double>(), program_ms + method_ms);
  EXPECT_GT(json["first_run_ms"].get<double>(), 0);
  const auto& latency = json["latency_ms"];
  const double min = latency["min"], median = latency["median"], p90 = latency["p90"],
               mean = latency["mean"];
  EXPECT_GT(min, 0);
  EXPECT_LE(min, median);
  EXPECT_LE(median, p90);
  EXPECT_GE(mean, min);
  for (const auto& run : json["run_ms"]) EXPECT_GE(run.get<double>(), min);

  const std::string text = bench_text(*report);
  EXPECT_THAT(text, HasSubstr("method    forward"));
  EXPECT_THAT(text, HasSubstr("input     x: f32 [2, 3] random (seed 0)"));
  EXPECT_THAT(text, HasSubstr("cache off"));
  EXPECT_THAT(text, HasSubstr("(5 runs after 2 warm-up)"));
}

// --later-loads: more loads of the method in the same process, each timed, before the first
// run; reported in JSON (median, min, each, cache) and text. A program without KilnBackend
// delegates loads as given; a sharing option beside it is refused (it would be overridden).
TEST_F(BenchRunTest, LaterLoadsAreTimedAndReported) {
  BenchArgs bench = args();
  auto plain = run_bench(bench);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->later_load_ms.empty());
  EXPECT_FALSE(bench_json(*plain).contains("later_loads_ms"));
  EXPECT_THAT(bench_text(*plain), ::testing::Not(HasSubstr("later")));

  bench.later_loads = 3;
  auto report = run_bench(bench);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->later_load_ms.size(), 3u);
  for (double ms : report->later_load_ms) EXPECT_GT(ms, 0);
  EXPECT_EQ(report->later_cache, "off");  // no KilnBackend delegate
  const auto json = bench_json(*report);
  ASSERT_TRUE(json.contains("later_loads_ms"));
  const auto& later = json["later_loads_ms"];
  std::vector<double> sorted = report->later_load_ms;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_DOUBLE_EQ(later["median"].get<double>(), sorted[1]);
  EXPECT_DOUBLE_EQ(later["min"].get<double>(), sorted[0]);
  EXPECT_EQ(later["all"].size(), 3u);
  EXPECT_EQ(later["cache"], "off");
  EXPECT_EQ(json["runs"], 5);  // the runs are unchanged
  EXPECT_THAT(bench_text(*report), HasSubstr("later     3 more load(s) in this process:"));

  EXPECT_EQ(parse({"m.kiln", "--later-loads", "4"}).later_loads, 4);
  EXPECT_THROW(parse({"m.kiln", "--later-loads", "-1"}), CLI::ParseError);
}

TEST_F(BenchRunTest, ReadsInputsFromNpy) {
  BenchArgs bench = args();
  const std::string path = write_x(F32, {2, 3});
  bench.inputs = {"x=" + path};
  auto report = run_bench(bench);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->inputs.size(), 1u);
  EXPECT_EQ(report->inputs[0].source, "from " + path);
}

// An input given several times makes input sets: each set's first call is timed in order and
// the runs cycle through them; inputs given more than once must be given equally often.
TEST_F(BenchRunTest, InputsGivenSeveralTimesAreCycledSets) {
  const std::string program = (dir_ / "add.kiln").string();
  auto built = ProgramBuilder()
                   .input("x", F32, {0, 3}, runtime::ShapeDynamism::Unbounded, {"batch", ""})
                   .input("z", F32, {0, 3}, runtime::ShapeDynamism::Unbounded, {"batch", ""})
                   .tensor("y", F32, {0, 3}, runtime::ShapeDynamism::Unbounded)
                   .node("Add", {"x", "z"}, {"y"})
                   .output("y")
                   .build_to_file(program);
  ASSERT_TRUE(built.ok()) << built;
  auto npy = [&](const std::string& name, int64_t rows) {
    const std::string path = (dir_ / name).string();
    const std::vector<int64_t> shape = {rows, 3};
    auto status =
        write_npy(path, F32, shape, std::vector<uint8_t>(static_cast<size_t>(rows) * 3 * 4, 0));
    EXPECT_TRUE(status.ok()) << status;
    return path;
  };
  BenchArgs bench = args();
  bench.program = program;
  bench.inputs = {"x=" + npy("x2.npy", 2), "z=" + npy("z2.npy", 2), "x=" + npy("x5.npy", 5),
                  "z=" + npy("z5.npy", 5)};
  auto report = run_bench(bench);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->input_sets.size(), 2u);
  EXPECT_THAT(report->input_sets[0].inputs[0].shape, ElementsAre(2, 3));
  EXPECT_THAT(report->input_sets[1].inputs[1].shape, ElementsAre(5, 3));
  EXPECT_EQ(report->first_run_ms, report->input_sets[0].first_run_ms);
  EXPECT_GT(report->input_sets[1].first_run_ms, 0);
  EXPECT_EQ(report->run_ms.size(), 5u);
  auto json = bench_json(*report);
  ASSERT_EQ(json["input_sets"].size(), 2u);
  EXPECT_EQ(json["input_sets"][1]["inputs"][0]["shape"], nlohmann::ordered_json({5, 3}));
  EXPECT_THAT(bench_text(*report), HasSubstr("set 1     first run"));

  bench.inputs = {"x=" + npy("x2.npy", 2), "x=" + npy("x5.npy", 5), "z=" + npy("z2.npy", 2),
                  "z=" + npy("z5.npy", 5), "z=" + npy("z5.npy", 5)};
  auto uneven = run_bench(bench);
  ASSERT_FALSE(uneven.ok());
  EXPECT_EQ(uneven.error(), Error::InvalidArgument);
  EXPECT_THAT(uneven.status().message(),
              HasSubstr("input 'z' is given 3 times and input 'x' 2 times"));

  // One set: no input_sets in the report.
  bench.inputs = {"x=" + npy("x2.npy", 2), "z=" + npy("z2.npy", 2)};
  auto single = run_bench(bench);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_TRUE(single->input_sets.empty());
  EXPECT_FALSE(bench_json(*single).contains("input_sets"));
}

TEST_F(BenchRunTest, ErrorsNameTheCulprit) {
  BenchArgs bench = args();
  bench.method = "nope";
  auto report = run_bench(bench);
  EXPECT_EQ(report.error(), Error::NotFound);
  EXPECT_THAT(report.status().message(), HasSubstr("nope"));

  bench = args();
  bench.inputs = {"x=" + write_x(I64, {2, 3})};
  report = run_bench(bench);
  EXPECT_EQ(report.error(), Error::InvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("dtype i64 (expected f32"));

  bench = args();
  bench.inputs = {"z=" + write_x(F32, {2, 3})};
  report = run_bench(bench);
  EXPECT_EQ(report.error(), Error::NotFound);
  EXPECT_THAT(report.status().message(), HasSubstr("has no input 'z'"));

  bench = args();
  bench.inputs = {"x=" + write_x(F32, {3, 2})};
  report = run_bench(bench);
  EXPECT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("[3, 2]"));

  bench = args();
  bench.program = (dir_ / "absent.kiln").string();
  report = run_bench(bench);
  EXPECT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("absent.kiln"));
}

// --profile reports each build of the engine: a static function's at load; a symbolic one's at
// its first run, first looking in the cache (no entry, then, in a process that finds the entry
// stored, the entry adopted); each phase timed, each step's creation, and the first run's steps.
TEST_F(BenchRunTest, ProfileReportsTheBuildsOfTheLoadAndOfTheFirstRun) {
  namespace kt = backends::kiln_test;
  const std::vector<uint8_t> package = kt::package_of(kt::matmul_add_relu(2));
  const std::string fixed = (dir_ / "fixed.kiln").string();
  ASSERT_TRUE(kt::kiln_program(package, kt::function_manifest(), 2).build_to_file(fixed).ok());
  BenchArgs bench = args();
  bench.program = fixed;
  bench.profile = true;
  bench.options = {"KilnBackend.cache_dir=" + (dir_ / "cache").string()};
  auto report = run_bench(bench);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->builds.size(), 1u);
  const engine::profiling::BuildTime& at_load = report->builds[0];
  EXPECT_EQ(at_load.function, "main");
  EXPECT_EQ(at_load.shapes, "[2, 4]");
  EXPECT_THAT(report->build_when, ElementsAre("load"));
  std::vector<std::string> phases;
  for (const auto& phase : at_load.phases) {
    phases.push_back(phase.name);
    EXPECT_GE(phase.ms, 0) << phase.name;
  }
  EXPECT_THAT(phases, ElementsAre("weight checks", "shapes and folding", "steps", "layouts",
                                  "memory plan"));
  ASSERT_FALSE(at_load.steps.empty());
  EXPECT_EQ(at_load.steps[0].op, "MatMul");
  EXPECT_THAT(at_load.steps[0].device, HasSubstr("cpu:"));
  EXPECT_GT(at_load.steps[0].create_ms, 0);
  ASSERT_FALSE(report->first_run_profile.empty());
  for (const auto& step : report->first_run_profile) EXPECT_EQ(step.calls, 1u) << step.node;
  ASSERT_FALSE(report->profile.empty());
  EXPECT_EQ(report->profile[0].calls, 5u);  // the timed runs only

  auto json = bench_json(*report);
  ASSERT_TRUE(json.contains("builds"));
  ASSERT_EQ(json["builds"].size(), 1u);
  const auto& build = json["builds"][0];
  EXPECT_EQ(build["when"], "load");
  EXPECT_EQ(build["shapes"], "[2, 4]");
  double sum = 0;
  for (const auto& phase : build["phases"]) sum += phase["ms"].get<double>();
  EXPECT_DOUBLE_EQ(build["total_ms"].get<double>(), sum);
  EXPECT_EQ(build["steps"].size(), at_load.steps.size());
  EXPECT_TRUE(build["steps"][0].contains("create_ms"));
  ASSERT_TRUE(json.contains("first_run_profile"));
  EXPECT_EQ(json["first_run_profile"][0]["calls"], 1);
  std::string text = bench_text(*report);
  EXPECT_THAT(text, HasSubstr("build     'main' for [2, 4] at load: "));
  EXPECT_THAT(text, HasSubstr("ms to create  MatMul"));
  EXPECT_THAT(text, HasSubstr("first run engine steps: "));

  // A symbolic batch: built at the first run, after the cache lookup.
  const std::string symbolic = (dir_ / "symbolic.kiln").string();
  ASSERT_TRUE(
      kt::kiln_program(kt::package_of(kt::matmul_add_relu(engine::ir::Dim::symbol("batch"))),
                       kt::function_manifest(), 0)
          .build_to_file(symbolic)
          .ok());
  const std::string x = (dir_ / "x24.npy").string();
  const std::vector<int64_t> x_shape = {2, 4};
  ASSERT_TRUE(write_npy(x, F32, x_shape, std::vector<uint8_t>(8 * sizeof(float), 0)).ok());
  bench.program = symbolic;
  bench.inputs = {"x=" + x};
  // Each run its own model, as in a process of its own (not the one the previous run loaded).
  bench.options.push_back("KilnBackend.share_multifunction_model=false");
  for (const char* lookup :
       {"cache lookup (no entry for these shapes)", "cache lookup (entry adopted)"}) {
    report = run_bench(bench);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->builds.size(), 1u) << lookup;
    EXPECT_THAT(report->build_when, ElementsAre("first run"));
    EXPECT_EQ(report->builds[0].shapes, "[2, 4]");
    // An entry found is checked after the build (which a large one's check overlaps).
    const bool adopted = std::string(lookup) == "cache lookup (entry adopted)";
    ASSERT_EQ(report->builds[0].phases.size(), adopted ? 7u : 6u);
    EXPECT_EQ(report->builds[0].phases[0].name, lookup);
    if (adopted) {
      EXPECT_EQ(report->builds[0].phases.back().name,
                "cache entry check (what the build did not hide)");
    }
    EXPECT_THAT(bench_text(*report), HasSubstr("build     'main' for [2, 4] at first run: "));
    engine::wait_for_background_stores();  // the next run finds the entry stored
  }

  bench.profile = false;
  report = run_bench(bench);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->builds.empty());
  json = bench_json(*report);
  EXPECT_FALSE(json.contains("builds"));
  EXPECT_FALSE(json.contains("first_run_profile"));
  EXPECT_THAT(bench_text(*report), ::testing::Not(HasSubstr("build ")));
}

}  // namespace
}  // namespace kiln::tools
