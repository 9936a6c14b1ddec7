// JumpFalseCall and MoveCall: the instructions a data-dependent If lowers to, and the load-time
// checks that keep a corrupt program from jumping backwards (a hang) or moving between
// mismatched tensors.

#include <kiln/runtime/executor/file_format.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/test/test_kernels.h>
#include <kiln/runtime/executor/test/test_util.h>
#include <kiln/runtime/schema/program_generated.h>

#include <gtest/gtest.h>

#include <functional>

namespace kiln::runtime {
namespace {

using testing::BOOL;
using testing::F32;
using testing::I64;
using testing::ProgramBuilder;

class ControlFlowTest : public ::testing::Test {
 protected:
  void SetUp() override { test::register_test_kernels(); }
};

// y = cond ? x * 2 : x * 3, with both branches writing their own value and moving it into y.
ProgramBuilder if_program(ShapeDynamism cond_dynamism = ShapeDynamism::Static) {
  ProgramBuilder b;
  b.input("cond", BOOL, {1}, cond_dynamism)
      .input("x", F32, {2})
      .tensor("y", F32, {2})
      .jump_false("cond", "else")
      .node("TestScale", {"x"}, {"then_y"}, {{"scale", 2.0}})
      .move("then_y", "y")
      .constant("false", BOOL, {}, {0})
      .jump_false("false", "end")
      .label("else")
      .node("TestScale", {"x"}, {"else_y"}, {{"scale", 3.0}})
      .move("else_y", "y")
      .label("end")
      .output("y");
  return b;
}

Result<std::vector<float>> run_if(Method& method, std::vector<uint8_t> cond,
                                  std::vector<int64_t> cond_sizes = {1}) {
  std::vector<float> x = {1, 2};
  KILN_RETURN_IF_ERROR(
      method.set_input(0, EValue(Tensor(ScalarType::Bool, cond_sizes, cond.data()))));
  KILN_RETURN_IF_ERROR(method.set_input(1, EValue(Tensor(ScalarType::Float32, {2}, x.data()))));
  KILN_RETURN_IF_ERROR(method.execute());
  const Tensor& y = method.get_output(0).to_tensor();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

TEST_F(ControlFlowTest, JumpFalseRunsOneBranch) {
  auto program = test::load_or_die(if_program());
  auto method = program->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status();
  auto taken = run_if(**method, {1});
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(*taken, (std::vector<float>{2, 4}));
  auto not_taken = run_if(**method, {0});
  ASSERT_TRUE(not_taken.ok()) << not_taken.status();
  EXPECT_EQ(*not_taken, (std::vector<float>{3, 6}));
}

TEST_F(ControlFlowTest, ConditionWithManyElementsIsAnError) {
  auto program = test::load_or_die(if_program(ShapeDynamism::Bounded));
  ASSERT_NE(program, nullptr);
  // Bounded to 1 element: the input itself cannot carry two, so use a zero-element one.
  auto method = program->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status();
  auto result = run_if(**method, {}, {0});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Error::InvalidArgument);
  EXPECT_NE(result.status().message().find("instruction 0, jump"), std::string::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("expected one element"), std::string::npos)
      << result.status();
}

TEST_F(ControlFlowTest, MoveResizesItsDestination) {
  auto program = test::load_or_die(ProgramBuilder()
                                       .input("x", F32, {4}, ShapeDynamism::Bounded)
                                       .tensor("y", F32, {4}, ShapeDynamism::Bounded)
                                       .move("x", "y")
                                       .output("y"));
  auto method = program->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status();
  std::vector<float> x = {5, 6, 7};
  ASSERT_TRUE((*method)->set_input(0, EValue(Tensor(ScalarType::Float32, {3}, x.data()))).ok());
  ASSERT_TRUE((*method)->execute().ok());
  const Tensor& y = (*method)->get_output(0).to_tensor();
  ASSERT_EQ(y.numel(), 3);
  EXPECT_EQ(y.data_ptr<float>()[2], 7.0f);
}

TEST_F(ControlFlowTest, MoveIntoAStaticTensorOfAnotherShapeIsAnError) {
  auto program = test::load_or_die(ProgramBuilder()
                                       .input("x", F32, {4}, ShapeDynamism::Bounded)
                                       .tensor("y", F32, {4})
                                       .move("x", "y")
                                       .output("y"));
  auto method = program->load_method("forward");
  ASSERT_TRUE(method.ok()) << method.status();
  std::vector<float> x = {5, 6, 7};
  ASSERT_TRUE((*method)->set_input(0, EValue(Tensor(ScalarType::Float32, {3}, x.data()))).ok());
  auto status = (*method)->execute();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("instruction 0, move"), std::string::npos) << status;
}

TEST_F(ControlFlowTest, BuilderRejectsJumpsToUnplacedLabels) {
  auto bytes = ProgramBuilder().input("c", BOOL, {1}).jump_false("c", "nowhere").build();
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("label 'nowhere'"), std::string::npos);
}

