// Lazy binding on a cache hit: a warm load builds no function; each is built on first use,
// from the adopted packed weights, and checked then against the artifact's plan fingerprint.
#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/thread_team.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/test/loader_test_util.h>
#include <kiln/engine/specialization/devices.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using loader_test::flip_payload_byte;
using loader_test::TempDir;

constexpr int kNumFunctions = 4;

// Function `f<b>` runs conv_residual_model for batch b (b = 1..kNumFunctions), like an exported
// model enumerated over the batch: every function shares the same weights.
ir::Model enumerated_model() {
  ir::Model model = conv_residual_model(1);
  model.functions[0].name = "f1";
  for (int64_t batch = 2; batch <= kNumFunctions; ++batch) {
    ir::Graph graph = conv_residual_model(batch).functions[0];
    graph.name = "f" + std::to_string(batch);
    model.functions.push_back(std::move(graph));
  }
  return model;
}

std::string name_of(int64_t batch) { return "f" + std::to_string(batch); }
std::vector<std::vector<int64_t>> sizes_of(int64_t batch) { return {{batch, 8, 10, 10}}; }

// The key `ModelLoader::load` documents for `enumerated_model()` loaded with `compile`.
cache::CacheKey key_of(const ir::Model& model, const compile::CompileOptions& compile = {}) {
  cache::CacheKey key;
  auto hash = package::package_hash(model);
  EXPECT_TRUE(hash.ok());
  key.model_hash = hash.ok() ? *hash : 0;
  for (const ir::Graph& graph : model.functions) {
    key.functions.push_back(graph.name);
    key.input_shapes.push_back(sizes_of(std::stoll(graph.name.substr(1))));
  }
  key.specialization = cpu_only().identifier() + (compile.fuse ? "" : ";fuse=0") +
                       ";threads=" + std::to_string(cpu::team_size(compile.num_threads));
  key.engine_version = engine_version();
  key.cpu_features = specialization::cpu_features();
  return key;
}

// Runs `session` (function f<batch>) on seeded data; returns its output.
Buffer run_once(Session& session, int64_t batch) {
  Buffer input = random_input(ScalarType::Float32, sizes_of(batch)[0], 40 + batch);
  Buffer output;
  output.bytes.resize(static_cast<size_t>(batch) * 8 * 10 * 10 * sizeof(float));
  output.tensor = Tensor(ScalarType::Float32, {batch, 8, 10, 10}, output.bytes.data());
  std::vector<const Tensor*> in = {&input.tensor};
  std::vector<Tensor*> out = {&output.tensor};
  Status status = session.run(in, out);
  EXPECT_TRUE(status.ok()) << status.to_string();
  return output;
}

void expect_equal(const Buffer& actual, const Buffer& expected) {
  ASSERT_EQ(actual.bytes.size(), expected.bytes.size());
  EXPECT_EQ(std::memcmp(actual.bytes.data(), expected.bytes.data(), actual.bytes.size()), 0);
}


// A cold (eager) load's output of every function, after storing the artifact in `dir`.
std::vector<Buffer> cold_outputs(const ir::Model& model, const std::string& dir,
                                 const compile::CompileOptions& compile = {}) {
  cache::ModelCache cache(dir);
  auto cold = ModelLoader::load(model, cpu_only(), &cache, compile);
  EXPECT_TRUE(cold.ok()) << cold.status().to_string();
  std::vector<Buffer> outputs;
  if (!cold.ok()) return outputs;
  const LoadReport& report = (*cold)->load_report();
  EXPECT_EQ(report.cache, "miss");
  EXPECT_EQ(report.deferred_functions, 0u);
  EXPECT_EQ((*cold)->num_built(), static_cast<size_t>(kNumFunctions));  // eager
  for (int64_t batch = 1; batch <= kNumFunctions; ++batch) {
    auto session = (*cold)->bind(name_of(batch), sizes_of(batch));
    EXPECT_TRUE(session.ok() && session->is_built());
    if (session.ok()) outputs.push_back(run_once(*session, batch));
  }
  return outputs;
}

