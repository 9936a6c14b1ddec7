// `kiln cache`'s actions over a temporary cache directory filled with ModelCache::store, and the
// model packages of programs built in code.

#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/ir/graph.h>
#include <kiln/engine/loader/background_stores.h>
#include <kiln/engine/package/package.h>
#include <kiln/testing/program_builder.h>
#include <tools/kiln/cache_tool.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {

namespace fs = std::filesystem;
using engine::cache::CacheKey;
using engine::cache::ModelCache;
using engine::cache::to_hex;
using json = nlohmann::json;
using kiln::testing::F32;
using kiln::testing::ProgramBuilder;
using runtime::Error;
using ::testing::HasSubstr;
using ::testing::Not;

// A one-function model y = <op>(x), x: [1, 4]; different ops give different package hashes.
engine::ir::Model unary_model(const std::string& op) {
  engine::ir::Model model;
  engine::ir::Graph g;
  g.name = "main";
  engine::ir::Value x;
  x.name = "x";
  x.type.shape = {1, 4};
  engine::ir::Value y = x;
  y.name = "y";
  const int xi = g.add_value(std::move(x));
  const int yi = g.add_value(std::move(y));
  engine::ir::Node node;
  node.name = op + "_0";
  node.op = op;
  node.inputs = {xi};
  node.outputs = {yi};
  g.nodes.push_back(std::move(node));
  g.inputs = {xi};
  g.outputs = {yi};
  model.functions.push_back(std::move(g));
  return model;
}

