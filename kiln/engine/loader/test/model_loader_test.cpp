// The model loader: binding, placement, packages and the compiled-artifact cache.
#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/compile/test/test_models.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/test/loader_test_util.h>
#include <kiln/engine/specialization/devices.h>

#include <filesystem>
#include <fstream>

namespace kiln::engine {
namespace {

using namespace test_models;  // NOLINT(google-build-using-namespace): test helpers
using loader_test::expect_binds_like_reference;
using loader_test::TempDir;

TEST(ModelLoader, LoadsBindsRunsAndReportsPlacement) {
  ir::Model model = conv_residual_model();
  auto loaded = ModelLoader::load(model, cpu_only(), /*cache=*/nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  // The static function was specialized at load.
  auto report = (*loaded)->placement();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].function, "main");
  ASSERT_EQ(report[0].steps.size(), 2u);
  EXPECT_EQ(report[0].steps[0].device, "cpu:kiln");
  auto session = (*loaded)->bind("main", {{1, 8, 10, 10}});
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  auto again = (*loaded)->bind("main", {{1, 8, 10, 10}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*session->function(), *again->function());  // one compiled function, shared

  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 5));
  std::vector<const Tensor*> in = {&inputs[0].tensor};
  auto expected = interpret(model, in);
  auto outputs = output_buffers(**session->function());
  std::vector<Tensor*> out = {&outputs[0].tensor};
  ASSERT_TRUE(session->run(in, out).ok());
  expect_close(outputs[0].tensor, expected[0].tensor);
}

TEST(ModelLoader, LoadsFromAPackageWithoutCopyingWeights) {
  ir::Model model = conv_residual_model();
  auto bytes = package::write_package(model);
  ASSERT_TRUE(bytes.ok());
  std::vector<uint64_t> aligned((bytes->size() + 7) / 8);
  std::memcpy(aligned.data(), bytes->data(), bytes->size());
  auto view = package::PackageView::open(runtime::Span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(aligned.data()), bytes->size()));
  ASSERT_TRUE(view.ok()) << view.status().to_string();
  auto loaded = ModelLoader::load(*view, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto session = (*loaded)->bind("main", {{1, 8, 10, 10}});
  ASSERT_TRUE(session.ok());
  std::vector<Buffer> inputs;
  inputs.push_back(random_input(ScalarType::Float32, {1, 8, 10, 10}, 6));
  std::vector<const Tensor*> in = {&inputs[0].tensor};
  auto expected = interpret(model, in);
  auto outputs = output_buffers(**session->function());
  std::vector<Tensor*> out = {&outputs[0].tensor};
  ASSERT_TRUE(session->run(in, out).ok());
  expect_close(outputs[0].tensor, expected[0].tensor);
}

/// A model package in 8-byte aligned memory, opened as a view.
struct PackageBytes {
  explicit PackageBytes(const ir::Model& model) {
    auto bytes = package::write_package(model);
    EXPECT_TRUE(bytes.ok());
    size = bytes->size();
    words.resize((size + 7) / 8);
    std::memcpy(words.data(), bytes->data(), size);
    auto opened = package::PackageView::open(
        runtime::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(words.data()), size));
    EXPECT_TRUE(opened.ok()) << opened.status().to_string();
    view = std::make_unique<package::PackageView>(std::move(opened).get());
  }
  std::vector<uint64_t> words;
  size_t size = 0;
  std::unique_ptr<package::PackageView> view;
};

/// The same for conv_residual_model at `batch`.
void expect_runs_like_reference(LoadedModel& loaded, const ir::Model& model, int64_t batch = 1) {
  expect_binds_like_reference(loaded, model, {batch, 8, 10, 10});
}

TEST(ModelLoaderCache, ColdLoadStoresWarmLoadAdoptsPackedWeights) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("warm");
  {
    cache::ModelCache cache(dir.path.string());
    auto cold = ModelLoader::load(*package.view, cpu_only(), &cache);
    ASSERT_TRUE(cold.ok()) << cold.status().to_string();
    const LoadReport& report = (*cold)->load_report();
    EXPECT_EQ(report.cache, "miss");
    EXPECT_EQ(report.packed_constants, 2u);  // the two conv weights
    EXPECT_EQ(report.adopted_constants, 0u);
    EXPECT_TRUE(report.warnings.empty()) << report.warnings[0];
    EXPECT_EQ(cache.stats().stores, 1u);
    expect_runs_like_reference(**cold, model);
  }
  cache::ModelCache cache(dir.path.string());  // a new process would start like this
  auto warm = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  const LoadReport& report = (*warm)->load_report();
  EXPECT_EQ(report.cache, "hit");
  EXPECT_EQ(report.packed_constants, 0u);  // nothing repacked
  EXPECT_EQ(report.adopted_constants, 2u);
  EXPECT_FALSE(report.cache_entry.empty());
  EXPECT_EQ(cache.stats().hits, 1u);
  expect_runs_like_reference(**warm, model);
}

