// --enumerate: parsing the flags, expanding a function into static functions, and a program
// whose KilnBackend delegate dispatches each listed shape to its own function.
#include <kiln/engine/loader/background_stores.h>
#include <kiln/exporter/enumerate.h>
#include <kiln/exporter/export.h>
#include <kiln/exporter/test/onnx_model_builder.h>
#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::exporter {
namespace {

namespace ir = engine::ir;
using runtime::Error;
using runtime::ScalarType;
using ::testing::HasSubstr;

TEST(Enumerate, ParsesFlags) {
  auto e = parse_enumeration("prefill:input_ids:1=16,64,128");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->method, "prefill");
  EXPECT_EQ(e->input, "input_ids");
  EXPECT_EQ(e->dim, 1);
  EXPECT_EQ(e->values, (std::vector<int64_t>{16, 64, 128}));
}

TEST(Enumerate, RejectsMalformedFlagsNamingThePart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"prefill", "missing"},
      {"prefill:ids=1,2", "missing"},
      {":ids:1=4", "missing"},
      {"prefill::1=4", "missing"},
      {"prefill:ids:x=4", "DIM 'x'"},
      {"prefill:ids:-1=4", "DIM '-1'"},
      {"prefill:ids:1=", "value ''"},
      {"prefill:ids:1=4,,8", "value ''"},
      {"prefill:ids:1=4,x", "value 'x'"},
      {"prefill:ids:1=0", "value 0 is not positive"},
      {"prefill:ids:1=4,8,4", "value 4 is listed twice"},
      {"prefill:ids:1=1.5", "value '1.5'"},
  };
  for (const auto& [text, part] : cases) {
    auto e = parse_enumeration(text);
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error(), Error::InvalidArgument) << text;
    EXPECT_THAT(e.status().message(), HasSubstr("'" + text + "'")) << text;
    EXPECT_THAT(e.status().message(), HasSubstr(part)) << text;
  }
}

/// input_ids [1, seq], mask [seq, seq], past [1, past, 8] → shifted [1, seq - 1].
ir::Graph graph_with_symbols() {
  ir::Graph g;
  g.name = "forward";
  ir::Dim seq = ir::Dim::symbol("seq"), past = ir::Dim::symbol("past");
  auto add = [&](const std::string& name, std::vector<ir::Dim> shape, bool input) {
    ir::Value v;
    v.name = name;
    v.type.dtype = ScalarType::Float32;
    v.type.shape = std::move(shape);
    int index = g.add_value(std::move(v));
    if (input) g.inputs.push_back(index);
    return index;
  };
  add("input_ids", {1, seq}, true);
  add("mask", {seq, seq}, true);
  add("past", {1, past, 8}, true);
  g.outputs.push_back(add("shifted", {1, seq - 1}, false));
  return g;
}

std::vector<DimEnumeration> flags(const std::vector<std::string>& texts) {
  std::vector<DimEnumeration> out;
  for (const auto& text : texts) out.push_back(*parse_enumeration(text));
  return out;
}

TEST(Enumerate, CartesianProductOfSymbolsWithOneAxisPerSymbol) {
  ir::Graph g = graph_with_symbols();
  // input_ids:1 and mask:0 and mask:1 all name `seq`: one axis; `past` is another.
  auto functions = enumerate_function(
      g, "forward", 0,
      flags({"forward:input_ids:1=4,8", "forward:mask:0=4,8", "forward:mask:1=4,8",
             "forward:past:1=2,3,5", "other:input_ids:1=99"}));
  ASSERT_TRUE(functions.ok()) << functions.status().to_string();
  ASSERT_EQ(functions->size(), 6u);
  EXPECT_EQ((*functions)[0].name, "forward_0_seq_4_past_2");
  EXPECT_EQ((*functions)[1].name, "forward_0_seq_4_past_3");
  EXPECT_EQ((*functions)[5].name, "forward_0_seq_8_past_5");
  EXPECT_EQ((*functions)[4].input_shapes,
            (std::vector<std::vector<int64_t>>{{1, 8}, {8, 8}, {1, 3, 8}}));
  ir::Graph fixed = static_function(g, (*functions)[4]);
  EXPECT_EQ(fixed.name, "forward_0_seq_8_past_3");
  for (int input : fixed.inputs) {
    EXPECT_TRUE(fixed.values[static_cast<size_t>(input)].type.static_sizes().has_value());
  }
}

