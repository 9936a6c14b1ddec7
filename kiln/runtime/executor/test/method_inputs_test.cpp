// Method::execute(inputs): tensors the method only reads are read from the caller's data in
// place; the others, and outputs of an earlier run given back, are copied first.
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/test/test_kernels.h>
#include <kiln/runtime/executor/test/test_util.h>

#include <gtest/gtest.h>

namespace kiln::runtime {
namespace {

using testing::F32;
using testing::ProgramBuilder;
using test::f32;
using test::values_of;

class MethodInputsTest : public ::testing::Test {
 protected:
  void SetUp() override { test::register_test_kernels(); }

  std::unique_ptr<Method> load(const ProgramBuilder& builder) {
    auto program = test::load_or_die(builder);
    auto method = program->load_method("forward");
    EXPECT_TRUE(method.ok()) << method.status();
    return method.ok() ? std::move(method).get() : nullptr;
  }
};

TEST_F(MethodInputsTest, ReadsInputsInPlaceAndGivesTheirStorageBack) {
  auto method = load(ProgramBuilder()
                         .input("x", F32, {4})
                         .node("TestReverse", {"x"}, {"y"})
                         .output("y"));
  ASSERT_NE(method, nullptr);
  EXPECT_TRUE(method->reads_input_in_place(0));
  EXPECT_FALSE(method->reads_input_in_place(1));  // out of range
  const void* own = method->get_input(0).to_tensor().data();
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<EValue> inputs = {f32({4}, x)};
  ASSERT_TRUE(method->execute(inputs).ok());
  EXPECT_EQ(test::last_reverse_input(), x.data());  // read in place: no copy
  EXPECT_EQ(values_of(method->get_output(0)), (std::vector<float>{4, 3, 2, 1}));
  EXPECT_EQ(method->get_input(0).to_tensor().data(), own);  // its own memory again
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(MethodInputsTest, OutputGivenBackAsInputIsCopiedFirst) {
  // Reading the output's bytes in place while writing them would reverse them in place,
  // which TestReverse gets wrong: the input is copied into the method's own memory first.
  auto method = load(ProgramBuilder()
                         .input("x", F32, {5})
                         .node("TestReverse", {"x"}, {"y"})
                         .output("y"));
  ASSERT_NE(method, nullptr);
  std::vector<float> x = {1, 2, 3, 4, 5};
  std::vector<EValue> inputs = {f32({5}, x)};
  ASSERT_TRUE(method->execute(inputs).ok());
  std::vector<EValue> again = {method->get_output(0)};
  ASSERT_TRUE(method->execute(again).ok());
  EXPECT_NE(test::last_reverse_input(), method->get_output(0).to_tensor().data());
  EXPECT_EQ(values_of(method->get_output(0)), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST_F(MethodInputsTest, GrownOutputGivenBackAsUnboundedInputIsCopiedFirst) {
  // y's storage is allocated at run time, as it grows: given back, it is copied all the same.
  auto method = load(ProgramBuilder()
                         .input("x", F32, {0}, ShapeDynamism::Unbounded)
                         .tensor("y", F32, {0}, ShapeDynamism::Unbounded)
                         .node("TestReverse", {"x"}, {"y"})
                         .output("y"));
  ASSERT_NE(method, nullptr);
  EXPECT_TRUE(method->reads_input_in_place(0));
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7};
  std::vector<EValue> inputs = {f32({7}, x)};
  ASSERT_TRUE(method->execute(inputs).ok());
  EXPECT_EQ(test::last_reverse_input(), x.data());
  EXPECT_EQ(method->get_input(0).to_tensor().dim(), 1);
  std::vector<EValue> again = {method->get_output(0)};
  ASSERT_TRUE(method->execute(again).ok());
  EXPECT_EQ(values_of(method->get_output(0)), (std::vector<float>{1, 2, 3, 4, 5, 6, 7}));
  // The input's own storage is smaller than 7 values: it is left empty after a call.
  EXPECT_LE(method->get_input(0).to_tensor().nbytes(),
            method->get_input(0).to_tensor().capacity_bytes());
}

TEST_F(MethodInputsTest, InputsTheMethodWritesOrReturnsAreCopied) {
  // x is written by a move; z is also an output: neither may point at the caller's data.
  auto method = load(ProgramBuilder()
                         .input("x", F32, {3})
                         .input("z", F32, {3})
                         .node("TestReverse", {"x"}, {"y"})
                         .move("y", "x")
                         .output("x")
                         .output("z"));
  ASSERT_NE(method, nullptr);
  EXPECT_FALSE(method->reads_input_in_place(0));
  EXPECT_FALSE(method->reads_input_in_place(1));
  std::vector<float> x = {1, 2, 3}, z = {7, 8, 9};
  std::vector<EValue> inputs = {f32({3}, x), f32({3}, z)};
  ASSERT_TRUE(method->execute(inputs).ok());
  EXPECT_EQ(values_of(method->get_output(0)), (std::vector<float>{3, 2, 1}));
  EXPECT_EQ(values_of(method->get_output(1)), (std::vector<float>{7, 8, 9}));
  EXPECT_NE(method->get_output(1).to_tensor().data(), z.data());
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3}));  // the caller's data is left as it was
}

TEST_F(MethodInputsTest, BoundedInputReadInPlaceTakesItsSizes) {
  auto method = load(ProgramBuilder()
                         .input("x", F32, {8}, ShapeDynamism::Bounded)
                         .node("TestReverse", {"x"}, {"y"})
                         .output("y"));
  ASSERT_NE(method, nullptr);
  std::vector<float> x = {1, 2, 3};
  std::vector<EValue> inputs = {f32({3}, x)};
  ASSERT_TRUE(method->execute(inputs).ok());
  EXPECT_EQ(test::last_reverse_input(), x.data());
  EXPECT_EQ(values_of(method->get_output(0)), (std::vector<float>{3, 2, 1}));
  std::vector<float> big(9, 1.0f);
  std::vector<EValue> too_big = {f32({9}, big)};
  Status status = method->execute(too_big);
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_NE(status.message().find("exceeds the bound 8"), std::string::npos) << status;
  // A failed call leaves the input on the method's own memory: set_input and execute work.
  std::vector<float> y = {5, 6};
  ASSERT_TRUE(method->set_input(0, f32({2}, y)).ok());
  ASSERT_TRUE(method->execute().ok());
  EXPECT_EQ(values_of(method->get_output(0)), (std::vector<float>{6, 5}));
}

TEST_F(MethodInputsTest, ChecksTheInputsLikeSetInput) {
  auto method = load(ProgramBuilder()
                         .input("x", F32, {2})
                         .node("TestReverse", {"x"}, {"y"})
                         .output("y"));
  ASSERT_NE(method, nullptr);
  std::vector<float> x = {1, 2, 3};
  std::vector<EValue> none;
  Status count = method->execute(none);
  EXPECT_EQ(count.code(), Error::InvalidArgument);
  EXPECT_NE(count.message().find("0 inputs given (expected 1)"), std::string::npos) << count;
  std::vector<EValue> wrong = {f32({3}, x)};
  Status shape = method->execute(wrong);
  EXPECT_EQ(shape.code(), Error::InvalidArgument);
  EXPECT_NE(shape.message().find("set input 'x'"), std::string::npos) << shape;
  EXPECT_NE(shape.message().find("expected [2]"), std::string::npos) << shape;
  std::vector<EValue> no_data = {EValue(Tensor(ScalarType::Float32, {2}, nullptr))};
  EXPECT_EQ(method->execute(no_data).code(), Error::InvalidArgument);
}

}  // namespace
}  // namespace kiln::runtime
