// KilnBackend's load-time options: the typed KilnBackendOptions builder, the options as the
// model loader factory receives them, their mapping to engine specializations, and the cache
// entries a specialization leaves.
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/backends/kiln/kiln_backend_options.h>
#include <kiln/backends/kiln/model_loader_factory.h>
#include <kiln/backends/kiln/test/kiln_test_programs.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/specialization/specialization_options.h>
#include <kiln/runtime/backend/named_data.h>
#include <kiln/runtime/backend/options.h>
#include <kiln/runtime/backend/options_map.h>
#include <kiln/runtime/backend/registry.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

namespace kiln::backends {
namespace {

using namespace kiln_test;  // the programs and helpers shared by the backend's tests
using engine::specialization::ComputeKind;
using engine::specialization::SpecializationOptions;
using runtime::BackendOption;
using runtime::BackendOptions;
using runtime::Error;
using runtime::Status;
using ::testing::HasSubstr;

std::vector<BackendOption> options_of(const KilnBackendOptions& builder) {
  return std::vector<BackendOption>(builder.view().begin(), builder.view().end());
}

// ---- The builder ----

TEST(KilnBackendOptions, EachSetterSetsItsKeyTypeAndValue) {
  EXPECT_EQ(options_of(KilnBackendOptions().setComputeUnit(ComputeUnit::PREFER_GPU)),
            (std::vector<BackendOption>{{"compute_unit", std::string("prefer_gpu")}}));
  EXPECT_EQ(options_of(KilnBackendOptions().setExpectFrequentReshapes(true)),
            (std::vector<BackendOption>{{"expect_frequent_reshapes", true}}));
  EXPECT_EQ(options_of(KilnBackendOptions().setExpectFrequentReshapes(false)),
            (std::vector<BackendOption>{{"expect_frequent_reshapes", false}}));
  EXPECT_EQ(options_of(KilnBackendOptions().setShareMultifunctionModel(true)),
            (std::vector<BackendOption>{{"share_multifunction_model", true}}));
  EXPECT_EQ(options_of(KilnBackendOptions().setCacheDirectory("some/dir")),
            (std::vector<BackendOption>{{"cache_dir", std::string("some/dir")}}));
  EXPECT_EQ(options_of(KilnBackendOptions().setCacheDirectory("")),
            (std::vector<BackendOption>{{"cache_dir", std::string()}}));
  EXPECT_EQ(options_of(KilnBackendOptions().setNumThreads(3)),
            (std::vector<BackendOption>{{"num_threads", int64_t{3}}}));
}

TEST(KilnBackendOptions, ComputeUnitsAreTheOptionValuesTheBackendAccepts) {
  const std::vector<std::pair<ComputeUnit, std::string>> units = {
      {ComputeUnit::ALL, "all"},
      {ComputeUnit::CPU_ONLY, "cpu_only"},
      {ComputeUnit::CPU_AND_GPU, "cpu_and_gpu"},
      {ComputeUnit::PREFER_CPU, "prefer_cpu"},
      {ComputeUnit::PREFER_GPU, "prefer_gpu"}};
  std::vector<std::string> accepted;
  for (const auto& spec : KilnBackend().option_specs()) {
    if (spec.key == kComputeUnitKey) accepted = spec.choices;
  }
  for (const auto& [unit, name] : units) {
    EXPECT_EQ(to_string(unit), name);
    EXPECT_THAT(accepted, ::testing::Contains(name));
  }
  EXPECT_EQ(accepted.size(), units.size());
}

TEST(KilnBackendOptions, ChainsKeepsFirstSetOrderAndReplacesRepeats) {
  auto builder = KilnBackendOptions()
                     .setComputeUnit(ComputeUnit::CPU_ONLY)
                     .setNumThreads(2)
                     .setExpectFrequentReshapes(true)
                     .setComputeUnit(ComputeUnit::CPU_AND_GPU)
                     .setShareMultifunctionModel(false)
                     .setCacheDirectory("cache")
                     .setWinograd(false);
  EXPECT_EQ(options_of(builder),
            (std::vector<BackendOption>{{"compute_unit", std::string("cpu_and_gpu")},
                                        {"num_threads", int64_t{2}},
                                        {"expect_frequent_reshapes", true},
                                        {"share_multifunction_model", false},
                                        {"cache_dir", std::string("cache")},
                                        {"winograd", false}}));
}

TEST(KilnBackendOptions, UnsetOptionsAreAbsent) {
  KilnBackendOptions builder;
  EXPECT_EQ(builder.backend_id(), "KilnBackend");
  EXPECT_TRUE(builder.view().empty());
  builder.setExpectFrequentReshapes(true);
  EXPECT_EQ(builder.view().size(), 1u);
  for (std::string_view key :
       {kComputeUnitKey, kShareMultifunctionModelKey, kCacheDirKey, kNumThreadsKey}) {
    auto value = runtime::get_option<std::string>(builder.view(), key);
    ASSERT_TRUE(value.ok()) << key;
    EXPECT_FALSE(value->has_value()) << key;
  }
}

TEST(KilnBackendOptions, MapCopiesTheBuilderUnderItsBackendId) {
  LoadBackendOptionsMap map;
  {
    std::string dir = "a/cache/dir";
    ASSERT_TRUE(map.set_options(KilnBackendOptions()
                                    .setComputeUnit(ComputeUnit::CPU_ONLY)
                                    .setNumThreads(2)
                                    .setCacheDirectory(dir))
                    .ok());
    dir.assign(dir.size(), 'x');  // the map owns its copy
  }
  ASSERT_TRUE(map.has_options("KilnBackend"));
  auto options = map.get_options("KilnBackend");
  EXPECT_EQ(std::vector<BackendOption>(options.begin(), options.end()),
            (std::vector<BackendOption>{{"compute_unit", std::string("cpu_only")},
                                        {"num_threads", int64_t{2}},
                                        {"cache_dir", std::string("a/cache/dir")}}));
}

// Inits a KilnBackend delegate of `package` (manifest: function "main") directly with `map`'s
// options; runs `check` on the handle, then destroys it.
template <typename Check>
void with_delegate(const LoadBackendOptionsMap& map, std::vector<uint8_t> package, Check check) {
  OnePackage named_data(std::move(package));
  runtime::BackendInitContext context("forward", "forward_0", map.get_options("KilnBackend"),
                                      &named_data);
  std::vector<uint8_t> manifest = bytes_of(function_manifest());
  runtime::FreeableBuffer processed(manifest.data(), manifest.size());
  KilnBackend backend;
  auto handle = backend.init(context, &processed, {});
  ASSERT_TRUE(handle.ok()) << handle.status();
  check(*handle);
  backend.destroy(*handle);
}

TEST(KilnBackendOptions, InitSeesEveryOptionOfTheBuilder) {
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options(KilnBackendOptions()
                                  .setComputeUnit(ComputeUnit::PREFER_CPU)
                                  .setExpectFrequentReshapes(true)
                                  .setShareMultifunctionModel(true)
                                  .setCacheDirectory("")
                                  .setNumThreads(3)
                                  .setWinograd(false))
                  .ok());
  with_delegate(map, package_of(matmul_add_relu(2)), [](runtime::DelegateHandle* handle) {
    const KilnBackendConfig& config = KilnBackend::config_of(handle);
    EXPECT_EQ(config.compute_unit, "prefer_cpu");
    EXPECT_TRUE(config.expect_frequent_reshapes);
    EXPECT_TRUE(config.share_multifunction_model);
    EXPECT_EQ(config.cache_dir, "");
    EXPECT_EQ(config.num_threads, 3);
    EXPECT_FALSE(config.winograd);
  });
}

// With expect_frequent_reshapes, a function of symbolic inputs gets its shape-generic plan at
// init (built once, before any call), and every batch runs on it like the reference kernels.
TEST(KilnBackendOptions, FrequentReshapesBuildOneGenericPlanAtInitForEveryShape) {
  reset_model_loader_factory();  // the real loader
  LoadBackendOptionsMap map;
  ASSERT_TRUE(
      map.set_options(KilnBackendOptions().setExpectFrequentReshapes(true).setCacheDirectory(""))
          .ok());
  with_delegate(
      map, package_of(matmul_add_relu(ir::Dim::symbol("batch"))),
      [](runtime::DelegateHandle* handle) {
        const engine::LoadedModel* model = KilnBackend::model_of(handle);
        EXPECT_EQ(model->num_built(), 1u);
        auto placement = model->placement();
        ASSERT_EQ(placement.size(), 1u);
        EXPECT_TRUE(placement[0].input_sizes.empty());  // one plan for every shape
        ASSERT_FALSE(placement[0].steps.empty());
        // MatMul + bias + Relu, fused
        // (on kiln's loops or oneDNN's, as the CPU decides)
        const auto& step = placement[0].steps[0];
        EXPECT_EQ(step.device, step.detail.rfind("kiln", 0) == 0 ? "cpu:kiln" : "cpu:onednn")
            << step.detail;
        EXPECT_THAT(step.detail, HasSubstr("run-time rows"));
      });

  static const auto package = package_of(matmul_add_relu(ir::Dim::symbol("batch")));
  auto kiln = load(kiln_program(package, function_manifest(), 0), &map);
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  for (int64_t batch : {3, 17, 1, 3}) {
    auto reference = load(reference_program(batch));
    ASSERT_TRUE(reference.ok()) << reference.status();
    uint32_t seed = static_cast<uint32_t>(batch);
    expect_near(run(*kiln->method, batch, seed), run(*reference->method, batch, seed));
  }
}

TEST(KilnBackendOptions, OutOfRangeThreadCountFailsInitNamingTheOption) {
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options(KilnBackendOptions().setNumThreads(0).setCacheDirectory("")).ok());
  static const auto package = package_of(matmul_add_relu(2));
  auto kiln = load(kiln_program(package, function_manifest(), 2), &map);
  ASSERT_FALSE(kiln.ok());
  EXPECT_EQ(kiln.status().code(), Error::InvalidArgument);
  EXPECT_THAT(kiln.status().message(), HasSubstr("num_threads"));
}