TEST(Enumerate, RejectsFlagsThatDoNotFitTheFunction) {
  ir::Graph g = graph_with_symbols();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"forward:nope:1=4", "forward:past:1=2"}, "has no input 'nope'"},
      {{"forward:input_ids:2=4", "forward:past:1=2"}, "has rank 2"},
      {{"forward:input_ids:0=4", "forward:past:1=2"}, "is '1' (expected a symbolic"},
      {{"forward:input_ids:1=4,8", "forward:mask:0=4", "forward:past:1=2"},
       "other values for symbol 'seq'"},
      {{"forward:input_ids:1=4"}, "input 'past' is 'past' and no --enumerate flag"},
  };
  for (const auto& [texts, problem] : cases) {
    auto functions = enumerate_function(g, "forward", 0, flags(texts));
    ASSERT_FALSE(functions.ok()) << problem;
    EXPECT_EQ(functions.error(), Error::InvalidArgument);
    EXPECT_THAT(functions.status().message(), HasSubstr(problem));
  }
}

TEST(Enumerate, ADerivedDimensionAtZeroFailsNamingInputDimensionAndValue) {
  ir::Graph g = graph_with_symbols();
  auto functions =
      enumerate_function(g, "forward", 0, flags({"forward:input_ids:1=4,1", "forward:past:1=2"}));
  ASSERT_FALSE(functions.ok());
  EXPECT_EQ(functions.error(), Error::InvalidArgument);
  EXPECT_THAT(functions.status().message(),
              HasSubstr("--enumerate forward:input_ids:1 value 1 (seq)"));
  EXPECT_THAT(functions.status().message(),
              HasSubstr("makes dimension 'seq - 1' of value 'shifted' 0"));
}

// x f32 [1, n] + 1 → y [1, n], exported with n enumerated as 4 and 8.
std::filesystem::path export_enumerated(const std::filesystem::path& dir,
                                        const std::vector<std::string>& enumerate,
                                        runtime::Status* status) {
  test::OnnxModelBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 0}, {"", "n"});
  b.output("y", onnx::TensorProto::FLOAT, {1, 0}, {"", "n"});
  b.initializer_f32("one", {1}, {1.0f});
  b.node("Add", {"x", "one"}, {"y"});
  std::filesystem::create_directories(dir);
  std::filesystem::path onnx_path = dir / "add.onnx";
  std::ofstream(onnx_path, std::ios::binary) << b.bytes();
  ExportOptions options;
  options.backend = "kiln";
  options.enumerations = flags(enumerate);
  auto bytes = export_onnx_file(onnx_path.string(), options);
  *status = bytes.status();
  std::filesystem::path program = dir / "add.kiln";
  if (bytes.ok()) {
    std::ofstream(program, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->data()),
               static_cast<std::streamsize>(bytes->size()));
  }
  return program;
}

TEST(Enumerate, ExportedProgramRunsEachListedShapeAndRejectsOthers) {
  auto dir = std::filesystem::path(::testing::TempDir()) / "kiln_enumerate_e2e";
  std::filesystem::remove_all(dir);
  const char* previous = std::getenv("KILN_CACHE_DIR");
  std::string saved = previous != nullptr ? previous : "";
  setenv("KILN_CACHE_DIR", (dir / "cache").c_str(), 1);
  runtime::Status status;
  auto program = export_enumerated(dir, {"forward:x:1=4,8"}, &status);
  ASSERT_TRUE(status.ok()) << status.to_string();
  extension::Module module(program.string());
  for (int64_t n : {4, 8, 4}) {
    std::vector<float> data(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) data[static_cast<size_t>(i)] = static_cast<float>(i);
    auto x = extension::make_tensor_ptr({1, n}, std::move(data));
    ASSERT_TRUE(x.ok());
    auto outputs = module.forward({runtime::EValue(**x)});
    ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
    const runtime::Tensor& y = (*outputs)[0].to_tensor();
    ASSERT_EQ(y.dim(), 2);
    EXPECT_EQ(y.size(1), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y.data_ptr<float>()[i], static_cast<float>(i + 1));
  }
  auto x = extension::make_tensor_ptr({1, 5}, std::vector<float>(5, 0.0f));
  ASSERT_TRUE(x.ok());
  auto outputs = module.forward({runtime::EValue(**x)});
  ASSERT_FALSE(outputs.ok());
  EXPECT_THAT(outputs.status().message(), HasSubstr("input shapes ([1, 5])"));
  EXPECT_THAT(outputs.status().message(), HasSubstr("'forward_0_n_8'"));
  if (previous != nullptr) {
    setenv("KILN_CACHE_DIR", saved.c_str(), 1);
  } else {
    unsetenv("KILN_CACHE_DIR");
  }
  engine::wait_for_background_stores();  // a cache miss writes its entry in the background
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(Enumerate, ExportErrorsNameTheFlag) {
  auto dir = std::filesystem::path(::testing::TempDir()) / "kiln_enumerate_errors";
  runtime::Status status;
  export_enumerated(dir, {"prefill:x:1=4"}, &status);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--enumerate names method 'prefill'"));
  export_enumerated(dir, {"forward:y:1=4"}, &status);
  EXPECT_THAT(status.message(), HasSubstr("has no input 'y'"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::exporter
