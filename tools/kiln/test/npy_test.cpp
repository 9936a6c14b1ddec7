// .npy reading and writing: round trips for every dtype, headers as NumPy writes them, and
// clear errors for bad files.

#include <tools/kiln/npy.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::tools {
namespace {

using runtime::Error;
using runtime::ScalarType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A .npy file with `header` (a dict text) as version `major`, padded like NumPy, then `data`.
std::vector<uint8_t> npy_bytes(const std::string& header, const std::vector<uint8_t>& data,
                               uint8_t major = 1) {
  std::string dict = header;
  const size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  out.push_back(static_cast<uint8_t>(dict.size() & 0xff));
  out.push_back(static_cast<uint8_t>(dict.size() >> 8));
  if (major != 1) {
    out.push_back(0);
    out.push_back(0);
  }
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> float_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

runtime::Result<NpyArray> parse(const std::vector<uint8_t>& bytes) {
  return parse_npy(bytes.data(), bytes.size(), "test.npy");
}

TEST(Npy, ParsesAHeaderAsNumpyWritesIt) {
  auto array = parse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                               float_bytes({1, 2, 3, 4, 5, 6})));
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dtype, ScalarType::Float32);
  EXPECT_THAT(array->shape, ElementsAre(2, 3));
  EXPECT_EQ(array->numel(), 6);
  EXPECT_EQ(array->data, float_bytes({1, 2, 3, 4, 5, 6}));
}

TEST(Npy, ParsesVersion2OneDimAndScalarShapes) {
  auto v2 = parse(npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
                            std::vector<uint8_t>(8, 0), 2));
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->dtype, ScalarType::Int64);
  EXPECT_THAT(v2->shape, ElementsAre(1));

  auto scalar =
      parse(npy_bytes("{\"descr\": \"|b1\", \"fortran_order\": False, \"shape\": ()}", {1}));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->dtype, ScalarType::Bool);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->numel(), 1);
}

TEST(Npy, RoundTripsEveryDtype) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_npy_round_trip_" + std::to_string(::getpid()) + ".npy"))
                               .string();
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                           ScalarType::Int8, ScalarType::UInt8, ScalarType::Int16,
                           ScalarType::Int32, ScalarType::Int64, ScalarType::Bool}) {
    const std::vector<int64_t> shape = {2, 1, 3};
    std::vector<uint8_t> data(6 * runtime::element_size(dtype));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i % 2);
    ASSERT_TRUE(write_npy(path, dtype, shape, data).ok()) << runtime::to_string(dtype);
    auto array = read_npy(path);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->dtype, dtype);
    EXPECT_EQ(array->shape, shape);
    EXPECT_EQ(array->data, data);
  }
  std::filesystem::remove(path);
}

TEST(Npy, EncodedHeaderIsAlignedAndReadable) {
  const std::vector<int64_t> shape = {4};
  auto bytes = encode_npy(ScalarType::Float32, shape, float_bytes({1, 2, 3, 4}));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((bytes->size() - 16) % 64, 0u);  // data starts on a 64-byte boundary
  std::string text(bytes->begin(), bytes->end());
  EXPECT_THAT(text, HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"));
}

TEST(Npy, EncodeChecksTheDataSize) {
  const std::vector<int64_t> shape = {2, 2};
  auto bytes = encode_npy(ScalarType::Float32, shape, float_bytes({1, 2, 3}));
  EXPECT_EQ(bytes.error(), Error::InvalidArgument);
  EXPECT_THAT(bytes.status().message(), HasSubstr("data has 12 bytes (expected 16"));
  EXPECT_EQ(npy_descr(ScalarType::BFloat16).error(), Error::NotSupported);
}

struct BadFile {
  const char* name;
  std::vector<uint8_t> bytes;
  const char* message;
};

class NpyBadFileTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(NpyBadFileTest, FailsNamingFileAndProblem) {
  auto array = parse(GetParam().bytes);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.error(), Error::InvalidArgument);
  EXPECT_THAT(array.status().message(), HasSubstr("read npy 'test.npy'"));
  EXPECT_THAT(array.status().message(), HasSubstr(GetParam().message));
}

const std::string kGood2x2 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";

std::vector<uint8_t> truncated_header() {
  auto bytes = npy_bytes(kGood2x2, {});
  bytes.resize(20);
  return bytes;
}

INSTANTIATE_TEST_SUITE_P(
    Headers, NpyBadFileTest,
    ::testing::Values(
        BadFile{"NotNumpy", {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}, "NumPy magic"},
        BadFile{"Empty", {}, "NumPy magic"},
        BadFile{"Version9",
                {0x93, 'N', 'U', 'M', 'P', 'Y', 9, 0, 0, 0},
                "format version 9.0 is not supported"},
        BadFile{"TruncatedHeader", truncated_header(), "is truncated"},
        BadFile{"NotADict", npy_bytes("['descr']", {}), "not a dict"},
        BadFile{"MissingShape", npy_bytes("{'descr': '<f4', 'fortran_order': False}", {}),
                "no 'shape' key"},
        BadFile{"UnknownKey", npy_bytes("{'descr': '<f4', 'colour': 1}", {}),
                "unknown key 'colour'"},
        BadFile{
            "BigEndian",
            npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0}),
            "big-endian"},
        BadFile{"ComplexDtype",
                npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", {}),
                "dtype '<c8' is not supported"},
        BadFile{"FortranOrder",
                npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                          std::vector<uint8_t>(16)),
                "Fortran order"},
        BadFile{"NegativeDim",
                npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", {}),
                "dimension -2"},
        BadFile{"ShortData", npy_bytes(kGood2x2, std::vector<uint8_t>(12)),
                "data has 12 bytes (expected 16 for <f4 [2, 2])"},
        BadFile{"LongData", npy_bytes(kGood2x2, std::vector<uint8_t>(20)),
                "data has 20 bytes (expected 16"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Npy, MissingFileIsAccessFailedNamingThePath) {
  auto array = read_npy("/nonexistent/dir/x.npy");
  EXPECT_EQ(array.error(), Error::AccessFailed);
  EXPECT_THAT(array.status().message(), HasSubstr("/nonexistent/dir/x.npy"));
}

}  // namespace
}  // namespace kiln::tools
