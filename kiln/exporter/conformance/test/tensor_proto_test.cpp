#include <kiln/exporter/conformance/tensor_proto.h>
#include <kiln/exporter/conformance/test/temp_dir.h>

#include <gtest/gtest.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <vector>

namespace kiln::exporter {
namespace {

using runtime::Error;
using runtime::ScalarType;
using testing::TempDir;

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

onnx::TensorProto make_proto(int data_type, std::vector<int64_t> dims) {
  onnx::TensorProto proto;
  proto.set_name("x");
  proto.set_data_type(data_type);
  for (int64_t d : dims) proto.add_dims(d);
  return proto;
}

TensorData read_back(const TempDir& dir, const onnx::TensorProto& proto) {
  auto tensor = read_tensor_proto_file(dir.write("input_0.pb", proto.SerializeAsString()));
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return tensor.ok() ? std::move(tensor).get() : TensorData{};
}

TEST(TensorProtoTest, ReadsFloatData) {
  TempDir dir;
  auto proto = make_proto(onnx::TensorProto::FLOAT, {2, 2});
  for (float v : {1.5f, -2.f, 0.f, 3.25f}) proto.add_float_data(v);
  TensorData t = read_back(dir, proto);
  EXPECT_EQ(t.name, "x");
  EXPECT_EQ(t.dtype, ScalarType::Float32);
  EXPECT_EQ(t.sizes, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.data, bytes_of(std::vector<float>{1.5f, -2.f, 0.f, 3.25f}));
}

TEST(TensorProtoTest, ReadsRawData) {
  TempDir dir;
  auto proto = make_proto(onnx::TensorProto::INT64, {3});
  auto raw = bytes_of(std::vector<int64_t>{7, -8, 1LL << 40});
  proto.set_raw_data(std::string(raw.begin(), raw.end()));
  TensorData t = read_back(dir, proto);
  EXPECT_EQ(t.dtype, ScalarType::Int64);
  EXPECT_EQ(t.data, raw);
}

TEST(TensorProtoTest, ReadsInt64DoubleAndInt32Fields) {
  TempDir dir;
  auto i64 = make_proto(onnx::TensorProto::INT64, {2});
  i64.add_int64_data(-5);
  i64.add_int64_data(6);
  EXPECT_EQ(read_back(dir, i64).data, bytes_of(std::vector<int64_t>{-5, 6}));

  auto f64 = make_proto(onnx::TensorProto::DOUBLE, {1});
  f64.add_double_data(0.125);
  EXPECT_EQ(read_back(dir, f64).dtype, ScalarType::Float64);
  EXPECT_EQ(read_back(dir, f64).data, bytes_of(std::vector<double>{0.125}));

  auto i32 = make_proto(onnx::TensorProto::INT32, {2});
  i32.add_int32_data(-1);
  i32.add_int32_data(1 << 20);
  EXPECT_EQ(read_back(dir, i32).data, bytes_of(std::vector<int32_t>{-1, 1 << 20}));
}

// int8, uint8, int16, bool, float16 and bfloat16 are stored one value per int32_data entry.
TEST(TensorProtoTest, ReadsNarrowTypesPackedInInt32Data) {
  TempDir dir;
  struct Case {
    int onnx_type;
    ScalarType dtype;
    std::vector<int32_t> values;
    std::vector<uint8_t> expected;
  };
  const std::vector<Case> cases = {
      {onnx::TensorProto::INT8, ScalarType::Int8, {-3, 4}, bytes_of(std::vector<int8_t>{-3, 4})},
      {onnx::TensorProto::UINT8, ScalarType::UInt8, {255, 0}, {255, 0}},
      {onnx::TensorProto::INT16,
       ScalarType::Int16,
       {-300, 7},
       bytes_of(std::vector<int16_t>{-300, 7})},
      {onnx::TensorProto::BOOL, ScalarType::Bool, {1, 0}, {1, 0}},
      {onnx::TensorProto::FLOAT16,
       ScalarType::Float16,
       {0x3c00, 0xc000},
       bytes_of(std::vector<uint16_t>{0x3c00, 0xc000})},
      {onnx::TensorProto::BFLOAT16,
       ScalarType::BFloat16,
       {0x3f80, 0x7fc0},
       bytes_of(std::vector<uint16_t>{0x3f80, 0x7fc0})},
  };
  for (const Case& c : cases) {
    auto proto = make_proto(c.onnx_type, {2});
    for (int32_t v : c.values) proto.add_int32_data(v);
    TensorData t = read_back(dir, proto);
    EXPECT_EQ(t.dtype, c.dtype) << c.onnx_type;
    EXPECT_EQ(t.data, c.expected) << c.onnx_type;
  }
}

TEST(TensorProtoTest, ReadsScalarsAndEmptyTensors) {
  TempDir dir;
  auto scalar = make_proto(onnx::TensorProto::FLOAT, {});
  scalar.add_float_data(2.5f);
  TensorData s = read_back(dir, scalar);
  EXPECT_TRUE(s.sizes.empty());
  EXPECT_EQ(s.data.size(), 4u);

  auto empty = make_proto(onnx::TensorProto::FLOAT, {0, 3});
  TensorData e = read_back(dir, empty);
  EXPECT_EQ(e.sizes, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(e.data.empty());
}

TEST(TensorProtoTest, UnsupportedTypesNameTheType) {
  TempDir dir;
  for (auto [type, name] : {std::pair{onnx::TensorProto::STRING, "STRING"},
                            std::pair{onnx::TensorProto::COMPLEX64, "COMPLEX64"},
                            std::pair{onnx::TensorProto::UINT16, "UINT16"},
                            std::pair{onnx::TensorProto::UINT32, "UINT32"},
                            std::pair{onnx::TensorProto::UINT64, "UINT64"}}) {
    auto proto = make_proto(type, {1});
    if (type == onnx::TensorProto::STRING) proto.add_string_data("a");
    auto t = read_tensor_proto_file(dir.write("input_0.pb", proto.SerializeAsString()));
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.error(), Error::NotSupported);
    EXPECT_NE(t.status().message().find(name), std::string::npos) << t.status();
  }
}

// ONNX's generators write bfloat16 data as UINT16 tensors; the runner asks for bf16.
TEST(TensorProtoTest, ReadsUint16AsBfloat16WhenAsked) {
  TempDir dir;
  auto proto = make_proto(onnx::TensorProto::UINT16, {2});
  proto.add_int32_data(0x3f80);
  proto.add_int32_data(0xc000);
  auto t = read_tensor_proto_file(dir.write("input_0.pb", proto.SerializeAsString()), true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, ScalarType::BFloat16);
  EXPECT_EQ(t->data, bytes_of(std::vector<uint16_t>{0x3f80, 0xc000}));
}

TEST(TensorProtoTest, DataSizeMismatchIsAnError) {
  TempDir dir;
  auto proto = make_proto(onnx::TensorProto::FLOAT, {2, 3});
  proto.add_float_data(1.f);
  auto t = read_tensor_proto_file(dir.write("output_0.pb", proto.SerializeAsString()));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), Error::InvalidArgument);
  EXPECT_NE(t.status().message().find("output_0.pb"), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("holds 4 bytes"), std::string::npos) << t.status();
}