TEST(ModelLoaderCache, ABackgroundStoreLeavesTheEntryForTheNextLoad) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("background");
  compile::CompileOptions background;
  background.store_in_background = true;
  {
    cache::ModelCache cache(dir.path.string());
    auto cold = ModelLoader::load(*package.view, cpu_only(), &cache, background);
    ASSERT_TRUE(cold.ok()) << cold.status().to_string();
    EXPECT_EQ((*cold)->load_report().cache, "miss");
    EXPECT_TRUE((*cold)->load_report().stored_in_background);
    EXPECT_EQ(cache.stats().stores, 0u);  // this cache object did not write it
    expect_runs_like_reference(**cold, model);
  }  // the model may go before its store is done: the job holds what it writes
  wait_for_background_stores();
  cache::ModelCache cache(dir.path.string());
  auto listed = cache.list();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
  auto warm = ModelLoader::load(*package.view, cpu_only(), &cache, background);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  EXPECT_EQ((*warm)->load_report().cache, "hit");
  EXPECT_FALSE((*warm)->load_report().stored_in_background);
  EXPECT_EQ((*warm)->load_report().packed_constants, 0u);
  expect_runs_like_reference(**warm, model);
}

TEST(ModelLoaderCache, EachSpecializationGetsItsOwnEntry) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("options");
  cache::ModelCache cache(dir.path.string());
  SpecializationOptions reshapes = cpu_only();
  reshapes.expect_frequent_reshapes = true;
  compile::CompileOptions no_fusion;
  no_fusion.fuse = false;
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache).ok());
  ASSERT_TRUE(ModelLoader::load(*package.view, reshapes, &cache).ok());
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache, no_fusion).ok());
  // Thread counts too: a plan's scratch sizes and which steps split their work follow them.
  compile::CompileOptions one_thread, three_threads;
  one_thread.num_threads = 1;
  three_threads.num_threads = 3;
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache, one_thread).ok());
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache, three_threads).ok());
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 5u);
  for (const auto& entry : *entries) EXPECT_EQ(entry.model_hash, package.view->content_hash());
  auto again = ModelLoader::load(*package.view, reshapes, &cache);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->load_report().cache, "hit");
  auto one_again = ModelLoader::load(*package.view, cpu_only(), &cache, one_thread);
  ASSERT_TRUE(one_again.ok());
  EXPECT_EQ((*one_again)->load_report().cache, "hit");
}

TEST(ModelLoaderCache, CorruptEntryIsAMissAndIsRebuilt) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("corrupt");
  cache::ModelCache cache(dir.path.string());
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache).ok());
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  {
    std::fstream file(entries->front().path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(entries->front().size_bytes - 3));
    file.put('\x5a');
  }
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->load_report().cache, "miss");
  EXPECT_EQ(cache.stats().corrupt_entries, 1u);
  EXPECT_EQ(cache.stats().rebuilds, 1u);
  expect_runs_like_reference(**loaded, model);
  auto warm = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ((*warm)->load_report().cache, "hit");
}

TEST(ModelLoaderCache, EngineVersionNamesTheBuildFingerprint) {
  const std::string_view fingerprint = engine_build_fingerprint();
  ASSERT_EQ(fingerprint.size(), 16u);
  EXPECT_EQ(fingerprint.find_first_not_of("0123456789abcdef"), std::string_view::npos)
      << fingerprint;
  EXPECT_THAT(engine_version(), HasSubstr(" build " + std::string(fingerprint) + " / oneDNN "));
}