// ---- What reaches the loader ----

// Replaces the loader factory with one that records each request and then loads for real.
class KilnBackendLoader : public ::testing::Test {
 protected:
  struct Recorded {
    std::string compute_unit;
    bool expect_frequent_reshapes;
    SpecializationOptions options;
    int num_threads;
    std::string cache_dir;
  };

  void SetUp() override {
    set_model_loader_factory([this](const ModelLoadRequest& request) {
      requests_.push_back({request.compute_unit, request.expect_frequent_reshapes, request.options,
                           request.compile.num_threads, request.cache_dir});
      return default_model_loader(request);
    });
  }
  void TearDown() override { reset_model_loader_factory(); }

  Result<Loaded> load_with(const LoadBackendOptionsMap& map) {
    static const auto package = package_of(matmul_add_relu(2));
    return load(kiln_program(package, function_manifest(), 2), &map);
  }
  Result<Loaded> load_with(const KilnBackendOptions& builder) {
    LoadBackendOptionsMap map;
    KILN_RETURN_IF_ERROR(map.set_options(builder));
    return load_with(map);
  }

  std::vector<Recorded> requests_;
};

struct ReshapeCase {
  const char* name;
  std::optional<bool> reshapes;  // absent: the option is not set
  ComputeUnit unit;
};
void PrintTo(const ReshapeCase& c, std::ostream* os) { *os << c.name; }

