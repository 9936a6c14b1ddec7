#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/tensor.h>

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace kiln::runtime {
namespace {

TEST(Error, NamesAreStableAndGroupedByRange) {
  EXPECT_EQ(to_string(Error::InvalidArgument), "InvalidArgument");
  EXPECT_EQ(static_cast<uint32_t>(Error::InvalidArgument), 0x10u);
  EXPECT_EQ(static_cast<uint32_t>(Error::InvalidProgram), 0x22u);
  EXPECT_EQ(static_cast<uint32_t>(Error::DelegateInvalidCompatibility), 0x30u);
  EXPECT_EQ(to_string(static_cast<Error>(0x7777)), "Unknown");
}

TEST(Status, CarriesCodeMessageAndContext) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.to_string(), "Ok");
  Status bad(Error::InvalidArgument, "option 'x' has value 3 (expected 1..2)");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.to_string(), "InvalidArgument (0x10): option 'x' has value 3 (expected 1..2)");
  Status outer = bad.with_context("load method 'forward'");
  EXPECT_EQ(outer.code(), Error::InvalidArgument);
  EXPECT_EQ(outer.message(), "load method 'forward': option 'x' has value 3 (expected 1..2)");
}

Result<int> half(int x) {
  if (x % 2 != 0) return Status(Error::InvalidArgument, "odd " + std::to_string(x));
  return x / 2;
}

Result<int> quarter(int x) {
  KILN_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

TEST(Result, HoldsValueOrStatusAndPropagates) {
  ASSERT_TRUE(quarter(8).ok());
  EXPECT_EQ(*quarter(8), 2);
  auto bad = quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), Error::InvalidArgument);
  EXPECT_EQ(bad.status().message(), "odd 3");
  Result<int> from_ok_status{Status()};
  EXPECT_EQ(from_ok_status.error(), Error::Internal);
}

TEST(ScalarType, SizesNamesAndParsing) {
  std::set<std::string_view> names;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto type = static_cast<ScalarType>(i);
    EXPECT_GT(element_size(type), 0u);
    names.insert(to_string(type));
    auto parsed = parse_scalar_type(to_string(type));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, type);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumScalarTypes));
  EXPECT_EQ(element_size(ScalarType::BFloat16), 2u);
  auto bad = parse_scalar_type("f33");
  EXPECT_EQ(bad.error(), Error::InvalidArgument);
  EXPECT_NE(bad.status().message().find("'f33'"), std::string::npos);
}

TEST(ScalarType, HalfAndBfloat16RoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(half_to_float(float_to_half(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.5f)), 1.5f);
  EXPECT_NEAR(bfloat16_to_float(float_to_bfloat16(3.14159f)), 3.14159f, 0.02f);
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 4096), float_to_half(1.0f));  // ties to even
}

TEST(Tensor, StridesFollowSizesAndDimOrder) {
  float data[24] = {};
  Tensor t(ScalarType::Float32, {2, 3, 4}, data);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(std::vector<int64_t>(t.strides().begin(), t.strides().end()),
            (std::vector<int64_t>{12, 4, 1}));
  ASSERT_TRUE(t.set_dim_order({0, 2, 1}).ok());
  EXPECT_EQ(std::vector<int64_t>(t.strides().begin(), t.strides().end()),
            (std::vector<int64_t>{12, 1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.set_dim_order({0, 0, 1}).code(), Error::InvalidArgument);
}

TEST(Tensor, StaticTensorsRefuseNewShapes) {
  float data[6] = {};
  Tensor t(ScalarType::Float32, {2, 3}, data);
  EXPECT_TRUE(t.resize(std::vector<int64_t>{2, 3}).ok());
  Status s = t.resize(std::vector<int64_t>{3, 2});
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("[3, 2]"), std::string::npos);
  EXPECT_NE(s.message().find("[2, 3]"), std::string::npos);
}

TEST(Tensor, BoundedTensorsResizeWithinCapacity) {
  float data[8] = {};
  Tensor t(ScalarType::Float32, {1, 8}, data, ShapeDynamism::Bounded);
  ASSERT_TRUE(t.resize(std::vector<int64_t>{1, 5}).ok());
  EXPECT_EQ(t.numel(), 5);
  EXPECT_EQ(t.capacity_bytes(), 32u);
  Status s = t.resize(std::vector<int64_t>{1, 9});
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(s.message().find("36 bytes, 32 available"), std::string::npos);
  EXPECT_EQ(t.resize(std::vector<int64_t>{8}).code(), Error::InvalidArgument);  // rank
  EXPECT_EQ(t.resize(std::vector<int64_t>{1, -1}).code(), Error::InvalidArgument);
}

TEST(EValue, HoldsEachTag) {
  EXPECT_TRUE(EValue().is_none());
  EXPECT_TRUE(EValue(true).to_bool());
  EXPECT_EQ(EValue(int64_t{7}).to_int(), 7);
  EXPECT_EQ(EValue(3).to_int(), 3);
  EXPECT_EQ(EValue(2.5).to_double(), 2.5);
  EXPECT_EQ(EValue("abc").to_string(), "abc");
  EXPECT_EQ(EValue(std::vector<int64_t>{1, 2}).to_int_list().size(), 2u);
  EXPECT_EQ(EValue(std::vector<double>{1.5}).to_double_list()[0], 1.5);
  float x = 4;
  EValue t(Tensor(ScalarType::Float32, {1}, &x));
  ASSERT_TRUE(t.is_tensor());
  EXPECT_EQ(t.to_tensor().data_ptr<float>()[0], 4.0f);
  EXPECT_EQ(to_string(t.tag()), "tensor");
}

}  // namespace
}  // namespace kiln::runtime