TEST(ModelLoaderCache, EntryOfABuildWithOtherSourcesIsNotAdopted) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("other_build");
  cache::ModelCache cache(dir.path.string());
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache).ok());
  auto stored = ModelLoader::cache_key(*package.view, cpu_only());
  ASSERT_TRUE(stored.ok()) << stored.status().to_string();
  const cache::CacheKey& key = *stored;
  auto entry = cache.lookup(key);
  ASSERT_TRUE(entry.ok() && entry->has_value());
  const auto payload = (*entry)->payload();
  const std::vector<uint8_t> bytes(payload.begin(), payload.end());
  entry->reset();
  // The same entry as a build of other sources (same version, other fingerprint) stored it.
  cache::CacheKey other = key;
  other.engine_version.replace(other.engine_version.find(engine_build_fingerprint()),
                               engine_build_fingerprint().size(), "0123456789abcdef");
  ASSERT_NE(other.engine_version, key.engine_version);
  ASSERT_TRUE(cache.purge().ok());
  ASSERT_TRUE(cache.store(other, bytes, key.model_hash).ok());
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->load_report().cache, "miss");
  expect_runs_like_reference(**loaded, model);
}

TEST(ModelLoaderCache, ArtifactThatDoesNotReadIsReplacedWithAWarning) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("artifact");
  cache::ModelCache cache(dir.path.string());
  // The key the loader documents, holding a payload that is not an artifact.
  cache::CacheKey key;
  key.model_hash = package.view->content_hash();
  key.functions = {"main"};
  key.input_shapes = {{{1, 8, 10, 10}}};
  key.specialization = cpu_only_key_specialization();
  key.engine_version = engine_version();
  key.cpu_features = specialization::cpu_features();
  std::vector<uint8_t> junk(256, 0x11);
  ASSERT_TRUE(cache.store(key, junk, key.model_hash).ok());
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const LoadReport& report = (*loaded)->load_report();
  EXPECT_EQ(report.cache, "miss");
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_THAT(report.warnings[0], HasSubstr("compiled artifact: magic"));
  expect_runs_like_reference(**loaded, model);
  auto warm = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ((*warm)->load_report().cache, "hit");
}

TEST(ModelLoaderCache, UnwritableDirectoryLoadsUncachedWithAWarning) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("unwritable");
  std::filesystem::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "not a directory";
  cache::ModelCache cache((dir.path / "file").string());
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const LoadReport& report = (*loaded)->load_report();
  EXPECT_EQ(report.cache, "miss");
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_THAT(report.warnings[0], HasSubstr("compiled artifact not stored"));
  expect_runs_like_reference(**loaded, model);
}

TEST(ModelLoaderCache, NoCacheOrEmptyDirectoryIsOff) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  cache::ModelCache disabled("");
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &disabled);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ((*loaded)->load_report().cache, "off");
  auto uncached = ModelLoader::load(*package.view, cpu_only());
  ASSERT_TRUE(uncached.ok());
  EXPECT_EQ((*uncached)->load_report().cache, "off");
}

TEST(ModelLoaderCache, AModelWithoutStaticFunctionsIsNotCached) {
  ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  PackageBytes package(model);
  TempDir dir("symbolic");
  cache::ModelCache cache(dir.path.string());
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  // Nothing is specialized at load, so there is nothing to store (not an empty "hit" later).
  EXPECT_EQ((*loaded)->load_report().cache, "off");
  EXPECT_EQ(cache.stats().stores, 0u);
  EXPECT_EQ(cache.stats().misses, 0u);
  expect_runs_like_reference(**loaded, model, 2);
}

// A function of symbolic inputs bound after the load gets one artifact per shapes: the next
// process binding the same shapes adopts its packed weights instead of packing them.
TEST(ModelLoaderCache, ShapesBoundAfterTheLoadAreStoredAndAdopted) {
  ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  PackageBytes package(model);
  TempDir dir("shapes");
  {
    cache::ModelCache cache(dir.path.string());
    auto cold = ModelLoader::load(*package.view, cpu_only(), &cache);
    ASSERT_TRUE(cold.ok()) << cold.status().to_string();
    EXPECT_EQ((*cold)->load_report().cache, "off");  // nothing static to store at load
    expect_runs_like_reference(**cold, model, 2);
    EXPECT_EQ((*cold)->shape_cache_stores(), 1u);
    EXPECT_EQ((*cold)->shape_cache_hits(), 0u);
    EXPECT_EQ((*cold)->packed_constants().num_packed(), 2u);
  }
  {
    cache::ModelCache cache(dir.path.string());
    auto warm = ModelLoader::load(*package.view, cpu_only(), &cache);
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    expect_runs_like_reference(**warm, model, 2);
    EXPECT_EQ((*warm)->shape_cache_hits(), 1u);
    EXPECT_EQ((*warm)->shape_cache_stores(), 0u);
    EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);  // adopted, not packed
    EXPECT_EQ((*warm)->packed_constants().num_adopted_used(), 2u);
    expect_runs_like_reference(**warm, model, 3);  // another shape: a miss, stored
    EXPECT_EQ((*warm)->shape_cache_stores(), 1u);
  }
  cache::ModelCache cache(dir.path.string());
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 2u);  // batch 2, batch 3
}

