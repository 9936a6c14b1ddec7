// Case discovery and whole-case runs over ONNX models built here with the onnx protobufs.

#include <kiln/exporter/conformance/conformance.h>
#include <kiln/exporter/conformance/test/temp_dir.h>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace kiln::exporter {
namespace {

using Outcome = CaseResult::Outcome;
using runtime::Error;
using testing::TempDir;

void set_tensor_type(onnx::ValueInfoProto& value, const std::vector<int64_t>& dims) {
  auto* tensor = value.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = tensor->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

// y = Relu(x) over f32[2, 3]; with `sequence_input`, x is a sequence of tensors instead.
std::string relu_model(bool sequence_input = false) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* graph = model.mutable_graph();
  graph->set_name("relu");
  auto* node = graph->add_node();
  node->set_op_type("Relu");
  node->set_name("relu_0");
  node->add_input("x");
  node->add_output("y");
  auto* x = graph->add_input();
  x->set_name("x");
  if (sequence_input) {
    x->mutable_type()
        ->mutable_sequence_type()
        ->mutable_elem_type()
        ->mutable_tensor_type()
        ->set_elem_type(onnx::TensorProto::FLOAT);
  } else {
    set_tensor_type(*x, {2, 3});
  }
  auto* y = graph->add_output();
  y->set_name("y");
  set_tensor_type(*y, {2, 3});
  return model.SerializeAsString();
}

std::string float_tensor(const std::string& name, const std::vector<float>& values) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(2);
  proto.add_dims(3);
  for (float v : values) proto.add_float_data(v);
  return proto.SerializeAsString();
}

// A Relu case in `dir/relu_case` whose expected output is `expected`.
std::string write_relu_case(const TempDir& dir, const std::string& name,
                            const std::vector<float>& expected) {
  dir.write(name + "/model.onnx", relu_model());
  dir.write(name + "/test_data_set_0/input_0.pb", float_tensor("x", {-1, 0, 1, -2, 2, 3}));
  dir.write(name + "/test_data_set_0/output_0.pb", float_tensor("y", expected));
  return (dir.path() / name).string();
}

void write_case(const TempDir& dir, const std::string& name, const std::string& model) {
  dir.write(name + "/model.onnx", model);
  dir.write(name + "/test_data_set_0/input_0.pb", "");
}

std::vector<std::string> names(const std::vector<CaseDir>& cases) {
  std::vector<std::string> out;
  for (const auto& c : cases) out.push_back(c.name);
  return out;
}

TEST(DiscoverCasesTest, FindsCasesInAFolderOfCases) {
  TempDir dir;
  write_case(dir, "test_b", "");
  write_case(dir, "test_a", "");
  dir.write("not_a_case/readme.txt", "x");
  auto cases = discover_cases(dir.path().string());
  ASSERT_TRUE(cases.ok()) << cases.status();
  EXPECT_EQ(names(*cases), (std::vector<std::string>{"test_a", "test_b"}));
}

TEST(DiscoverCasesTest, NamesCasesUnderARootByTheirRelativePath) {
  TempDir dir;
  write_case(dir, "node/test_add", "");
  write_case(dir, "simple/test_relu", "");
  write_case(dir, "node/test_abs", "");
  auto cases = discover_cases(dir.path().string());
  ASSERT_TRUE(cases.ok()) << cases.status();
  EXPECT_EQ(names(*cases),
            (std::vector<std::string>{"node/test_abs", "node/test_add", "simple/test_relu"}));
  EXPECT_EQ((*cases)[0].path, (dir.path() / "node" / "test_abs").string());
}

TEST(DiscoverCasesTest, ACaseFolderIsItsOwnCase) {
  TempDir dir;
  write_case(dir, "node/test_add", "");
  for (std::string path :
       {(dir.path() / "node/test_add").string(), (dir.path() / "node/test_add").string() + "/"}) {
    auto cases = discover_cases(path);
    ASSERT_TRUE(cases.ok()) << cases.status();
    EXPECT_EQ(names(*cases), (std::vector<std::string>{"test_add"})) << path;
  }
}

TEST(DiscoverCasesTest, MissingFolderIsNotFound) {
  TempDir dir;
  auto cases = discover_cases((dir.path() / "missing").string());
  ASSERT_FALSE(cases.ok());
  EXPECT_EQ(cases.error(), Error::NotFound);
  EXPECT_NE(cases.status().message().find("missing"), std::string::npos);
}

