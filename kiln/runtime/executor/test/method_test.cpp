#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/test/test_kernels.h>
#include <kiln/runtime/executor/test/test_util.h>

#include <gtest/gtest.h>

namespace kiln::runtime {
namespace {

using testing::F32;
using testing::I64;
using testing::ProgramBuilder;
using test::f32;
using test::values_of;

class MethodTest : public ::testing::Test {
 protected:
  void SetUp() override { test::register_test_kernels(); }
};

TEST_F(MethodTest, RunsKernelsWithConstantsAndAttributes) {
  auto program = test::load_or_die(ProgramBuilder()
                                       .input("x", F32, {2, 2})
                                       .constant_f32("bias", {2, 2}, {10, 20, 30, 40})
                                       .node("TestScale", {"x", "bias"}, {"y"}, {{"scale", 3.0}})
                                       .node("TestScale", {"y", ""}, {"z"})
                                       .output("z"));
  auto method = program->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status();
  std::vector<float> x = {1, 2, 3, 4};
  ASSERT_TRUE((*method)->set_input(0, f32({2, 2}, x)).ok());
  ASSERT_TRUE((*method)->execute().ok());
  EXPECT_EQ(values_of((*method)->get_output(0)), (std::vector<float>{26, 52, 78, 104}));
  x = {0, 0, 0, 1};  // a second run with new inputs
  ASSERT_TRUE((*method)->set_input(0, f32({2, 2}, x)).ok());
  ASSERT_TRUE((*method)->execute().ok());
  EXPECT_EQ(values_of((*method)->get_output(0)), (std::vector<float>{20, 40, 60, 86}));
}

TEST_F(MethodTest, MetaDescribesInputsOutputsAndSymbols) {
  auto program = test::load_or_die(
      ProgramBuilder()
          .input("tokens", F32, {1, 128}, ShapeDynamism::Bounded, {"", "seq"})
          .node("TestScale", {"tokens"}, {"out"})
          .output("out"));
  auto meta = program->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->num_inputs(), 1u);
  EXPECT_EQ(meta->inputs[0].name, "tokens");
  EXPECT_EQ(meta->inputs[0].dtype, ScalarType::Float32);
  EXPECT_EQ(meta->inputs[0].sizes, (std::vector<int64_t>{1, 128}));
  EXPECT_EQ(meta->inputs[0].dim_names, (std::vector<std::string>{"", "seq"}));
  EXPECT_EQ(meta->inputs[0].dynamism, ShapeDynamism::Bounded);
  EXPECT_EQ(meta->outputs[0].name, "out");
  EXPECT_EQ(meta->kernel_ops, std::vector<std::string>{"TestScale"});
  EXPECT_GT(meta->planned_bytes(), 0u);
  auto missing = program->method_meta("decode");
  EXPECT_EQ(missing.error(), Error::NotFound);
  EXPECT_NE(missing.status().message().find("'decode'"), std::string::npos);
  EXPECT_NE(missing.status().message().find("present: 'forward'"), std::string::npos);
}

TEST_F(MethodTest, EveryMissingOperatorIsReportedAtOnce) {
  auto program = test::load_or_die(ProgramBuilder()
                                       .input("x", F32, {2})
                                       .node("NoSuchOpA", {"x"}, {"y"})
                                       .node("TestScale", {"y"}, {"z"})
                                       .node("NoSuchOpB", {"z"}, {"w"})
                                       .node("NoSuchOpA", {"w"}, {"v"})
                                       .output("v"));
  auto method = program->load_method("forward");
  ASSERT_EQ(method.error(), Error::OperatorMissing);
  EXPECT_NE(method.status().message().find("2 operators: NoSuchOpA, NoSuchOpB"),
            std::string::npos)
      << method.status().message();
}

TEST_F(MethodTest, SetInputChecksTagDtypeRankAndShape) {
  auto program = test::load_or_die(
      ProgramBuilder().input("x", F32, {2, 2}).node("TestScale", {"x"}, {"y"}).output("y"));
  auto method = std::move(program->load_method("forward").get());
  std::vector<float> four(4), six(6);
  int64_t ints[4] = {};
  Status s = method->set_input(0, EValue(Tensor(ScalarType::Int64, {2, 2}, ints)));
  EXPECT_EQ(s.code(), Error::InvalidType);
  EXPECT_NE(s.message().find("input 'x'"), std::string::npos);
  EXPECT_NE(s.message().find("dtype i64 (expected f32)"), std::string::npos);
  s = method->set_input(0, f32({4}, four));
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("rank 1 (expected rank 2"), std::string::npos);
  s = method->set_input(0, f32({2, 3}, six));
  EXPECT_NE(s.message().find("shape [2, 3] (expected [2, 2])"), std::string::npos);
  EXPECT_EQ(method->set_input(0, EValue(int64_t{3})).code(), Error::InvalidType);
  EXPECT_EQ(method->set_input(1, f32({2, 2}, four)).code(), Error::InvalidArgument);
}