TEST(TensorProtoTest, CorruptFileIsAnErrorNamingTheFile) {
  TempDir dir;
  auto t = read_tensor_proto_file(dir.write("input_0.pb", std::string("\xff\xff\xff\xff", 4)));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), Error::InvalidArgument);
  EXPECT_NE(t.status().message().find("input_0.pb"), std::string::npos) << t.status();
}

TEST(TensorProtoTest, MissingFileIsAccessFailed) {
  TempDir dir;
  auto t = read_tensor_proto_file((dir.path() / "nope.pb").string());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), Error::AccessFailed);
  EXPECT_NE(t.status().message().find("nope.pb"), std::string::npos);
}

TEST(TensorProtoTest, SequenceFileIsRecognized) {
  TempDir dir;
  onnx::SequenceProto sequence;
  sequence.set_name("seq");
  sequence.set_elem_type(onnx::SequenceProto::TENSOR);
  for (int i = 0; i < 2; ++i) {
    auto* t = sequence.add_tensor_values();
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(1);
    t->add_float_data(1.f);
  }
  auto t = read_tensor_proto_file(dir.write("input_0.pb", sequence.SerializeAsString()));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("SequenceProto"), std::string::npos) << t.status();
}

// An optional holding a sequence parses as a TensorProto with absurd dims (its name read as
// packed varints); the reader still names what the file holds.
TEST(TensorProtoTest, OptionalFileIsRecognized) {
  TempDir dir;
  onnx::OptionalProto optional;
  optional.set_name("optional_input");
  optional.set_elem_type(onnx::OptionalProto::SEQUENCE);
  auto* sequence = optional.mutable_sequence_value();
  sequence->set_elem_type(onnx::SequenceProto::TENSOR);
  auto* t = sequence->add_tensor_values();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1);
  t->add_float_data(1.f);
  auto read = read_tensor_proto_file(dir.write("input_0.pb", optional.SerializeAsString()));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("OptionalProto"), std::string::npos) << read.status();
}

TEST(TensorProtoTest, ViewAliasesTheData) {
  TensorData data{"x", ScalarType::Int32, {2}, bytes_of(std::vector<int32_t>{4, 5})};
  runtime::Tensor view = data.view();
  EXPECT_EQ(view.numel(), 2);
  EXPECT_EQ(view.data_ptr<int32_t>()[1], 5);
  EXPECT_EQ(view.data(), data.data.data());
}

}  // namespace
}  // namespace kiln::exporter