class KilnBackendReshapeFlag : public KilnBackendLoader,
                               public ::testing::WithParamInterface<ReshapeCase> {};

TEST_P(KilnBackendReshapeFlag, ReachesTheLoaderAsGiven) {
  const ReshapeCase& c = GetParam();
  auto builder = KilnBackendOptions().setComputeUnit(c.unit).setCacheDirectory("");
  if (c.reshapes) builder.setExpectFrequentReshapes(*c.reshapes);
  auto kiln = load_with(builder);
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(requests_[0].compute_unit, to_string(c.unit));
  EXPECT_EQ(requests_[0].expect_frequent_reshapes, c.reshapes.value_or(false));
  EXPECT_EQ(requests_[0].options.expect_frequent_reshapes, c.reshapes.value_or(false));
  auto reference = load(reference_program(2));
  ASSERT_TRUE(reference.ok()) << reference.status();
  expect_near(run(*kiln->method, 2, 11), run(*reference->method, 2, 11));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KilnBackendReshapeFlag,
    ::testing::Values(ReshapeCase{"AbsentIsFalse", std::nullopt, ComputeUnit::PREFER_CPU},
                      ReshapeCase{"False", false, ComputeUnit::CPU_ONLY},
                      ReshapeCase{"True", true, ComputeUnit::PREFER_GPU},
                      ReshapeCase{"TrueWithAll", true, ComputeUnit::ALL}),
    [](const ::testing::TestParamInfo<ReshapeCase>& info) { return std::string(info.param.name); });

TEST_F(KilnBackendLoader, IntegerReshapeFlagFailsInitNamingTheOption) {
  BackendOptions<2> options;
  ASSERT_TRUE(options.set_option("compute_unit", "cpu_only").ok());
  ASSERT_TRUE(options.set_option("expect_frequent_reshapes", 1).ok());
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options("KilnBackend", options.view()).ok());
  auto kiln = load_with(map);
  ASSERT_FALSE(kiln.ok());
  EXPECT_EQ(kiln.status().code(), Error::InvalidArgument);
  EXPECT_THAT(kiln.status().message(), HasSubstr("expect_frequent_reshapes"));
  EXPECT_TRUE(requests_.empty()) << "init must fail before asking the loader";
}

TEST_F(KilnBackendLoader, ThreadsAndCacheDirectoryReachTheLoader) {
  auto kiln = load_with(KilnBackendOptions().setNumThreads(3).setCacheDirectory(""));
  ASSERT_TRUE(kiln.ok()) << kiln.status();
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(requests_[0].num_threads, 3);
  EXPECT_EQ(requests_[0].cache_dir, "");
  EXPECT_EQ(requests_[0].compute_unit, "all");  // the default
}

