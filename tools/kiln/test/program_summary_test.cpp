// program_summary: what `kiln inspect --json` reports for methods, delegates and segments.

#include <kiln/extension/module/module.h>
#include <kiln/testing/program_builder.h>
#include <tools/kiln/program_summary.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using json = nlohmann::ordered_json;
using kiln::testing::F32;
using kiln::testing::ProgramBuilder;

std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

class ProgramSummaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = "kiln_program_summary_test_" + std::to_string(::getpid()) + ".kiln";
    path_ = (std::filesystem::temp_directory_path() / name).string();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  json summarize(const ProgramBuilder& builder) {
    auto status = builder.build_to_file(path_);
    EXPECT_TRUE(status.ok()) << status;
    module_ = std::make_unique<extension::Module>(path_);
    status = module_->load();
    EXPECT_TRUE(status.ok()) << status;
    auto summary = program_summary(path_, *module_->program());
    EXPECT_TRUE(summary.ok()) << summary.status();
    return summary.ok() ? *summary : json();
  }

  std::string path_;
  std::unique_ptr<extension::Module> module_;
};

TEST_F(ProgramSummaryTest, DescribesKernelsDelegatesSegmentsAndNamedData) {
  const std::string manifest =
      R"({"model": "pkg", "input_names": ["x"], "output_names": ["y"], "enumerated": true,)"
      R"( "enumerated_functions": [{"function": "forward_0_seq_16", "input_shapes": [[1, 16]]},)"
      R"( {"function": "forward_0_seq_64", "input_shapes": [[1, 64]]}]})";
  ProgramBuilder builder;
  builder.input("x", F32, {1, 64}, runtime::ShapeDynamism::Bounded, {"", "seq"})
      .tensor("y", F32, {1, 64}, runtime::ShapeDynamism::Bounded)
      .delegate_segment("StubA", bytes_of(manifest), {"x"}, {"y"})
      .node("Relu", {"y"}, {"z"})
      .output("z");
  builder.method("other")
      .input("a", F32, {2})
      .delegate("StubB", {0xde, 0xad}, {"a"}, {"b"},
                {{"expect_frequent_reshapes", bytes_of("true")}, {"blob", {0x00, 0x01, 0x02}}})
      .output("b");
  builder.named_data("pkg", std::vector<uint8_t>(100, 7));
  json doc = summarize(builder);

  EXPECT_EQ(doc["program"], path_);
  ASSERT_EQ(doc["methods"].size(), 2u);
  const json& forward = doc["methods"][0];
  EXPECT_EQ(forward["name"], "forward");
  EXPECT_EQ(forward["inputs"][0]["name"], "x");
  EXPECT_EQ(forward["inputs"][0]["dtype"], "f32");
  EXPECT_EQ(forward["inputs"][0]["shape_text"], "[1, seq<=64]");
  EXPECT_EQ(forward["inputs"][0]["dynamism"], "bounded");
  EXPECT_EQ(forward["kernel_calls"], json::array({"Relu"}));
  EXPECT_EQ(forward["num_instructions"], 2);

  ASSERT_EQ(forward["delegates"].size(), 1u);
  const json& delegate = forward["delegates"][0];
  EXPECT_EQ(delegate["backend_id"], "StubA");
  EXPECT_EQ(delegate["processed_size"], manifest.size());
  EXPECT_THAT(delegate["processed_in"].get<std::string>(), HasSubstr("segment"));
  ASSERT_EQ(delegate["functions"].size(), 2u);
  EXPECT_EQ(delegate["functions"][1]["function"], "forward_0_seq_64");
  EXPECT_EQ(delegate["functions"][1]["input_shapes"], json::parse("[[1, 64]]"));

  const json& opaque = doc["methods"][1]["delegates"][0];
  EXPECT_EQ(opaque["backend_id"], "StubB");
  EXPECT_EQ(opaque["processed_in"], "inline");
  EXPECT_FALSE(opaque.contains("manifest"));
  EXPECT_EQ(opaque["compile_specs"]["expect_frequent_reshapes"], "true");
  EXPECT_EQ(opaque["compile_specs"]["blob"], "3 bytes");
  EXPECT_FALSE(delegate.contains("compile_specs"));

  ASSERT_EQ(doc["named_data"].size(), 1u);
  EXPECT_EQ(doc["named_data"][0]["key"], "pkg");
  EXPECT_EQ(doc["named_data"][0]["size"], 100);
  std::vector<std::string> users;
  for (const auto& segment : doc["segments"]) {
    for (const auto& user : segment["used_by"]) users.push_back(user.get<std::string>());
  }
  EXPECT_THAT(users, Contains("named data 'pkg'"));
  EXPECT_THAT(users, Contains(HasSubstr("(StubA)")));
}

TEST(ShapeWithSymbols, ShowsSymbolsAndBounds) {
  runtime::TensorMeta meta;
  meta.sizes = {1, 128, 8};
  meta.dim_names = {"", "seq", ""};
  meta.dynamism = runtime::ShapeDynamism::Unbounded;
  EXPECT_EQ(shape_with_symbols(meta), "[1, seq, 8]");
  meta.dynamism = runtime::ShapeDynamism::Bounded;
  EXPECT_EQ(shape_with_symbols(meta), "[1, seq<=128, 8]");
  meta.dim_names.clear();
  EXPECT_EQ(shape_with_symbols(meta), "[1, 128, 8]");
}

}  // namespace
}  // namespace kiln::tools