TEST_F(ControlFlowTest, WriterRejectsMoveBetweenDtypesAtLoad) {
  auto bytes = ProgramBuilder()
                   .input("x", F32, {2})
                   .tensor("y", I64, {2})
                   .move("x", "y")
                   .output("y")
                   .build();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto program = test::load_bytes(std::move(bytes).get());
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), Error::InvalidProgram);
  EXPECT_NE(program.status().message().find("(expected the same)"), std::string::npos)
      << program.status();
}

// Builds the If program, then edits jump `index` (0 or 3) in place with the flatbuffers mutation
// API, as a corrupt or hostile file would have it. (A field left at its default is not stored
// and cannot be mutated: jump 0's condition is value 0.)
std::vector<uint8_t> with_jump(size_t index,
                               const std::function<void(schema::JumpFalseCall&)>& edit) {
  auto bytes = if_program().build();
  EXPECT_TRUE(bytes.ok());
  std::vector<uint8_t> data = std::move(bytes).get();
  auto header = FileHeader::decode(data.data(), data.size(), data.size());
  EXPECT_TRUE(header.ok());
  auto* program = schema::GetMutableProgram(data.data() + header->program_offset);
  auto* instruction =
      program->mutable_methods()->GetMutableObject(0)->mutable_instructions()->GetMutableObject(
          index);
  auto* jump = static_cast<schema::JumpFalseCall*>(instruction->mutable_kind());
  edit(*jump);
  return data;
}

TEST_F(ControlFlowTest, BackwardJumpIsRejectedAtLoad) {
  for (int destination : {0, -1}) {
    auto program = test::load_bytes(with_jump(
        0, [&](schema::JumpFalseCall& j) { EXPECT_TRUE(j.mutate_destination(destination)); }));
    ASSERT_FALSE(program.ok()) << destination;
    EXPECT_EQ(program.status().code(), Error::InvalidProgram);
    EXPECT_NE(program.status().message().find("instruction 0"), std::string::npos);
    EXPECT_NE(program.status().message().find("expected a later one, 1..6"), std::string::npos)
        << program.status();
  }
}

TEST_F(ControlFlowTest, JumpPastTheEndIsRejectedAtLoad) {
  auto program = test::load_bytes(
      with_jump(0, [](schema::JumpFalseCall& j) { EXPECT_TRUE(j.mutate_destination(7)); }));
  ASSERT_FALSE(program.ok());
  EXPECT_NE(program.status().message().find("jumps to instruction 7"), std::string::npos)
      << program.status();
}

TEST_F(ControlFlowTest, ConditionOutOfRangeIsRejectedAtLoad) {
  auto program = test::load_bytes(
      with_jump(3, [](schema::JumpFalseCall& j) { EXPECT_TRUE(j.mutate_condition(99)); }));
  ASSERT_FALSE(program.ok());
  EXPECT_NE(program.status().message().find("condition is value 99"), std::string::npos)
      << program.status();
}

}  // namespace
}  // namespace kiln::runtime