/// x [n, 16, 16, 16] → Resize (linear, half_pixel, scales 1, 1, 2, 2) → y: with
/// small_ops_own_loops off, oneDNN's resampling, taken once proved against ONNX's coordinates.
/// (On kiln's loops, the default, it reads the reference kernel's taps and needs no proof.)
ir::Model resize_model() {
  ModelBuilder b(8);
  ir::Dim n = ir::Dim::symbol("n");
  int x = b.input("x", {n, 16, 16, 16});
  int scales = b.weight_of("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
  int y = b.value("y", {n, 16, 32, 32});
  b.node("Resize", {x, -1, scales}, {y}, {ir::Attribute{"mode", std::string("linear")}});
  b.output(y);
  return b.build();
}

// The entry of a shape records the plan its proofs allowed: the next process rebuilds it
// without proving again, and one whose plan differs from the entry's proves again.
TEST(ModelLoaderCache, AShapeTheEntryRecordsIsBuiltWithoutProvingItsResizeAgain) {
  ir::Model model = resize_model();
  TempDir dir("proofs");
  const std::vector<int64_t> sizes = {1, 16, 16, 16};
  compile::CompileOptions onednn;
  onednn.small_ops_own_loops = false;
  auto load_and_run = [&](uint64_t expected_hits, uint64_t expected_proofs) {
    cache::ModelCache cache(dir.path.string());
    auto loaded = ModelLoader::load(model, cpu_only(), &cache, onednn);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    const uint64_t proofs = cpu::resize_proofs_run();
    expect_binds_like_reference(**loaded, model, sizes);
    EXPECT_EQ((*loaded)->shape_cache_hits(), expected_hits);
    EXPECT_EQ((*loaded)->shape_cache_stores(), 1 - expected_hits);
    EXPECT_EQ(cpu::resize_proofs_run() - proofs, expected_proofs);
    auto session = (*loaded)->bind("main", {sizes});
    ASSERT_TRUE(session.ok());
    EXPECT_EQ((*session->function())->placement()[0].device, "cpu:onednn");
  };
  load_and_run(/*hits=*/0, /*proofs=*/1);  // cold: proved, stored
  load_and_run(/*hits=*/1, /*proofs=*/0);  // warm: the entry's plan, unproved
  {
    // Rewrite the entry with its plan's fingerprint changed (as if the proof had failed when
    // it was made, and the Resize had run on another kernel).
    cache::ModelCache cache(dir.path.string());
    cache::CacheKey key;
    auto hash = package::package_hash(model);
    ASSERT_TRUE(hash.ok());
    key.model_hash = *hash;
    key.functions = {"main"};
    key.input_shapes = {{sizes}};
    key.specialization =
        cpu_only().identifier() + ";small=0;threads=" + std::to_string(cpu::team_size(0));
    key.engine_version = engine_version();
    key.cpu_features = specialization::cpu_features();
    auto entry = cache.lookup(key);
    ASSERT_TRUE(entry.ok() && entry->has_value());
    auto view = artifact::read_artifact((*entry)->payload());
    ASSERT_TRUE(view.ok()) << view.status().to_string();
    view->functions[0].plan_fingerprint ^= 1;
    auto payload = artifact::write_artifact(view->functions, view->packed);
    ASSERT_TRUE(cache.store(key, payload, key.model_hash).ok());
  }
  load_and_run(/*hits=*/0, /*proofs=*/1);  // proved again, stored again
  load_and_run(/*hits=*/1, /*proofs=*/0);
}

TEST(ModelLoaderAot, CacheKeyIsTheKeyLoadStoresUnder) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  TempDir dir("aot_key");
  cache::ModelCache cache(dir.path.string());
  compile::CompileOptions no_fusion;
  no_fusion.fuse = false;
  auto key = ModelLoader::cache_key(*package.view, cpu_only(), no_fusion);
  ASSERT_TRUE(key.ok()) << key.status().to_string();
  EXPECT_EQ(key->model_hash, package.view->content_hash());
  EXPECT_EQ(key->functions, std::vector<std::string>{"main"});
  EXPECT_FALSE(cache.contains(*key));
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache, no_fusion).ok());
  EXPECT_TRUE(cache.contains(*key));
  auto other = ModelLoader::cache_key(*package.view, cpu_only());
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->hex(), key->hex());  // fusion is part of the key
  EXPECT_FALSE(cache.contains(*other));
}

