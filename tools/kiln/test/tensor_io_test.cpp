// Tool tensor helpers: .npy ↔ tensor, seeded random inputs, printing.

#include <tools/kiln/tensor_io.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace kiln::tools {
namespace {

using runtime::ScalarType;
using runtime::TensorMeta;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TensorIo, NpyRoundTripsThroughATensor) {
  NpyArray array{ScalarType::Int32, {2, 2}, {}};
  const int32_t values[] = {1, -2, 3, -4};
  array.data.resize(sizeof(values));
  std::memcpy(array.data.data(), values, sizeof(values));
  auto tensor = tensor_from_npy(array);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ((*tensor)->dtype(), ScalarType::Int32);
  EXPECT_THAT((*tensor)->sizes(), ElementsAre(2, 2));
  EXPECT_EQ((*tensor)->data_ptr<int32_t>()[3], -4);
  auto back = npy_from_tensor(**tensor);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data, array.data);
  EXPECT_EQ(back->shape, array.shape);
}

TEST(TensorIo, RandomInputsAreSeededAndInRange) {
  TensorMeta meta;
  meta.name = "x";
  meta.dtype = ScalarType::Float32;
  meta.sizes = {2, 0, 3};  // 0: unknown, becomes 1
  std::mt19937_64 a(7), b(7);
  auto first = random_tensor(meta, a);
  auto second = random_tensor(meta, b);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_THAT((*first)->sizes(), ElementsAre(2, 1, 3));
  EXPECT_EQ(std::memcmp((*first)->data(), (*second)->data(), (*first)->nbytes()), 0);
  for (int64_t i = 0; i < (*first)->numel(); ++i) {
    const float v = (*first)->data_ptr<float>()[i];
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  meta.tag = runtime::Tag::Int;
  EXPECT_EQ(random_tensor(meta, a).error(), runtime::Error::NotSupported);
}

TEST(TensorIo, FormatsLeadingValues) {
  std::vector<float> data = {0.5f, -1.0f, 2.0f, 3.25f};
  auto tensor = extension::from_blob(data.data(), {1, 4}, ScalarType::Float32);
  ASSERT_TRUE(tensor.ok());
  EXPECT_EQ(format_values(**tensor, 8), "[0.5, -1, 2, 3.25]");
  EXPECT_EQ(format_values(**tensor, 2), "[0.5, -1, ... (2 more)]");
  EXPECT_EQ(format_evalue(runtime::EValue(**tensor), 1), "f32 [1, 4] = [0.5, ... (3 more)]");
  EXPECT_EQ(format_evalue(runtime::EValue(int64_t{3}), 1), "int 3");
}

}  // namespace
}  // namespace kiln::tools
