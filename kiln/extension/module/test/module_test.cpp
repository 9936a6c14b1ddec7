// Module: loading, running, metadata, load modes and input errors.

#include <kiln/extension/module/module.h>
#include <kiln/extension/module/tensor_ptr.h>
#include <kiln/extension/module/test/test_files.h>
#include <kiln/testing/program_builder.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <vector>

namespace kiln::extension {
namespace {

using kiln::testing::F32;
using kiln::testing::ProgramBuilder;
using runtime::Error;
using runtime::EValue;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// forward: y = Relu(x), x f32 [1, 4]; other: z = Relu(a), a f32 [2, 2].
ProgramBuilder two_method_program() {
  ProgramBuilder builder;
  builder.input("x", F32, {1, 4}).node("Relu", {"x"}, {"y"}).output("y");
  builder.method("other").input("a", F32, {2, 2}).node("Relu", {"a"}, {"z"}).output("z");
  return builder;
}

// forward: y = Relu(NoSuchOp(x)), which no kernel implements.
ProgramBuilder missing_op_program() {
  ProgramBuilder builder;
  builder.input("x", F32, {1, 4}).node("NoSuchOp", {"x"}, {"y"}).output("y");
  return builder;
}

TensorPtr input_1x4(std::vector<float> values = {-1.0f, 2.0f, -3.0f, 4.0f}) {
  auto tensor = make_tensor_ptr({1, 4}, std::move(values));
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return *tensor;
}

std::vector<float> values_of(const EValue& value) {
  EXPECT_TRUE(value.is_tensor());
  const auto& tensor = value.to_tensor();
  EXPECT_EQ(tensor.dtype(), runtime::ScalarType::Float32);
  const float* data = tensor.data_ptr<float>();
  return std::vector<float>(data, data + tensor.numel());
}

class ModuleTest : public ::testing::Test {
 protected:
  test::TempDir dir_;
};

TEST_F(ModuleTest, LoadThenForwardReturnsTheOutputs) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  EXPECT_FALSE(module.is_loaded());
  ASSERT_TRUE(module.load().ok());
  EXPECT_TRUE(module.is_loaded());
  EXPECT_FALSE(module.is_method_loaded("forward"));

  auto outputs = module.forward({EValue(*input_1x4())});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_THAT((*outputs)[0].to_tensor().sizes(), ElementsAre(1, 4));
  EXPECT_THAT(values_of((*outputs)[0]), ElementsAre(0.0f, 2.0f, 0.0f, 4.0f));
  EXPECT_TRUE(module.is_method_loaded("forward"));
  EXPECT_FALSE(module.is_method_loaded("other"));
}

TEST_F(ModuleTest, ExecuteLoadsProgramAndMethodOnFirstUse) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  auto x = make_tensor_ptr({2, 2}, std::vector<float>{1.0f, -1.0f, -2.0f, 2.0f});
  ASSERT_TRUE(x.ok());
  auto outputs = module.execute("other", {EValue(**x)});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(values_of((*outputs)[0]), ElementsAre(1.0f, 0.0f, 0.0f, 2.0f));
  EXPECT_TRUE(module.is_loaded());
  EXPECT_TRUE(module.is_method_loaded("other"));
}

TEST_F(ModuleTest, RepeatedExecuteReusesTheMethod) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  auto first = module.method("forward");
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = module.method("forward");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*first, *again);

  auto outputs = module.forward({EValue(*input_1x4())});
  ASSERT_TRUE(outputs.ok());
  auto kept = clone_tensor_ptr((*outputs)[0].to_tensor());
  ASSERT_TRUE(kept.ok());
  outputs = module.forward({EValue(*input_1x4({5.0f, -6.0f, 7.0f, -8.0f}))});
  ASSERT_TRUE(outputs.ok());
  EXPECT_THAT(values_of((*outputs)[0]), ElementsAre(5.0f, 0.0f, 7.0f, 0.0f));
  // The clone owns its data: the second run did not change it.
  EXPECT_THAT(values_of(EValue(**kept)), ElementsAre(0.0f, 2.0f, 0.0f, 4.0f));
}