TEST(ModelLoaderAot, AModelWithoutStaticFunctionsHasNoKeyAndNoArtifact) {
  ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  PackageBytes package(model);
  auto key = ModelLoader::cache_key(*package.view, cpu_only());
  EXPECT_EQ(key.status().code(), runtime::Error::NotSupported);
  EXPECT_THAT(key.status().message(), HasSubstr("no function has only static inputs"));
  auto artifact = ModelLoader::compile_artifact(*package.view, cpu_only());
  EXPECT_EQ(artifact.status().code(), runtime::Error::NotSupported);
  EXPECT_THAT(artifact.status().message(), HasSubstr("compile artifact"));
}

TEST(ModelLoaderAot, CompileArtifactIsTheEntryAMissStores) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  auto artifact = ModelLoader::compile_artifact(*package.view, cpu_only());
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  TempDir dir("aot_miss");
  cache::ModelCache cache(dir.path.string());
  ASSERT_TRUE(ModelLoader::load(*package.view, cpu_only(), &cache).ok());
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  std::ifstream in(entries->front().path, std::ios::binary);
  std::vector<uint8_t> stored((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(stored, *artifact);
}

TEST(ModelLoaderAot, AnInstalledArtifactMakesTheFirstLoadAHit) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  auto artifact = ModelLoader::compile_artifact(*package.view, cpu_only());
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  auto key = ModelLoader::cache_key(*package.view, cpu_only());
  ASSERT_TRUE(key.ok());
  TempDir dir("aot_install");
  cache::ModelCache cache(dir.path.string());  // a fresh device
  ASSERT_TRUE(cache.store_entry(*key, *artifact).ok());
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const LoadReport& report = (*loaded)->load_report();
  EXPECT_EQ(report.cache, "hit");
  EXPECT_EQ(report.packed_constants, 0u);
  EXPECT_EQ(report.adopted_constants, 2u);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings[0];
  expect_runs_like_reference(**loaded, model);
}

TEST(ModelLoaderAot, AnArtifactOfOtherOptionsIsRejectedAndTheLoadCompiles) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  SpecializationOptions reshapes = cpu_only();
  reshapes.expect_frequent_reshapes = true;
  auto artifact = ModelLoader::compile_artifact(*package.view, reshapes);
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  auto key = ModelLoader::cache_key(*package.view, cpu_only());
  ASSERT_TRUE(key.ok());
  TempDir dir("aot_other");
  cache::ModelCache cache(dir.path.string());
  auto status = cache.store_entry(*key, *artifact);
  EXPECT_EQ(status.code(), runtime::Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("entry holds a different key"));
  std::vector<uint8_t> corrupt = *artifact;
  corrupt[corrupt.size() / 2] ^= 0x01;
  auto reshapes_key = ModelLoader::cache_key(*package.view, reshapes);
  ASSERT_TRUE(reshapes_key.ok());
  EXPECT_THAT(cache.store_entry(*reshapes_key, corrupt).message(), HasSubstr("checksum"));
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->load_report().cache, "miss");
  EXPECT_EQ((*loaded)->load_report().packed_constants, 2u);
  expect_runs_like_reference(**loaded, model);
}