TEST(LazyBinding, AHitBuildsOnlyTheFunctionsRunAndMatchesTheEagerLoad) {
  ir::Model model = enumerated_model();
  TempDir dir("hit");
  std::vector<Buffer> eager = cold_outputs(model, dir.path.string());
  ASSERT_EQ(eager.size(), static_cast<size_t>(kNumFunctions));

  cache::ModelCache cache(dir.path.string());
  auto warm = ModelLoader::load(model, cpu_only(), &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  const LoadReport& report = (*warm)->load_report();
  EXPECT_EQ(report.cache, "hit");
  EXPECT_EQ(report.deferred_functions, static_cast<uint64_t>(kNumFunctions));
  EXPECT_EQ(report.adopted_constants, 2u);  // the two conv weights, shared by every function
  EXPECT_EQ(report.packed_constants, 0u);
  EXPECT_EQ((*warm)->num_built(), 0u);
  EXPECT_TRUE((*warm)->placement().empty());

  std::vector<Session> sessions;
  for (int64_t batch = 1; batch <= kNumFunctions; ++batch) {
    auto session = (*warm)->bind(name_of(batch), sizes_of(batch));
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    EXPECT_FALSE(session->is_built());
    sessions.push_back(*session);
  }
  EXPECT_EQ((*warm)->num_built(), 0u);  // binding builds nothing

  expect_equal(run_once(sessions[2], 3), eager[2]);
  EXPECT_TRUE(sessions[2].is_built());
  EXPECT_EQ((*warm)->num_built(), 1u);
  auto placement = (*warm)->placement();
  ASSERT_EQ(placement.size(), 1u);
  EXPECT_EQ(placement[0].function, "f3");
  EXPECT_EQ(placement[0].steps[0].device, "cpu:kiln");
  // A second session of the same function shares the built one.
  auto again = (*warm)->bind("f3", sizes_of(3));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->is_built());
  EXPECT_EQ(*again->function(), *sessions[2].function());

  for (int64_t batch = 1; batch <= kNumFunctions; ++batch) {
    expect_equal(run_once(sessions[static_cast<size_t>(batch - 1)], batch),
                 eager[static_cast<size_t>(batch - 1)]);
  }
  EXPECT_EQ((*warm)->num_built(), static_cast<size_t>(kNumFunctions));
  EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);  // every weight came from the entry
  EXPECT_TRUE((*warm)->build_warnings().empty());
}

// `build_on_hit`: those functions are built by the load itself (while a second thread checks
// the entry's payload), the others stay lazy, and every output is the eager load's.
TEST(LazyBinding, BuildOnHitBuildsThoseFunctionsDuringTheLoad) {
  ir::Model model = enumerated_model();
  TempDir dir("build_on_hit");
  std::vector<Buffer> eager = cold_outputs(model, dir.path.string());
  ASSERT_EQ(eager.size(), static_cast<size_t>(kNumFunctions));
  cache::ModelCache cache(dir.path.string());
  compile::CompileOptions compile;
  compile.build_on_hit = {"f2", "f4", "unknown"};
  auto warm = ModelLoader::load(model, cpu_only(), &cache, compile);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  const LoadReport& report = (*warm)->load_report();
  EXPECT_EQ(report.cache, "hit");
  EXPECT_EQ(report.deferred_functions, static_cast<uint64_t>(kNumFunctions - 2));
  EXPECT_EQ((*warm)->num_built(), 2u);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().corrupt_entries, 0u);
  for (int64_t batch = 1; batch <= kNumFunctions; ++batch) {
    auto session = (*warm)->bind(name_of(batch), sizes_of(batch));
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    EXPECT_EQ(session->is_built(), batch == 2 || batch == 4) << name_of(batch);
    expect_equal(run_once(*session, batch), eager[static_cast<size_t>(batch - 1)]);
  }
  EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);  // every weight came from the entry
}


// A payload that fails its checksum while `build_on_hit` builds: nothing built from it is
// kept; the entry is removed and the load is a miss that rebuilds and stores it.
TEST(LazyBinding, ACorruptPayloadFoundWhileBuildingIsAMissAndIsRebuilt) {
  ir::Model model = enumerated_model();
  TempDir dir("corrupt_payload");
  std::vector<Buffer> eager = cold_outputs(model, dir.path.string());
  ASSERT_EQ(eager.size(), static_cast<size_t>(kNumFunctions));
  cache::ModelCache cache(dir.path.string());
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok() && entries->size() == 1u);
  flip_payload_byte(entries->front());
  compile::CompileOptions compile;
  compile.build_on_hit = {"f1"};
  auto loaded = ModelLoader::load(model, cpu_only(), &cache, compile);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->load_report().cache, "miss");
  EXPECT_EQ((*loaded)->load_report().adopted_constants, 0u);
  EXPECT_EQ((*loaded)->packed_constants().num_packed(), 2u);  // packed again from the weights
  const cache::CacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 0u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.corrupt_entries, 1u);
  EXPECT_EQ(stats.rebuilds, 1u);
  auto warnings = cache.warnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_THAT(warnings.front(), HasSubstr("payload checksum mismatch"));
  for (int64_t batch = 1; batch <= kNumFunctions; ++batch) {
    auto session = (*loaded)->bind(name_of(batch), sizes_of(batch));
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    expect_equal(run_once(*session, batch), eager[static_cast<size_t>(batch - 1)]);
  }
  auto again = ModelLoader::load(model, cpu_only(), &cache, compile);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->load_report().cache, "hit");
}

