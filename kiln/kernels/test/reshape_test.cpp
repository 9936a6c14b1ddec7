// Reshape, Flatten and Identity: the shape rules and the element copy.

#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::ScalarType;
using test_helpers::OwnedTensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

// ---- reshape_shape ----------------------------------------------------------------------------

TEST(ReshapeShape, PlainShapeIsKept) {
  EXPECT_EQ(*reshape_shape(Shape{2, 3, 4}, Shape{6, 4}, false), (Shape{6, 4}));
  EXPECT_EQ(*reshape_shape(Shape{1}, Shape{}, false), Shape{});  // to a scalar
}

TEST(ReshapeShape, ZeroCopiesTheInputDimension) {
  EXPECT_EQ(*reshape_shape(Shape{2, 3, 4}, Shape{0, 12}, false), (Shape{2, 12}));
  EXPECT_EQ(*reshape_shape(Shape{2, 3, 4}, Shape{0, 0, 4}, false), (Shape{2, 3, 4}));
}

TEST(ReshapeShape, MinusOneIsInferred) {
  EXPECT_EQ(*reshape_shape(Shape{2, 3, 4}, Shape{-1}, false), Shape{24});
  EXPECT_EQ(*reshape_shape(Shape{2, 3, 4}, Shape{4, -1}, false), (Shape{4, 6}));
  EXPECT_EQ(*reshape_shape(Shape{2, 3, 4}, Shape{0, -1}, false), (Shape{2, 12}));
  EXPECT_EQ(*reshape_shape(Shape{0, 3}, Shape{-1, 3}, false), (Shape{0, 3}));
}

TEST(ReshapeShape, AllowZeroMakesZeroLiteral) {
  EXPECT_EQ(*reshape_shape(Shape{0, 3}, Shape{3, 0}, true), (Shape{3, 0}));
  // Without allowzero the same request copies dims: [3, 3] has 9 elements, not 0.
  auto copied = reshape_shape(Shape{0, 3}, Shape{3, 0}, false);
  EXPECT_EQ(copied.error(), Error::InvalidArgument);
}

TEST(ReshapeShape, TwoMinusOnesAreAnError) {
  auto shape = reshape_shape(Shape{2, 3}, Shape{-1, 2, -1}, false);
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(),
              HasSubstr("input 1 (shape) [-1, 2, -1] has -1 at positions 0 and 2 (expected at "
                        "most one -1)"));
}

TEST(ReshapeShape, ValuesBelowMinusOneAreAnError) {
  auto shape = reshape_shape(Shape{6}, Shape{-2, 3}, false);
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("has -2 at position 0 (expected sizes >= -1)"));
}

TEST(ReshapeShape, ElementCountMismatchIsAnError) {
  auto shape = reshape_shape(Shape{2, 3}, Shape{4, 2}, false);
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(),
              HasSubstr("gives shape [4, 2] with 8 elements (expected 6, the elements of input 0 "
                        "of shape [2, 3])"));
}

TEST(ReshapeShape, UninferableMinusOneIsAnError) {
  auto indivisible = reshape_shape(Shape{2, 3}, Shape{4, -1}, false);
  EXPECT_EQ(indivisible.error(), Error::InvalidArgument);
  EXPECT_THAT(indivisible.status().message(), HasSubstr("cannot infer the -1 at position 1"));
  auto zero = reshape_shape(Shape{0, 3}, Shape{0, -1}, false);
  EXPECT_EQ(zero.error(), Error::InvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("the other sizes multiply to 0"));
}

TEST(ReshapeShape, ZeroPastTheInputRankIsAnError) {
  auto shape = reshape_shape(Shape{6}, Shape{6, 0}, false);
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("has 0 at position 1, past the last dimension"));
}

TEST(ReshapeShape, ZeroWithMinusOneUnderAllowZeroIsAnError) {
  auto shape = reshape_shape(Shape{0, 3}, Shape{0, -1}, true);
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("both 0 and -1 with attribute 'allowzero' = 1"));
}

// ---- Reshape, Flatten, Identity copies --------------------------------------------------------

TEST(Reshape, CopiesElementsInOrder) {
  auto x = OwnedTensor::of<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = OwnedTensor::zeros(ScalarType::Int64, {3, 2});
  ASSERT_TRUE(reshape(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<int64_t>(), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(Reshape, OutputWithOtherElementCountIsAnError) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {4});
  auto status = reshape(x.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Reshape': output 0 has shape [4]"));
}

TEST(FlattenShape, SplitsAtTheAxis) {
  EXPECT_EQ(*flatten_shape(Shape{2, 3, 4}, 0), (Shape{1, 24}));
  EXPECT_EQ(*flatten_shape(Shape{2, 3, 4}, 1), (Shape{2, 12}));
  EXPECT_EQ(*flatten_shape(Shape{2, 3, 4}, 3), (Shape{24, 1}));
  EXPECT_EQ(*flatten_shape(Shape{2, 3, 4}, -1), (Shape{6, 4}));
  EXPECT_EQ(*flatten_shape(Shape{2, 3, 4}, -3), (Shape{1, 24}));
  EXPECT_EQ(*flatten_shape(Shape{}, 0), (Shape{1, 1}));
}

TEST(FlattenShape, AxisOutOfRangeIsAnError) {
  auto shape = flatten_shape(Shape{2, 3}, 3);
  EXPECT_EQ(shape.error(), Error::InvalidArgument);
  EXPECT_THAT(shape.status().message(),
              HasSubstr("attribute 'axis' is 3 (expected -2..2 for input 0 of rank 2)"));
}

TEST(Flatten, CopiesAnyDtype) {
  auto x = OwnedTensor::of<uint8_t>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto out = OwnedTensor::zeros(ScalarType::UInt8, {2, 4});
  ASSERT_TRUE(flatten(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
}

TEST(Identity, CopiesAnyDtypeAndChecksIt) {
  auto x = OwnedTensor::zeros(ScalarType::Bool, {3});
  uint8_t* flags = x.tensor().mutable_data_ptr<uint8_t>();
  flags[0] = 1;
  flags[2] = 1;
  auto out = OwnedTensor::zeros(ScalarType::Bool, {3});
  ASSERT_TRUE(identity(x.tensor(), out.tensor()).ok());
  EXPECT_THAT(out.values<uint8_t>(), ElementsAre(1, 0, 1));

  auto wrong = OwnedTensor::zeros(ScalarType::Int8, {3});
  auto status = identity(x.tensor(), wrong.tensor());
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype i8 (expected bool"));
}

}  // namespace
}  // namespace kiln::kernels