std::vector<uint8_t> package_of(const engine::ir::Model& model) {
  auto bytes = engine::package::write_package(model);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

uint64_t hash_of(const std::vector<uint8_t>& package) {
  auto view = engine::package::PackageView::open(runtime::Span<const uint8_t>(package));
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? view->content_hash() : 0;
}

CacheKey make_key(uint64_t model_hash, const std::string& specialization) {
  CacheKey key;
  key.model_hash = model_hash;
  key.functions = {"main"};
  key.input_shapes = {{{1, 4}}};
  key.specialization = specialization;
  key.engine_version = "test-1";
  key.cpu_features = "x86_64:avx2";
  return key;
}

CacheArgs action(const std::string& name, const std::string& program = "", bool json = false) {
  CacheArgs args;
  args.action = name;
  args.program = program;
  args.json = json;
  return args;
}

CacheArgs json_action(const std::string& name, const std::string& program = "") {
  return action(name, program, true);
}

class CacheToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = fs::temp_directory_path() /
            ("kiln_cache_tool_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "cache").string();
  }
  void TearDown() override {
    engine::wait_for_background_stores();  // a cache miss writes its entry in the background
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  // Stores an entry of `model_hash` with a payload of `size` bytes.
  void store(uint64_t model_hash, const std::string& specialization, size_t size) {
    ModelCache cache(dir_);
    std::vector<uint8_t> payload(size, 7);
    ASSERT_TRUE(cache.store(make_key(model_hash, specialization), payload, model_hash).ok());
  }

  // Runs an action; returns its output, and its Status through `status`.
  std::string run(CacheArgs args, runtime::Status* status = nullptr) {
    if (!args.cache_dir) args.cache_dir = dir_;
    std::ostringstream out;
    runtime::Status result = run_cache_action(args, out);
    if (status != nullptr) {
      *status = result;
    } else {
      EXPECT_TRUE(result.ok()) << result;
    }
    return out.str();
  }

  // A program whose named data holds the given packages under "kiln/package/<hash>".
  std::string write_program(const std::vector<std::vector<uint8_t>>& packages) {
    ProgramBuilder builder;
    builder.input("x", F32, {1, 4}).node("Relu", {"x"}, {"y"}).output("y");
    for (const auto& package : packages) {
      builder.named_data("kiln/package/" + to_hex(hash_of(package)), package);
    }
    const std::string path = (root_ / "program.kiln").string();
    auto status = builder.build_to_file(path);
    EXPECT_TRUE(status.ok()) << status;
    return path;
  }

  fs::path root_;
  std::string dir_;
};

TEST_F(CacheToolTest, ListOfAnAbsentDirectoryIsEmpty) {
  EXPECT_THAT(run(action("list")), HasSubstr(": 0 entries"));
  EXPECT_EQ(json::parse(run(json_action("list"))), json::array());
}

TEST_F(CacheToolTest, ListShowsEveryEntryWithItsModelSizeAndLastUse) {
  store(0x1111, "units=cpu;prefer=none;reshapes=0", 100);
  store(0x2222, "units=cpu;prefer=none;reshapes=0", 300);
  const std::string text = run(action("list"));
  EXPECT_THAT(text, HasSubstr(": 2 entries"));
  EXPECT_THAT(text, HasSubstr(to_hex(0x1111)));
  EXPECT_THAT(text, HasSubstr(to_hex(0x2222)));
  EXPECT_THAT(text,
              ::testing::ContainsRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"));

  const json entries = json::parse(run(json_action("list")));
  ASSERT_EQ(entries.size(), 2u);
  std::vector<std::string> models;
  for (const auto& entry : entries) {
    models.push_back(entry["model_hash"]);
    EXPECT_EQ(entry["key"].get<std::string>().size(), 16u);
    EXPECT_GT(entry["size_bytes"].get<uint64_t>(), 100u);  // header and key come on top
    EXPECT_TRUE(fs::exists(entry["path"].get<std::string>()));
  }
  EXPECT_THAT(models, ::testing::UnorderedElementsAre(to_hex(0x1111), to_hex(0x2222)));
}

TEST_F(CacheToolTest, StatsCountsEntriesAndBytesPerModel) {
  store(0x1111, "units=cpu;prefer=none;reshapes=0", 100);
  store(0x1111, "units=cpu;prefer=none;reshapes=1", 100);
  store(0x2222, "units=cpu;prefer=none;reshapes=0", 300);
  const json stats = json::parse(run(json_action("stats")));
  EXPECT_EQ(stats["cache_dir"], dir_);
  EXPECT_EQ(stats["entries"], 3);
  EXPECT_EQ(stats["budget_bytes"], engine::cache::kDefaultCacheBudgetBytes);
  ASSERT_EQ(stats["models"].size(), 2u);
  EXPECT_EQ(stats["models"][0]["model_hash"], to_hex(0x1111));
  EXPECT_EQ(stats["models"][0]["entries"], 2);
  EXPECT_EQ(stats["models"][1]["entries"], 1);
  EXPECT_EQ(stats["total_bytes"].get<uint64_t>(), stats["models"][0]["bytes"].get<uint64_t>() +
                                                      stats["models"][1]["bytes"].get<uint64_t>());

  const std::string text = run(action("stats"));
  EXPECT_THAT(text, HasSubstr("entries  3"));
  EXPECT_THAT(text, HasSubstr(to_hex(0x1111) + "  2 entries"));
  EXPECT_THAT(text, HasSubstr(std::to_string(engine::cache::kDefaultCacheBudgetBytes)));
}

TEST_F(CacheToolTest, EvictRemovesOnlyTheProgramsModels) {
  const auto relu = package_of(unary_model("Relu"));
  const auto neg = package_of(unary_model("Neg"));
  const uint64_t relu_hash = hash_of(relu);
  const uint64_t neg_hash = hash_of(neg);
  ASSERT_NE(relu_hash, neg_hash);
  store(relu_hash, "units=cpu;prefer=none;reshapes=0", 64);
  store(relu_hash, "units=cpu;prefer=none;reshapes=1", 64);
  store(neg_hash, "units=cpu;prefer=none;reshapes=0", 64);
  store(0x3333, "units=cpu;prefer=none;reshapes=0", 64);
  const std::string program = write_program({relu, neg});

  const std::string text = run(action("evict", program));
  EXPECT_THAT(text, HasSubstr("model " + to_hex(relu_hash) + " (kiln/package/" + to_hex(relu_hash) +
                              "): removed 2 entries"));
  EXPECT_THAT(text, HasSubstr("model " + to_hex(neg_hash)));
  EXPECT_THAT(text, HasSubstr("removed 3 entries from " + dir_));

  const json left = json::parse(run(json_action("list")));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["model_hash"], to_hex(0x3333));

  const json again = json::parse(run(json_action("evict", program)));
  EXPECT_EQ(again["removed"], 0);
  EXPECT_EQ(again["models"].size(), 2u);
}

TEST_F(CacheToolTest, EvictOfAProgramWithoutPackagesRemovesNothing) {
  store(0x1111, "units=cpu;prefer=none;reshapes=0", 64);
  const std::string text = run(action("evict", write_program({})));
  EXPECT_THAT(text, HasSubstr("holds no KilnBackend model package"));
  EXPECT_THAT(text, HasSubstr("removed 0 entries"));
  EXPECT_EQ(json::parse(run(json_action("list"))).size(), 1u);
}

TEST_F(CacheToolTest, EvictOfAMissingOrCorruptProgramNamesTheFile) {
  runtime::Status status;
  const std::string absent = (root_ / "absent.kiln").string();
  run(action("evict", absent), &status);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("absent.kiln"));

  const std::string junk = (root_ / "junk.kiln").string();
  std::ofstream(junk) << "not a program";
  run(action("evict", junk), &status);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("junk.kiln"));
}