// The same with a payload of over 4 MB, which is hashed on a thread of its own while the
// function builds (smaller ones are hashed inline first).
TEST(LazyBinding, ACorruptLargePayloadFoundOnTheCheckingThreadIsAMiss) {
  ModelBuilder b(7);
  int x = b.input("x", {2, 1024});
  int w = b.weight("w", {1024, 1100});
  int y = b.value("y", {2, 1100});
  b.node("MatMul", {x, w}, {y});
  b.output(y);
  ir::Model model = b.build();
  TempDir dir("corrupt_large_payload");
  cache::ModelCache cache(dir.path.string());
  ASSERT_TRUE(ModelLoader::load(model, cpu_only(), &cache).ok());
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok() && entries->size() == 1u);
  ASSERT_GT(entries->front().size_bytes, uint64_t{4} << 20);
  flip_payload_byte(entries->front());
  compile::CompileOptions compile;
  compile.build_on_hit = {"main"};
  cache::ModelCache reader(dir.path.string());
  auto loaded = ModelLoader::load(model, cpu_only(), &reader, compile);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->load_report().cache, "miss");
  EXPECT_EQ((*loaded)->load_report().adopted_constants, 0u);
  EXPECT_EQ(reader.stats().corrupt_entries, 1u);
  auto warnings = reader.warnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_THAT(warnings.front(), HasSubstr("payload checksum mismatch"));
  auto again = ModelLoader::load(model, cpu_only(), &reader, compile);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->load_report().cache, "hit");
}

TEST(LazyBinding, ShapesOutsideTheArtifactAreBuiltAtBind) {
  ir::Model model = enumerated_model();
  TempDir dir("outside");
  ASSERT_EQ(cold_outputs(model, dir.path.string()).size(), static_cast<size_t>(kNumFunctions));
  cache::ModelCache cache(dir.path.string());
  auto warm = ModelLoader::load(model, cpu_only(), &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  auto wrong = (*warm)->bind("f2", sizes_of(3));  // f2 is static: batch 2 only
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Error::InvalidArgument);
  EXPECT_EQ((*warm)->num_built(), 0u);  // the failed bind keeps nothing
  auto unknown = (*warm)->bind("g", sizes_of(1));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Error::NotFound);
}

TEST(LazyBinding, APlanThatDiffersFromTheArtifactWarnsAndRuns) {
  ir::Model model = enumerated_model();
  TempDir dir("fingerprint");
  std::vector<Buffer> eager = cold_outputs(model, dir.path.string());
  ASSERT_EQ(eager.size(), static_cast<size_t>(kNumFunctions));
  {
    // Rewrite the entry with f2's fingerprint changed (an engine whose plans changed without a
    // version change would leave such an entry).
    cache::ModelCache cache(dir.path.string());
    cache::CacheKey key = key_of(model);
    auto entry = cache.lookup(key);
    ASSERT_TRUE(entry.ok() && entry->has_value());
    auto view = artifact::read_artifact((*entry)->payload());
    ASSERT_TRUE(view.ok()) << view.status().to_string();
    ASSERT_EQ(view->functions[1].name, "f2");
    view->functions[1].plan_fingerprint ^= 1;
    auto payload = artifact::write_artifact(view->functions, view->packed);
    ASSERT_TRUE(cache.store(key, payload, key.model_hash).ok());
  }
  cache::ModelCache cache(dir.path.string());
  auto warm = ModelLoader::load(model, cpu_only(), &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  EXPECT_EQ((*warm)->load_report().cache, "hit");  // names and shapes match: checked on use
  auto f1 = (*warm)->bind("f1", sizes_of(1));
  ASSERT_TRUE(f1.ok());
  expect_equal(run_once(*f1, 1), eager[0]);
  EXPECT_TRUE((*warm)->build_warnings().empty());
  auto f2 = (*warm)->bind("f2", sizes_of(2));
  ASSERT_TRUE(f2.ok());
  expect_equal(run_once(*f2, 2), eager[1]);  // the plan derived now is used
  auto warnings = (*warm)->build_warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("function 'f2' for input shapes [2, 8, 10, 10]"));
  EXPECT_THAT(warnings[0], HasSubstr("did not match the plan of cache entry"));
}