TEST_F(ModuleTest, MethodNamesAndMetaDescribeTheProgram) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  auto names = module.method_names();  // loads the program on demand
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("forward", "other"));

  auto meta = module.method_meta("other");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->name, "other");
  ASSERT_EQ(meta->num_inputs(), 1u);
  EXPECT_EQ(meta->inputs[0].name, "a");
  EXPECT_EQ(meta->inputs[0].dtype, F32);
  EXPECT_THAT(meta->inputs[0].sizes, ElementsAre(2, 2));
  ASSERT_EQ(meta->num_outputs(), 1u);
  EXPECT_EQ(meta->outputs[0].name, "z");
  EXPECT_THAT(meta->kernel_ops, ElementsAre("Relu"));
  EXPECT_FALSE(module.is_method_loaded("other"));  // meta does not load the method

  auto missing = module.method_meta("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), Error::NotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
}

class ModuleLoadModeTest : public ::testing::TestWithParam<Module::LoadMode> {
 protected:
  test::TempDir dir_;
};

TEST_P(ModuleLoadModeTest, RunsTheSameInEitherMode) {
  Module module(dir_.write(two_method_program(), "m.kiln"), GetParam());
  EXPECT_EQ(module.load_mode(), GetParam());
  auto outputs = module.forward({EValue(*input_1x4())});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(values_of((*outputs)[0]), ElementsAre(0.0f, 2.0f, 0.0f, 4.0f));
}

TEST_P(ModuleLoadModeTest, LoadedModuleKeepsWorkingAfterTheFileIsRemoved) {
  const std::string path = dir_.write(two_method_program(), "m.kiln");
  Module module(path, GetParam());
  ASSERT_TRUE(module.load_method("forward").ok());
  std::filesystem::remove(path);

  EXPECT_TRUE(module.load().ok());  // already loaded: the file is not read again
  EXPECT_TRUE(module.is_loaded());
  EXPECT_TRUE(module.is_method_loaded("forward"));
  auto outputs = module.forward({EValue(*input_1x4())});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(values_of((*outputs)[0]), ElementsAre(0.0f, 2.0f, 0.0f, 4.0f));
}

INSTANTIATE_TEST_SUITE_P(Modes, ModuleLoadModeTest,
                         ::testing::Values(Module::LoadMode::File, Module::LoadMode::Mmap),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST_F(ModuleTest, MissingFileFailsAndLeavesTheModuleUnloaded) {
  const std::string path = dir_.file("absent.kiln");
  Module module(path);
  auto status = module.load();
  EXPECT_EQ(status.code(), Error::AccessFailed);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_FALSE(module.is_loaded());

  EXPECT_FALSE(module.load_method("forward").ok());
  EXPECT_FALSE(module.is_loaded());
  EXPECT_FALSE(module.is_method_loaded("forward"));
  EXPECT_FALSE(module.method_names().ok());

  // Failure is not sticky: once the file exists, loading works.
  dir_.write(two_method_program(), "absent.kiln");
  EXPECT_TRUE(module.load().ok());
  EXPECT_TRUE(module.is_loaded());
}

TEST_F(ModuleTest, CorruptFileFailsWithInvalidProgram) {
  const std::string path = dir_.file("bad.kiln");
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not a kiln program, just text long enough for a header......", f);
    std::fclose(f);
  }
  Module module(path);
  auto status = module.load();
  EXPECT_EQ(status.code(), Error::InvalidProgram);
  EXPECT_FALSE(module.is_loaded());
}

TEST_F(ModuleTest, UnknownMethodFailsAndKeepsLoadedMethods) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  ASSERT_TRUE(module.load_method("forward").ok());
  auto status = module.load_method("nope");
  EXPECT_EQ(status.code(), Error::NotFound);
  EXPECT_THAT(status.message(), HasSubstr("'nope'"));
  EXPECT_FALSE(module.is_method_loaded("nope"));
  EXPECT_TRUE(module.is_method_loaded("forward"));
  EXPECT_TRUE(module.forward({EValue(*input_1x4())}).ok());

  auto outputs = module.execute("nope", {});
  EXPECT_EQ(outputs.error(), Error::NotFound);
}

TEST_F(ModuleTest, MissingOperatorFailsAtLoadAndLeavesModuleUnloaded) {
  Module module(dir_.write(missing_op_program(), "m.kiln"));
  auto status = module.load_method("forward");
  EXPECT_EQ(status.code(), Error::OperatorMissing);
  EXPECT_THAT(status.message(), HasSubstr("NoSuchOp"));
  // The program was loaded by this call only; a failed load_method drops it again.
  EXPECT_FALSE(module.is_loaded());
  EXPECT_FALSE(module.is_method_loaded("forward"));
}

