// KilnBackend's compile specs: the export-time `expect_frequent_reshapes` default and the
// `aot_artifact` embedded compiled artifact, in programs built with ProgramBuilder and through
// direct inits.
#include <kiln/backends/kiln/compile_specs.h>
#include <kiln/backends/kiln/kiln_backend.h>
#include <kiln/backends/kiln/kiln_backend_options.h>
#include <kiln/backends/kiln/test/kiln_test_programs.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/loader/model_loader.h>
#include <kiln/runtime/backend/named_data.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>

namespace kiln::backends {
namespace {

using namespace kiln_test;  // the programs and helpers shared by the backend's tests
using runtime::CompileSpec;
using runtime::Error;
using runtime::Status;
using ::testing::HasSubstr;

constexpr const char* kArtifactKey = "kiln/aot/forward_0";
constexpr int64_t kBatch = 2;

const std::vector<uint8_t>& package() {
  static const std::vector<uint8_t> bytes = package_of(matmul_add_relu(kBatch));
  return bytes;
}

// What `kiln export --aot` embeds: the package's artifact for compute_unit "all".
std::vector<uint8_t> artifact(bool expect_frequent_reshapes) {
  std::vector<uint64_t> words((package().size() + 7) / 8);
  std::memcpy(words.data(), package().data(), package().size());
  auto view = engine::package::PackageView::open(runtime::Span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(words.data()), package().size()));
  EXPECT_TRUE(view.ok()) << view.status();
  auto options = engine::specialization::SpecializationOptions::from_compute_unit(
      "all", expect_frequent_reshapes);
  EXPECT_TRUE(options.ok());
  auto bytes = engine::ModelLoader::compile_artifact(*view, *options);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

CompileSpecs aot_specs(const char* reshapes = nullptr) {
  CompileSpecs specs = {{"aot_artifact", bytes_of(kArtifactKey)}};
  if (reshapes != nullptr) specs.emplace_back("expect_frequent_reshapes", bytes_of(reshapes));
  return specs;
}

ProgramBuilder aot_program(const std::vector<uint8_t>& embedded, CompileSpecs specs) {
  return kiln_program(package(), function_manifest(), kBatch, std::move(specs))
      .named_data(kArtifactKey, embedded);
}

// A fresh cache directory per test.
class KilnCompileSpecs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("kiln_compile_specs_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    engine::wait_for_background_stores();  // a miss writes its entry in the background
    std::filesystem::remove_all(dir_);
  }

  LoadBackendOptionsMap options(std::optional<bool> reshapes = std::nullopt) const {
    KilnBackendOptions builder;
    builder.setCacheDirectory(dir_);
    if (reshapes) builder.setExpectFrequentReshapes(*reshapes);
    LoadBackendOptionsMap map;
    EXPECT_TRUE(map.set_options(builder).ok());
    return map;
  }

  // Loads `builder` with `map`, runs it and compares with the reference kernels.
  void expect_loads_and_runs(const ProgramBuilder& builder, const LoadBackendOptionsMap& map) {
    auto kiln = load(builder, &map);
    ASSERT_TRUE(kiln.ok()) << kiln.status();
    auto reference = load(reference_program(kBatch));
    ASSERT_TRUE(reference.ok()) << reference.status();
    expect_near(run(*kiln->method, kBatch, 5), run(*reference->method, kBatch, 5));
  }