TEST(LazyBinding, AFunctionThatFailsToBuildReportsItAtFirstRun) {
  // An entry that lists a function this engine cannot compile (no kernel for its op): the
  // load and the bind succeed; the first run fails naming the function and the node.
  ModelBuilder builder(7);
  int x = builder.input("x", {2, 3});
  int y = builder.value("y", {2, 3});
  builder.node("NoSuchOp", {x}, {y});
  builder.output(y);
  ir::Model model = builder.build();
  TempDir dir("fails");
  cache::ModelCache cache(dir.path.string());
  cache::CacheKey key;
  key.model_hash = *package::package_hash(model);
  key.functions = {"main"};
  key.input_shapes = {{{2, 3}}};
  key.specialization = cpu_only_key_specialization();
  key.engine_version = engine_version();
  key.cpu_features = specialization::cpu_features();
  artifact::FunctionRecord record{"main", {{2, 3}}, 1, 0, 1};
  ASSERT_TRUE(cache.store(key, artifact::write_artifact({record}, {}), key.model_hash).ok());

  auto loaded = ModelLoader::load(model, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->load_report().cache, "hit");
  auto session = (*loaded)->bind("main", {{2, 3}});
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  std::vector<float> data(6, 1.0f), result(6);
  Tensor in_tensor(ScalarType::Float32, {2, 3}, data.data());
  Tensor out_tensor(ScalarType::Float32, {2, 3}, result.data());
  std::vector<const Tensor*> in = {&in_tensor};
  std::vector<Tensor*> out = {&out_tensor};
  for (int attempt = 0; attempt < 2; ++attempt) {  // a failed build is tried again, and fails
    Status status = session->run(in, out);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), Error::OperatorMissing);
    EXPECT_THAT(status.message(), HasSubstr("build function 'main' for input shapes [2, 3]"));
    EXPECT_THAT(status.message(), HasSubstr("NoSuchOp"));
  }
  EXPECT_FALSE(session->function().ok());
  EXPECT_EQ((*loaded)->num_built(), 0u);
}

TEST(LazyBinding, ConcurrentFirstRunsBuildEachFunctionOnce) {
  ir::Model model = enumerated_model();
  TempDir dir("threads");
  compile::CompileOptions one_thread;  // oneDNN's own threads are not what this test checks
  one_thread.num_threads = 1;
  std::vector<Buffer> eager = cold_outputs(model, dir.path.string(), one_thread);
  ASSERT_EQ(eager.size(), static_cast<size_t>(kNumFunctions));
  cache::ModelCache cache(dir.path.string());
  auto warm = ModelLoader::load(model, cpu_only(), &cache, one_thread);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  ASSERT_EQ((*warm)->load_report().cache, "hit");

  // Two threads per function, each binding its own session and running it first.
  constexpr int kThreads = 2 * kNumFunctions;
  std::vector<std::thread> threads;
  std::vector<Buffer> outputs(kThreads);
  std::vector<const compile::CompiledFunction*> built(kThreads, nullptr);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      int64_t batch = 1 + t % kNumFunctions;
      auto session = (*warm)->bind(name_of(batch), sizes_of(batch));
      if (!session.ok()) return;
      outputs[static_cast<size_t>(t)] = run_once(*session, batch);
      auto function = session->function();
      if (function.ok()) built[static_cast<size_t>(t)] = *function;
      (void)(*warm)->placement();  // reading while others build
      (void)(*warm)->num_built();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    size_t function = static_cast<size_t>(t % kNumFunctions);
    expect_equal(outputs[static_cast<size_t>(t)], eager[function]);
    ASSERT_NE(built[static_cast<size_t>(t)], nullptr);
    EXPECT_EQ(built[static_cast<size_t>(t)], built[function]);  // built once, shared
  }
  EXPECT_EQ((*warm)->num_built(), static_cast<size_t>(kNumFunctions));
  EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);
}

}  // namespace
}  // namespace kiln::engine