TEST(ModelLoaderAot, AnArtifactOfAnotherThreadCountIsRejected) {
  ir::Model model = conv_residual_model();
  PackageBytes package(model);
  compile::CompileOptions one_thread, three_threads;
  one_thread.num_threads = 1;
  three_threads.num_threads = 3;
  auto artifact = ModelLoader::compile_artifact(*package.view, cpu_only(), three_threads);
  ASSERT_TRUE(artifact.ok()) << artifact.status().to_string();
  auto key = ModelLoader::cache_key(*package.view, cpu_only(), one_thread);
  ASSERT_TRUE(key.ok());
  EXPECT_THAT(key->specialization, HasSubstr(";threads=1"));
  TempDir dir("aot_threads");
  cache::ModelCache cache(dir.path.string());
  auto status = cache.store_entry(*key, *artifact);
  EXPECT_EQ(status.code(), runtime::Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("entry holds a different key"));
  auto three_key = ModelLoader::cache_key(*package.view, cpu_only(), three_threads);
  ASSERT_TRUE(three_key.ok());
  EXPECT_TRUE(cache.store_entry(*three_key, *artifact).ok());
  auto loaded = ModelLoader::load(*package.view, cpu_only(), &cache, three_threads);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->load_report().cache, "hit");
}

TEST(ModelLoader, WeightsArePackedOnceForEveryShape) {
  ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  auto loaded = ModelLoader::load(model, cpu_only());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_runs_like_reference(**loaded, model, 1);
  EXPECT_EQ((*loaded)->packed_constants().num_packed(), 2u);
  expect_runs_like_reference(**loaded, model, 3);
  expect_runs_like_reference(**loaded, model, 2);
  // Three shapes, two conv weights each: packed once, reused by the other shapes.
  EXPECT_EQ((*loaded)->packed_constants().num_packed(), 2u);
  EXPECT_EQ((*loaded)->packed_constants().num_reused(), 4u);
}

// x [n, 8] → MatMul(W [8, 4]) → Add(b) → Relu: a function a shape-generic plan runs on oneDNN.
ir::Model matmul_model() {
  ModelBuilder b(7);
  ir::Dim n = ir::Dim::symbol("n");
  int x = b.input("x", {n, 8});
  int w = b.weight("w", {8, 4});
  int bias = b.weight("b", {4});
  int mm = b.value("mm", {n, 4});
  int sum = b.value("sum", {n, 4});
  int y = b.value("y", {n, 4});
  b.node("MatMul", {x, w}, {mm});
  b.node("Add", {mm, bias}, {sum});
  b.node("Relu", {sum}, {y});
  b.output(y);
  return b.build();
}