  std::string dir_;
};

// ---- Parsing ----

TEST(ParseCompileSpecs, ReadsTheKnownSpecs) {
  auto none = parse_compile_specs({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->expect_frequent_reshapes.has_value());
  EXPECT_EQ(none->aot_artifact, "");
  std::vector<CompileSpec> specs = {{"expect_frequent_reshapes", bytes_of("false")},
                                    {"aot_artifact", bytes_of("kiln/aot/x")}};
  auto parsed = parse_compile_specs(specs);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->expect_frequent_reshapes, false);
  EXPECT_EQ(parsed->aot_artifact, "kiln/aot/x");
}

TEST(ParseCompileSpecs, RejectsUnknownKeysBadValuesAndRepeats) {
  auto unknown = parse_compile_specs(std::vector<CompileSpec>{{"aot_artefact", bytes_of("k")}});
  EXPECT_EQ(unknown.status().code(), Error::InvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("compile spec 'aot_artefact' is unknown"));
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("expected one of 'expect_frequent_reshapes', 'aot_artifact'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("did you mean 'aot_artifact'?"));
  auto bad =
      parse_compile_specs(std::vector<CompileSpec>{{"expect_frequent_reshapes", {'1', 0xff}}});
  EXPECT_EQ(bad.status().code(), Error::InvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("'expect_frequent_reshapes' has value '1\\xff' (expected 'true' or "
                        "'false')"));
  auto empty = parse_compile_specs(std::vector<CompileSpec>{{"aot_artifact", {}}});
  EXPECT_THAT(empty.status().message(), HasSubstr("'aot_artifact' is empty"));
  auto twice = parse_compile_specs(
      std::vector<CompileSpec>{{"aot_artifact", bytes_of("a")}, {"aot_artifact", bytes_of("b")}});
  EXPECT_THAT(twice.status().message(), HasSubstr("'aot_artifact' is given twice"));
}

// ---- Init ----

TEST_F(KilnCompileSpecs, UnknownSpecFailsInitNamingItAndTheKnownOnes) {
  auto map = options();
  auto kiln = load(kiln_program(package(), function_manifest(), kBatch,
                                {{"expect_frequent_reshape", bytes_of("true")}}),
                   &map);
  ASSERT_FALSE(kiln.ok());
  EXPECT_EQ(kiln.status().code(), Error::InvalidArgument);
  EXPECT_THAT(kiln.status().message(), HasSubstr("init delegate"));
  EXPECT_THAT(kiln.status().message(), HasSubstr("compile spec 'expect_frequent_reshape'"));
  EXPECT_THAT(kiln.status().message(), HasSubstr("'expect_frequent_reshapes', 'aot_artifact'"));
}

TEST_F(KilnCompileSpecs, BadReshapesValueFailsInitNamingTheValue) {
  auto map = options();
  auto kiln = load(kiln_program(package(), function_manifest(), kBatch,
                                {{"expect_frequent_reshapes", bytes_of("yes")}}),
                   &map);
  ASSERT_FALSE(kiln.ok());
  EXPECT_EQ(kiln.status().code(), Error::InvalidArgument);
  EXPECT_THAT(kiln.status().message(),
              HasSubstr("compile spec 'expect_frequent_reshapes' has value 'yes' (expected "
                        "'true' or 'false')"));
}

TEST_F(KilnCompileSpecs, MissingArtifactNamedDataFailsInitNamingTheKey) {
  auto map = options();
  auto kiln = load(kiln_program(package(), function_manifest(), kBatch, aot_specs()), &map);
  ASSERT_FALSE(kiln.ok());
  EXPECT_EQ(kiln.status().code(), Error::NotFound);
  EXPECT_THAT(kiln.status().message(),
              HasSubstr("compile spec 'aot_artifact' names named data 'kiln/aot/forward_0'"));
  EXPECT_FALSE(std::filesystem::exists(dir_));  // failed before loading anything
}

// Named data for direct inits: the package and, when given, an artifact.
class NamedBytes : public runtime::NamedDataMap {
 public:
  explicit NamedBytes(std::map<std::string, std::vector<uint8_t>> data) : data_(std::move(data)) {}
  runtime::Result<runtime::FreeableBuffer> get_data(std::string_view key) const override {
    auto it = data_.find(std::string(key));
    if (it == data_.end()) return Status(Error::NotFound, "no key '" + std::string(key) + "'");
    return runtime::FreeableBuffer(it->second.data(), it->second.size());
  }
  std::vector<std::string> keys() const override {
    std::vector<std::string> keys;
    for (const auto& [key, bytes] : data_) keys.push_back(key);
    return keys;
  }

 private:
  std::map<std::string, std::vector<uint8_t>> data_;
};

// Inits a KilnBackend delegate of `package()` directly, runs `check` on its handle, destroys it.
template <typename Check>
void with_delegate(const runtime::NamedDataMap& data, const LoadBackendOptionsMap& map,
                   const CompileSpecs& specs, Check check) {
  std::vector<CompileSpec> compile_specs;
  for (const auto& [key, value] : specs) compile_specs.push_back({key, value});
  runtime::BackendInitContext context("forward", "forward_0", map.get_options("KilnBackend"),
                                      &data);
  std::vector<uint8_t> manifest = bytes_of(function_manifest());
  runtime::FreeableBuffer processed(manifest.data(), manifest.size());
  KilnBackend backend;
  auto handle = backend.init(context, &processed, compile_specs);
  ASSERT_TRUE(handle.ok()) << handle.status();
  check(*handle);
  backend.destroy(*handle);
}

TEST_F(KilnCompileSpecs, ExportTimeReshapesIsTheDefaultAndTheLoadTimeOptionWins) {
  NamedBytes data({{kPackageKey, package()}});
  const CompileSpecs reshapes = {{"expect_frequent_reshapes", bytes_of("true")}};
  with_delegate(data, options(), reshapes, [](runtime::DelegateHandle* handle) {
    EXPECT_TRUE(KilnBackend::config_of(handle).expect_frequent_reshapes);
    EXPECT_TRUE(KilnBackend::model_of(handle)->options().expect_frequent_reshapes);
  });
  with_delegate(data, options(false), reshapes, [](runtime::DelegateHandle* handle) {
    EXPECT_FALSE(KilnBackend::config_of(handle).expect_frequent_reshapes);
    EXPECT_FALSE(KilnBackend::model_of(handle)->options().expect_frequent_reshapes);
  });
  with_delegate(data, options(true), {{"expect_frequent_reshapes", bytes_of("false")}},
                [](runtime::DelegateHandle* handle) {
                  EXPECT_TRUE(KilnBackend::config_of(handle).expect_frequent_reshapes);
                });
  with_delegate(data, options(), {}, [](runtime::DelegateHandle* handle) {
    EXPECT_FALSE(KilnBackend::config_of(handle).expect_frequent_reshapes);
    EXPECT_EQ(KilnBackend::config_of(handle).aot_artifact, "");
  });
}

// ---- The embedded artifact ----

TEST_F(KilnCompileSpecs, EmbeddedArtifactMakesTheFirstLoadOnAFreshCacheAHit) {
  const KilnLoadCounters before = kiln_load_counters();
  expect_loads_and_runs(aot_program(artifact(false), aot_specs()), options());
  KilnLoadCounters after = kiln_load_counters();
  EXPECT_EQ(after.aot, before.aot + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.cache_misses, before.cache_misses);
  EXPECT_EQ(after.warnings, before.warnings);
  engine::cache::ModelCache cache(dir_);
  auto entries = cache.list();
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 1u);

  // The entry is there now: a second load installs nothing and is a hit again.
  expect_loads_and_runs(aot_program(artifact(false), aot_specs()), options());
  const KilnLoadCounters again = kiln_load_counters();
  EXPECT_EQ(again.aot, after.aot);
  EXPECT_EQ(again.cache_hits, after.cache_hits + 1);
}

TEST_F(KilnCompileSpecs, AnInstalledArtifactPacksNothing) {
  NamedBytes data({{kPackageKey, package()}, {kArtifactKey, artifact(true)}});
  with_delegate(data, options(), aot_specs("true"), [](runtime::DelegateHandle* handle) {
    EXPECT_EQ(KilnBackend::config_of(handle).aot_artifact, kArtifactKey);
    const engine::LoadReport& report = KilnBackend::model_of(handle)->load_report();
    EXPECT_EQ(report.cache, "hit");
    EXPECT_EQ(report.packed_constants, 0u);
    EXPECT_GT(report.adopted_constants, 0u);
  });
}

TEST_F(KilnCompileSpecs, ArtifactOfOtherOptionsIsSkippedWithAWarningAndTheLoadCompiles) {
  // Exported with --expect-frequent-reshapes, loaded with the option set to false.
  const KilnLoadCounters before = kiln_load_counters();
  expect_loads_and_runs(aot_program(artifact(true), aot_specs("true")), options(false));
  const KilnLoadCounters after = kiln_load_counters();
  EXPECT_EQ(after.aot, before.aot);
  EXPECT_EQ(after.cache_misses, before.cache_misses + 1);
  ASSERT_EQ(after.warnings, before.warnings + 1);
  EXPECT_THAT(after.recent_warnings.back(),
              HasSubstr("embedded compiled artifact 'kiln/aot/forward_0' not used"));
  EXPECT_THAT(after.recent_warnings.back(), HasSubstr("holds a different key"));
  EXPECT_THAT(after.recent_warnings.back(), HasSubstr("reshapes=0"));
}

TEST_F(KilnCompileSpecs, CorruptArtifactIsSkippedWithAWarningAndTheLoadCompiles) {
  std::vector<uint8_t> corrupt = artifact(false);
  corrupt[corrupt.size() - 10] ^= 0x20;
  const KilnLoadCounters before = kiln_load_counters();
  expect_loads_and_runs(aot_program(corrupt, aot_specs()), options());
  const KilnLoadCounters after = kiln_load_counters();
  EXPECT_EQ(after.aot, before.aot);
  EXPECT_EQ(after.cache_misses, before.cache_misses + 1);
  ASSERT_EQ(after.warnings, before.warnings + 1);
  EXPECT_THAT(after.recent_warnings.back(), HasSubstr("payload checksum mismatch"));
}

TEST_F(KilnCompileSpecs, WithoutACacheDirTheArtifactIsNotUsedAndTheLoadCompiles) {
  LoadBackendOptionsMap map;
  ASSERT_TRUE(map.set_options(KilnBackendOptions().setCacheDirectory("")).ok());
  const KilnLoadCounters before = kiln_load_counters();
  expect_loads_and_runs(aot_program(artifact(false), aot_specs()), map);
  const KilnLoadCounters after = kiln_load_counters();
  EXPECT_EQ(after.aot, before.aot);
  EXPECT_EQ(after.uncached, before.uncached + 1);
  ASSERT_EQ(after.warnings, before.warnings + 1);
  EXPECT_THAT(after.recent_warnings.back(), HasSubstr("cache_dir is empty"));
}

}  // namespace
}  // namespace kiln::backends