TEST(RunCaseTest, SequenceInputIsUnsupported) {
  TempDir dir;
  write_case(dir, "test_seq", relu_model(/*sequence_input=*/true));
  CaseResult result = run_case({"test_seq", (dir.path() / "test_seq").string()}, {});
  EXPECT_EQ(result.outcome, Outcome::Unsupported);
  EXPECT_EQ(result.detail, "sequence input");
  EXPECT_EQ(format_case_line(result), "test_seq: unsupported: sequence input");
}

TEST(RunCaseTest, CorruptModelFails) {
  TempDir dir;
  write_case(dir, "test_bad", "\xff\xff\xff");
  CaseResult result = run_case({"test_bad", (dir.path() / "test_bad").string()}, {});
  EXPECT_EQ(result.outcome, Outcome::Fail);
  EXPECT_NE(result.detail.find("model.onnx"), std::string::npos) << result.detail;
}

TEST(RunCaseTest, CaseWithoutDataSetsFails) {
  TempDir dir;
  dir.write("test_empty/model.onnx", relu_model());
  CaseResult result = run_case({"test_empty", (dir.path() / "test_empty").string()}, {});
  EXPECT_EQ(result.outcome, Outcome::Fail);
  EXPECT_EQ(result.detail, "no test_data_set_* folders");
}

// End to end through export_onnx_file, Program::load and Method::execute.
TEST(RunCaseTest, ReluCasePasses) {
  TempDir dir;
  std::string path = write_relu_case(dir, "test_relu", {0, 0, 1, 0, 2, 3});
  CaseResult result = run_case({"test_relu", path}, {});
  EXPECT_EQ(result.outcome, Outcome::Pass) << result.detail;
  EXPECT_EQ(format_case_line(result), "test_relu: pass");
}

TEST(RunCaseTest, WrongOutputFailsNamingDataSetOutputAndElement) {
  TempDir dir;
  std::string path = write_relu_case(dir, "test_relu", {0, 0, 1, 0, 2.5f, 3});
  CaseResult result = run_case({"test_relu", path}, {});
  EXPECT_EQ(result.outcome, Outcome::Fail);
  EXPECT_EQ(result.detail,
            "test_data_set_0: output 'y': element [1, 1] (flat 4) is 2 (expected 2.5)");
}

TEST(RunConformanceTest, FiltersByRegexAndIsolatesCases) {
  TempDir dir;
  write_case(dir, "node/test_seq_a", relu_model(true));
  write_case(dir, "node/test_seq_b", relu_model(true));
  write_case(dir, "simple/test_bad", "\xff\xff\xff");
  for (bool isolate : {false, true}) {
    ConformanceOptions options;
    options.isolate = isolate;
    options.filter = "seq_[ab]$";
    std::vector<std::string> seen;
    auto results = run_conformance(dir.path().string(), options,
                                   [&](const CaseResult& r) { seen.push_back(r.name); });
    ASSERT_TRUE(results.ok()) << results.status();
    EXPECT_EQ(seen, (std::vector<std::string>{"node/test_seq_a", "node/test_seq_b"}));
    ASSERT_EQ(results->size(), 2u);
    EXPECT_EQ((*results)[1].outcome, Outcome::Unsupported);
    EXPECT_EQ((*results)[1].detail, "sequence input");

    options.filter = "bad";
    results = run_conformance(dir.path().string(), options);
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_EQ(results->size(), 1u);
    EXPECT_EQ((*results)[0].outcome, Outcome::Fail);
  }
}

TEST(RunConformanceTest, InvalidFilterIsAnError) {
  TempDir dir;
  ConformanceOptions options;
  options.filter = "test_(";
  auto results = run_conformance(dir.path().string(), options);
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.error(), Error::InvalidArgument);
  EXPECT_NE(results.status().message().find("test_("), std::string::npos);
}

TEST(RunConformanceTest, MissingFolderIsAnError) {
  TempDir dir;
  auto results = run_conformance((dir.path() / "nowhere").string(), {});
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.error(), Error::NotFound);
}

}  // namespace
}  // namespace kiln::exporter