// With expect_frequent_reshapes, a function of symbolic inputs has one shape-generic plan:
// `prepare` builds it, and binding new shapes builds nothing more.
TEST(ModelLoader, FrequentReshapesShareOneGenericPlanForEveryShape) {
  ir::Model model = matmul_model();
  SpecializationOptions options = cpu_only();
  options.expect_frequent_reshapes = true;
  auto loaded = ModelLoader::load(model, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->num_built(), 0u);
  ASSERT_TRUE((*loaded)->prepare("main").ok());
  EXPECT_EQ((*loaded)->num_built(), 1u);
  for (int64_t n : {1, 3, 2, 40}) expect_binds_like_reference(**loaded, model, {n, 8}, 11);
  EXPECT_EQ((*loaded)->num_built(), 1u);
  auto placement = (*loaded)->placement();
  ASSERT_EQ(placement.size(), 1u);
  EXPECT_TRUE(placement[0].input_sizes.empty());

  auto session = (*loaded)->bind("main", {{2, 8}});
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  auto function = session->function();
  ASSERT_TRUE(function.ok());
  EXPECT_TRUE((*function)->is_generic());

  auto wrong = (*loaded)->bind("main", {{2, 7}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error(), runtime::Error::InvalidArgument);
  EXPECT_THAT(wrong.status().message(), ::testing::HasSubstr("input 'x' has shape [2, 7]"));
  EXPECT_EQ((*loaded)->prepare("nope").code(), runtime::Error::NotFound);

  // Without the flag the first shape gets its own plan; the second builds the generic plan
  // too (for its first run), and its own when asked for its function.
  auto per_shape = ModelLoader::load(model, cpu_only());
  ASSERT_TRUE(per_shape.ok());
  ASSERT_TRUE((*per_shape)->prepare("main").ok());  // nothing to prepare
  EXPECT_EQ((*per_shape)->num_built(), 0u);
  expect_binds_like_reference(**per_shape, model, {1, 8}, 11);
  EXPECT_EQ((*per_shape)->num_built(), 1u);
  expect_binds_like_reference(**per_shape, model, {3, 8}, 11);
  EXPECT_EQ((*per_shape)->num_built(), 3u);
}

// A function with a Conv keeps its per-shape plans even with expect_frequent_reshapes: its
// reference kernel would run it many times slower than oneDNN.
TEST(ModelLoader, FrequentReshapesRunConvsOnOneGenericPlan) {
  // With kiln's loops (AVX-512, or forced for tests), one shape-generic plan whose Convs run on
  // ops made for each shape (compile::ShapedOp); without them, per-shape plans.
  ir::Model model = conv_residual_model(ir::Dim::symbol("n"));
  SpecializationOptions options = cpu_only();
  options.expect_frequent_reshapes = true;
  auto loaded = ModelLoader::load(model, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  ASSERT_TRUE((*loaded)->prepare("main").ok());
  const bool generic = cpu::own_vector_loops();
  EXPECT_EQ((*loaded)->num_built(), generic ? 1u : 0u);
  for (int64_t batch : {1, 3, 2}) expect_runs_like_reference(**loaded, model, batch);
  EXPECT_EQ((*loaded)->num_built(), generic ? 1u : 3u);
  for (const auto& function : (*loaded)->placement()) {
    EXPECT_EQ(function.input_sizes.empty(), generic);
    for (const auto& step : function.steps) {
      // Both chains fused (the residual's declared shape is the Conv's), nothing left on the
      // reference kernels.
      EXPECT_THAT(step.device, ::testing::AnyOf("cpu:onednn", "cpu:kiln")) << step.node;
      EXPECT_EQ(step.op, "Conv") << step.node;
    }
  }
}

// With kiln's loops: the shape-generic plan of a Winograd Conv network packs its weights at
// the build (one F(4x4, 3x3) packing for every image size) and stores them; a warm process
// adopts them and packs nothing at any image size, 13 x 13 and 14 x 14 included (where a
// per-shape plan takes F(3x3, 3x3) tiles).
TEST(ModelLoader, AGenericConvPlanPacksItsWeightsOnceForEveryImageSize) {
  if (!cpu::own_vector_loops()) GTEST_SKIP() << "kiln's loops do not run on this CPU";
  ModelBuilder b(41);
  ir::Dim h = ir::Dim::symbol("h"), w = ir::Dim::symbol("w");
  int x = b.input("x", {1, 16, h, w});
  int w1 = b.weight("w1", {16, 16, 3, 3}, 0.2f);
  int w2 = b.weight("w2", {16, 16, 3, 3}, 0.2f);
  int c1 = b.value("c1", {1, 16, h, w}), r1 = b.value("r1", {1, 16, h, w});
  int y = b.value("y", {1, 16, h, w});
  std::vector<ir::Attribute> conv = {ints("pads", {1, 1, 1, 1}), ints("kernel_shape", {3, 3})};
  b.node("Conv", {x, w1}, {c1}, conv);
  b.node("Relu", {c1}, {r1});
  b.node("Conv", {r1, w2}, {y}, conv);
  b.output(y);
  const ir::Model model = b.build();
  SpecializationOptions reshapes = cpu_only();
  reshapes.expect_frequent_reshapes = true;
  TempDir dir("generic_conv");
  const std::vector<std::vector<int64_t>> images = {{20, 12}, {13, 13}, {14, 14}, {5, 30}};
  {
    cache::ModelCache cache(dir.path.string());
    auto cold = ModelLoader::load(model, reshapes, &cache);
    ASSERT_TRUE(cold.ok()) << cold.status().to_string();
    ASSERT_TRUE((*cold)->prepare("main").ok());
    EXPECT_EQ((*cold)->packed_constants().num_packed(), 2u);
    for (const auto& hw : images) {
      expect_binds_like_reference(**cold, model, {1, 16, hw[0], hw[1]}, 3);
    }
    EXPECT_EQ((*cold)->packed_constants().num_packed(), 2u);
    EXPECT_EQ((*cold)->num_built(), 1u);
  }
  cache::ModelCache cache(dir.path.string());
  auto warm = ModelLoader::load(model, reshapes, &cache);
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  ASSERT_TRUE((*warm)->prepare("main").ok());
  EXPECT_EQ((*warm)->shape_cache_hits(), 1u);
  for (const auto& hw : images) {
    expect_binds_like_reference(**warm, model, {1, 16, hw[0], hw[1]}, 4);
  }
  EXPECT_EQ((*warm)->packed_constants().num_packed(), 0u);  // adopted, for every image size
}

}  // namespace
}  // namespace kiln::engine