TEST_F(CacheToolTest, EvictOfAProgramWithACorruptPackageNamesFileAndKey) {
  ProgramBuilder builder;
  builder.input("x", F32, {1, 4}).node("Relu", {"x"}, {"y"}).output("y");
  builder.named_data("kiln/package/bad", std::vector<uint8_t>(128, 0));
  const std::string path = (root_ / "bad_package.kiln").string();
  ASSERT_TRUE(builder.build_to_file(path).ok());
  runtime::Status status;
  run(action("evict", path), &status);
  EXPECT_EQ(status.code(), Error::InvalidProgram);
  EXPECT_THAT(status.message(), HasSubstr("'kiln/package/bad'"));
  EXPECT_THAT(status.message(), HasSubstr("bad_package.kiln"));
}

TEST_F(CacheToolTest, PurgeRemovesEverything) {
  store(0x1111, "units=cpu;prefer=none;reshapes=0", 64);
  store(0x2222, "units=cpu;prefer=none;reshapes=0", 64);
  EXPECT_THAT(run(action("purge")), HasSubstr("removed 2 entries"));
  EXPECT_EQ(json::parse(run(json_action("list"))), json::array());
  EXPECT_EQ(json::parse(run(json_action("purge")))["removed"], 0);
}

TEST_F(CacheToolTest, BadArgumentsAreErrorsNamingTheCulprit) {
  runtime::Status status;
  run(action("frobnicate"), &status);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'frobnicate'"));

  run(action("evict"), &status);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("needs a program"));

  run(action("list", "x.kiln"), &status);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'x.kiln'"));

  CacheArgs empty_dir = action("list");
  empty_dir.cache_dir = "";
  run(empty_dir, &status);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--cache-dir"));
}

TEST_F(CacheToolTest, NoConfiguredDirectoryIsAnError) {
  const char* saved = std::getenv("KILN_CACHE_DIR");
  const std::string saved_value = saved ? saved : "";
  setenv("KILN_CACHE_DIR", "", 1);
  std::ostringstream out;
  const runtime::Status status = run_cache_action(action("list"), out);
  if (saved) {
    setenv("KILN_CACHE_DIR", saved_value.c_str(), 1);
  } else {
    unsetenv("KILN_CACHE_DIR");
  }
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("no cache directory is configured"));
  EXPECT_THAT(status.message(), HasSubstr("KILN_CACHE_DIR"));
}

TEST(UtcIso8601Test, FormatsSecondsInUtc) {
  EXPECT_EQ(utc_iso8601(std::chrono::system_clock::time_point{}), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_iso8601(std::chrono::system_clock::from_time_t(1714566896)),
            "2024-05-01T12:34:56Z");
}

}  // namespace
}  // namespace kiln::tools