TEST_F(MethodTest, BoundedInputsResizeAndOutputsFollow) {
  auto program = test::load_or_die(
      ProgramBuilder()
          .input("x", F32, {1, 8}, ShapeDynamism::Bounded)
          .node("TestScale", {"x"}, {"y"})
          .output("y"));
  auto method = std::move(program->load_method("forward").get());
  std::vector<float> x = {1, 2, 3};
  ASSERT_TRUE(method->set_input(0, f32({1, 3}, x)).ok());
  ASSERT_TRUE(method->execute().ok());
  const Tensor& y = method->get_output(0).to_tensor();
  EXPECT_EQ(std::vector<int64_t>(y.sizes().begin(), y.sizes().end()),
            (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(values_of(method->get_output(0)), (std::vector<float>{2, 4, 6}));
  std::vector<float> big(9);
  Status s = method->set_input(0, f32({1, 9}, big));
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("exceeds the bound 8 of dim 1"), std::string::npos) << s.message();
}

TEST_F(MethodTest, UnboundedTensorsGrowAtRunTime) {
  auto program = test::load_or_die(
      ProgramBuilder()
          .input("x", F32, {0, 2}, ShapeDynamism::Unbounded)
          .tensor("y", F32, {0, 2}, ShapeDynamism::Unbounded)
          .node("TestRepeat", {"x"}, {"y"}, {{"times", int64_t{3}}})
          .output("y"));
  auto method = std::move(program->load_method("forward").get());
  for (int rows : {1, 4, 2}) {
    std::vector<float> x(static_cast<size_t>(rows) * 2, 1.5f);
    ASSERT_TRUE(method->set_input(0, f32({rows, 2}, x)).ok());
    ASSERT_TRUE(method->execute().ok());
    const Tensor& y = method->get_output(0).to_tensor();
    EXPECT_EQ(y.size(0), rows * 3);
    EXPECT_EQ(values_of(method->get_output(0)), std::vector<float>(rows * 6, 1.5f));
  }
}

TEST_F(MethodTest, StaticOutputRejectsKernelResize) {
  auto program = test::load_or_die(ProgramBuilder()
                                       .input("x", F32, {2, 2})
                                       .tensor("y", F32, {2, 2})
                                       .node("TestRepeat", {"x"}, {"y"}, {{"times", int64_t{2}}})
                                       .output("y"));
  auto method = std::move(program->load_method("forward").get());
  std::vector<float> x(4);
  ASSERT_TRUE(method->set_input(0, f32({2, 2}, x)).ok());
  Status s = method->execute();
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("instruction 0, kernel TestRepeat"), std::string::npos);
  EXPECT_NE(s.message().find("[4, 2]"), std::string::npos) << s.message();
}

TEST_F(MethodTest, SeveralMethodsLoadIndependently) {
  auto program = test::load_or_die(ProgramBuilder()
                                       .method("prefill")
                                       .input("x", F32, {2})
                                       .node("TestScale", {"x"}, {"y"})
                                       .output("y")
                                       .method("decode")
                                       .input("x", F32, {1})
                                       .node("TestScale", {"x"}, {"y"}, {{"scale", 5.0}})
                                       .output("y"));
  EXPECT_EQ(program->method_names(), (std::vector<std::string>{"prefill", "decode"}));
  auto decode = std::move(program->load_method("decode").get());
  std::vector<float> x = {2};
  ASSERT_TRUE(decode->set_input(0, f32({1}, x)).ok());
  ASSERT_TRUE(decode->execute().ok());
  EXPECT_EQ(values_of(decode->get_output(0)), std::vector<float>{10});
  program.reset();  // the method keeps the program alive
  ASSERT_TRUE(decode->execute().ok());
}

TEST_F(MethodTest, ScalarInputsKeepTheirTag) {
  auto program = test::load_or_die(ProgramBuilder()
                                       .input("x", F32, {1})
                                       .scalar_input("step", EValue(int64_t{0}))
                                       .node("TestScale", {"x"}, {"y"})
                                       .output("y"));
  auto method = std::move(program->load_method("forward").get());
  EXPECT_TRUE(method->set_input(1, EValue(int64_t{5})).ok());
  EXPECT_EQ(method->get_input(1).to_int(), 5);
  EXPECT_EQ(method->set_input(1, EValue(2.0)).code(), Error::InvalidType);
}

}  // namespace
}  // namespace kiln::runtime