TEST_F(KilnBackendLoader, FactoryErrorFailsInitWithTheDelegateNamed) {
  set_model_loader_factory([](const ModelLoadRequest&) {
    return runtime::Result<std::shared_ptr<engine::LoadedModel>>(
        Status(Error::NotSupported, "no device for this test"));
  });
  auto kiln = load_with(KilnBackendOptions().setCacheDirectory(""));
  ASSERT_FALSE(kiln.ok());
  EXPECT_EQ(kiln.status().code(), Error::NotSupported);
  EXPECT_THAT(kiln.status().message(), HasSubstr("no device for this test"));
  EXPECT_THAT(kiln.status().message(), HasSubstr("delegate 'forward_0'"));

  set_model_loader_factory([](const ModelLoadRequest&) {
    return runtime::Result<std::shared_ptr<engine::LoadedModel>>(
        std::shared_ptr<engine::LoadedModel>());
  });
  auto empty = load_with(KilnBackendOptions().setCacheDirectory(""));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Error::Internal);
  EXPECT_THAT(empty.status().message(), HasSubstr("returned no model"));
}

// ---- Specializations ----

TEST_F(KilnBackendLoader, EveryComputeUnitAndReshapeFlagHasItsOwnSpecialization) {
  const std::set<ComputeKind> every = {ComputeKind::Cpu, ComputeKind::Gpu, ComputeKind::Npu};
  struct Expected {
    ComputeUnit unit;
    std::set<ComputeKind> allowed;
    std::optional<ComputeKind> preferred;
  };
  const std::vector<Expected> table = {
      {ComputeUnit::ALL, every, std::nullopt},
      {ComputeUnit::CPU_ONLY, {ComputeKind::Cpu}, std::nullopt},
      {ComputeUnit::CPU_AND_GPU, {ComputeKind::Cpu, ComputeKind::Gpu}, std::nullopt},
      {ComputeUnit::PREFER_CPU, every, ComputeKind::Cpu},
      {ComputeUnit::PREFER_GPU, every, ComputeKind::Gpu}};
  std::set<std::string> identifiers;
  for (const Expected& e : table) {
    for (bool reshapes : {false, true}) {
      SCOPED_TRACE(std::string(to_string(e.unit)) + (reshapes ? " reshapes" : " static"));
      requests_.clear();
      auto kiln = load_with(KilnBackendOptions()
                                .setComputeUnit(e.unit)
                                .setExpectFrequentReshapes(reshapes)
                                .setCacheDirectory(""));
      ASSERT_TRUE(kiln.ok()) << kiln.status();
      ASSERT_EQ(requests_.size(), 1u);
      SpecializationOptions expected;
      expected.allowed_kinds = e.allowed;
      expected.preferred_kind = e.preferred;
      expected.expect_frequent_reshapes = reshapes;
      EXPECT_EQ(requests_[0].options, expected) << requests_[0].options.identifier();
      identifiers.insert(requests_[0].options.identifier());
    }
  }
  EXPECT_EQ(identifiers.size(), 10u);
}

// A fresh directory under the system's temporary directory, removed with the object.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("kiln_backend_options_test_" + std::to_string(::getpid()) + "_" +
             std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TemporaryDirectory() {
    engine::wait_for_background_stores();  // a miss writes its entry in the background
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(KilnBackendCache, EachReshapeFlagLeavesItsOwnEntry) {
  reset_model_loader_factory();  // the real loader
  TemporaryDirectory dir;
  static const auto package = package_of(matmul_add_relu(2));
  auto load_into_cache = [&](KilnBackendOptions builder) {
    LoadBackendOptionsMap map;
    EXPECT_TRUE(map.set_options(builder.setCacheDirectory(dir.path())).ok());
    return load(kiln_program(package, function_manifest(), 2), &map);
  };
  auto entries = [&]() {
    engine::wait_for_background_stores();  // a miss writes its entry in the background
    auto list = engine::cache::ModelCache(dir.path()).list();
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? list->size() : size_t{0};
  };

  auto without = load_into_cache(KilnBackendOptions());
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(entries(), 1u);
  auto with = load_into_cache(KilnBackendOptions().setExpectFrequentReshapes(true));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(entries(), 2u);

  // Loading either again finds its entry: no new one.
  uint64_t hits = kiln_load_counters().cache_hits;
  auto again = load_into_cache(KilnBackendOptions().setExpectFrequentReshapes(true));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(entries(), 2u);
  EXPECT_EQ(kiln_load_counters().cache_hits, hits + 1);
}

}  // namespace
}  // namespace kiln::backends