TEST_F(ModuleTest, WrongInputCountNamesTheExpectedInputs) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  auto outputs = module.forward({});
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.error(), Error::InvalidArgument);
  EXPECT_THAT(outputs.status().message(), HasSubstr("execute method 'forward'"));
  EXPECT_THAT(outputs.status().message(), HasSubstr("got 0 inputs (expected 1: 'x')"));

  auto x = input_1x4();
  outputs = module.forward({EValue(*x), EValue(*x)});
  EXPECT_THAT(outputs.status().message(), HasSubstr("got 2 inputs (expected 1: 'x')"));
}

TEST_F(ModuleTest, WrongInputDtypeNamesInputAndDtypes) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  auto x = make_tensor_ptr({1, 4}, std::vector<int64_t>{1, 2, 3, 4});
  ASSERT_TRUE(x.ok());
  auto outputs = module.forward({EValue(**x)});
  EXPECT_EQ(outputs.error(), Error::InvalidArgument);
  EXPECT_THAT(outputs.status().message(), HasSubstr("input 0 'x' has dtype i64 (expected f32)"));
}

TEST_F(ModuleTest, WrongInputShapeNamesInputAndShapes) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  auto x = make_tensor_ptr({1, 3}, std::vector<float>{1, 2, 3});
  ASSERT_TRUE(x.ok());
  auto outputs = module.forward({EValue(**x)});
  EXPECT_EQ(outputs.error(), Error::InvalidArgument);
  EXPECT_THAT(outputs.status().message(),
              HasSubstr("input 0 'x' has shape [1, 3] (expected [1, 4])"));

  auto flat = make_tensor_ptr({4}, std::vector<float>{1, 2, 3, 4});
  ASSERT_TRUE(flat.ok());
  outputs = module.forward({EValue(**flat)});
  EXPECT_THAT(outputs.status().message(), HasSubstr("has shape [4] of rank 1 (expected rank 2"));
}

TEST_F(ModuleTest, NonTensorInputNamesTheKind) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  auto outputs = module.forward({EValue(int64_t{3})});
  EXPECT_EQ(outputs.error(), Error::InvalidArgument);
  EXPECT_THAT(outputs.status().message(), HasSubstr("input 0 'x' is a"));
}

TEST_F(ModuleTest, BoundedInputAcceptsSmallerShapesOnly) {
  ProgramBuilder builder;
  builder.input("x", F32, {1, 8}, runtime::ShapeDynamism::Bounded, {"", "seq"})
      .node("Relu", {"x"}, {"y"})
      .output("y");
  Module module(dir_.write(builder, "bounded.kiln"));
  auto small = make_tensor_ptr({1, 2}, std::vector<float>{-1.0f, 1.0f});
  ASSERT_TRUE(small.ok());
  auto outputs = module.forward({EValue(**small)});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT((*outputs)[0].to_tensor().sizes(), ElementsAre(1, 2));
  EXPECT_THAT(values_of((*outputs)[0]), ElementsAre(0.0f, 1.0f));

  auto large = make_tensor_ptr(F32, {1, 9});
  ASSERT_TRUE(large.ok());
  outputs = module.forward({EValue(**large)});
  EXPECT_EQ(outputs.error(), Error::InvalidArgument);
  EXPECT_THAT(outputs.status().message(), HasSubstr("(expected at most [1, 8])"));
}

TEST_F(ModuleTest, MovedModuleKeepsItsMethods) {
  Module module(dir_.write(two_method_program(), "m.kiln"));
  ASSERT_TRUE(module.load_method("forward").ok());
  Module moved(std::move(module));
  EXPECT_TRUE(moved.is_method_loaded("forward"));
  EXPECT_TRUE(moved.forward({EValue(*input_1x4())}).ok());
}

TEST(ModuleLoadModeNames, AreLowercase) {
  EXPECT_EQ(to_string(Module::LoadMode::File), "file");
  EXPECT_EQ(to_string(Module::LoadMode::Mmap), "mmap");
}

}  // namespace
}  // namespace kiln::extension
