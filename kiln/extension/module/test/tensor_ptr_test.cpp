// TensorPtr helpers: owning, zero-filled, zero-copy and cloned tensors.

#include <kiln/extension/module/tensor_ptr.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kiln::extension {
namespace {

using runtime::Error;
using runtime::ScalarType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(MakeTensorPtr, OwnsItsDataAndTakesDtypeFromT) {
  auto tensor = make_tensor_ptr({2, 2}, std::vector<float>{1, 2, 3, 4});
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  TensorPtr t = *tensor;
  EXPECT_EQ(t->dtype(), ScalarType::Float32);
  EXPECT_THAT(t->sizes(), ElementsAre(2, 2));
  EXPECT_EQ(t->numel(), 4);
  EXPECT_THAT(std::vector<float>(t->data_ptr<float>(), t->data_ptr<float>() + 4),
              ElementsAre(1, 2, 3, 4));

  auto ints = make_tensor_ptr({3}, std::vector<int64_t>{7, 8, 9});
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ((*ints)->dtype(), ScalarType::Int64);
  EXPECT_EQ((*ints)->data_ptr<int64_t>()[2], 9);
}

TEST(MakeTensorPtr, CopiesShareTheData) {
  TensorPtr copy;
  {
    auto tensor = make_tensor_ptr({2}, std::vector<int32_t>{5, 6});
    ASSERT_TRUE(tensor.ok());
    copy = *tensor;
  }
  EXPECT_EQ(copy->dtype(), ScalarType::Int32);
  EXPECT_EQ(copy->data_ptr<int32_t>()[1], 6);
}

TEST(MakeTensorPtr, BoolStoresOneBytePerElement) {
  auto tensor = make_tensor_ptr({3}, std::vector<bool>{true, false, true});
  ASSERT_TRUE(tensor.ok());
  EXPECT_EQ((*tensor)->dtype(), ScalarType::Bool);
  EXPECT_EQ((*tensor)->nbytes(), 3u);
  EXPECT_THAT(
      std::vector<uint8_t>((*tensor)->data_ptr<uint8_t>(), (*tensor)->data_ptr<uint8_t>() + 3),
      ElementsAre(1, 0, 1));
}

TEST(MakeTensorPtr, ScalarHasOneElement) {
  auto tensor = make_tensor_ptr({}, std::vector<double>{2.5});
  ASSERT_TRUE(tensor.ok());
  EXPECT_EQ((*tensor)->dim(), 0);
  EXPECT_EQ((*tensor)->data_ptr<double>()[0], 2.5);
}

TEST(MakeTensorPtr, WrongElementCountNamesBothCounts) {
  auto tensor = make_tensor_ptr({2, 2}, std::vector<float>{1, 2, 3});
  ASSERT_FALSE(tensor.ok());
  EXPECT_EQ(tensor.error(), Error::InvalidArgument);
  EXPECT_THAT(tensor.status().message(),
              HasSubstr("data has 3 elements (expected 4 for shape [2, 2])"));
}

TEST(MakeTensorPtr, NegativeSizeIsAnError) {
  auto tensor = make_tensor_ptr({2, -1}, std::vector<float>{});
  EXPECT_EQ(tensor.error(), Error::InvalidArgument);
  EXPECT_THAT(tensor.status().message(), HasSubstr("[2, -1]"));
  EXPECT_EQ(make_tensor_ptr(ScalarType::Float32, {-3}).error(), Error::InvalidArgument);
}

TEST(MakeTensorPtr, ByDtypeIsZeroFilled) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float16, ScalarType::Int8,
                           ScalarType::Int64, ScalarType::Bool}) {
    auto tensor = make_tensor_ptr(dtype, {3, 5});
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    EXPECT_EQ((*tensor)->dtype(), dtype);
    EXPECT_EQ((*tensor)->nbytes(), 15 * runtime::element_size(dtype));
    const auto* bytes = (*tensor)->data_ptr<uint8_t>();
    for (size_t i = 0; i < (*tensor)->nbytes(); ++i) ASSERT_EQ(bytes[i], 0) << i;
  }
  auto empty = make_tensor_ptr(ScalarType::Float32, {0, 4});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->numel(), 0);
}

TEST(FromBlob, AliasesTheCallersMemory) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  auto tensor = from_blob(data.data(), {2, 3}, ScalarType::Float32);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ((*tensor)->data(), data.data());
  data[4] = 50;
  EXPECT_EQ((*tensor)->data_ptr<float>()[4], 50);
  (*tensor)->mutable_data_ptr<float>()[0] = -1;
  EXPECT_EQ(data[0], -1);
}

TEST(FromBlob, NullDataIsAnErrorUnlessEmpty) {
  auto tensor = from_blob(nullptr, {2}, ScalarType::Float32);
  EXPECT_EQ(tensor.error(), Error::InvalidArgument);
  EXPECT_THAT(tensor.status().message(), HasSubstr("data is null"));
  EXPECT_TRUE(from_blob(nullptr, {0}, ScalarType::Float32).ok());
}

TEST(CloneTensorPtr, CopiesDataAndMetadata) {
  std::vector<int16_t> data = {1, 2, 3, 4};
  auto source = from_blob(data.data(), {4, 1}, ScalarType::Int16);
  ASSERT_TRUE(source.ok());
  auto clone = clone_tensor_ptr(**source);
  ASSERT_TRUE(clone.ok()) << clone.status();
  EXPECT_NE((*clone)->data(), data.data());
  EXPECT_EQ((*clone)->dtype(), ScalarType::Int16);
  EXPECT_THAT((*clone)->sizes(), ElementsAre(4, 1));
  data[0] = 100;
  EXPECT_EQ((*clone)->data_ptr<int16_t>()[0], 1);
  EXPECT_EQ((*clone)->data_ptr<int16_t>()[3], 4);
}

}  // namespace
}  // namespace kiln::extension
