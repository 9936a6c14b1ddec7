// Transpose on kiln's own loops against the reference kernel: every permutation of ranks 1-5
// over shapes with and without whole 16 x 16 tiles, sizes of 1 among them, elements of 1, 2, 4
// and 8 bytes, 1 and 2 threads over more than a megabyte; and the shape-generic op
// (RuntimeElementwise) over sequence lengths in turn.
#include <kiln/engine/cpu/runtime_elementwise.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/shape_ops.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT: the case helpers
using kernels::test_helpers::OwnedTensor;
using runtime::Error;
using runtime::ScalarType;

// Distinct bytes everywhere, so that any element out of place shows.
OwnedTensor patterned(ScalarType dtype, const std::vector<int64_t>& sizes, uint32_t seed) {
  OwnedTensor t = OwnedTensor::zeros(dtype, sizes);
  auto* bytes = static_cast<uint8_t*>(t.tensor().mutable_data());
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < t.tensor().nbytes(); ++i) {
    state = state * 1664525u + 1013904223u;
    bytes[i] = static_cast<uint8_t>(state >> 24);
  }
  return t;
}

// Creates the op for `x` and `perm`, runs it twice and compares its bytes with the reference's.
void expect_reference(const OwnedTensor& x, const std::vector<int64_t>& perm, int threads,
                      const std::string& expect_in_describe = "") {
  std::vector<int64_t> sizes(x.tensor().sizes().begin(), x.tensor().sizes().end());
  SCOPED_TRACE(runtime::shape_to_string(sizes) + " perm " + runtime::shape_to_string(perm) + " " +
               std::string(runtime::to_string(x.tensor().dtype())) + " threads " +
               std::to_string(threads));
  OpDesc desc;
  desc.op = "Transpose";
  desc.attributes = {ints("perm", perm)};
  desc.inputs = {TensorDesc{x.tensor().dtype(), sizes}};
  desc.num_threads = threads;
  auto op = CpuOp::create(desc);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->provider(), "kiln");
  auto shape = kernels::transpose_shape(sizes, perm);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ((*op)->outputs()[0].sizes, *shape);
  if (!expect_in_describe.empty()) {
    EXPECT_NE((*op)->describe().find(expect_in_describe), std::string::npos) << (*op)->describe();
  }
  OwnedTensor expected = OwnedTensor::zeros(x.tensor().dtype(), *shape);
  ASSERT_TRUE(kernels::transpose(x.tensor(), perm, expected.tensor()).ok());
  OwnedTensor actual = patterned(x.tensor().dtype(), *shape, 99);  // spoiled: every byte written
  const runtime::Tensor* in = &x.tensor();
  runtime::Tensor* out = &actual.tensor();
  for (int run = 0; run < 2; ++run) {
    runtime::Status status = (*op)->run(runtime::Span<const runtime::Tensor*>(&in, 1),
                                        runtime::Span<runtime::Tensor*>(&out, 1));
    ASSERT_TRUE(status.ok()) << status;
  }
  ASSERT_EQ(std::memcmp(actual.tensor().data(), expected.tensor().data(), expected.tensor().nbytes()),
            0);
}

TEST(TransposeOp, MatchesTheReferenceForEveryPermutation) {
  const std::vector<std::vector<int64_t>> shapes = {
      {37},           {16, 16},        {35, 47},          {1, 129, 4, 32}, {1, 4, 129, 32},
      {2, 1, 18, 17}, {3, 16, 1, 33},  {2, 3, 4, 5, 6},   {4, 32, 16},     {1, 1, 1},
      {5, 0, 3},      {2, 17, 1, 31},
  };
  uint32_t seed = 8300;
  for (const auto& sizes : shapes) {
    std::vector<int64_t> perm(sizes.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      for (ScalarType dtype : {ScalarType::Float32, ScalarType::Int64}) {
        expect_reference(patterned(dtype, sizes, seed++), perm, 1);
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(TransposeOp, ElementsOfOneAndTwoBytesAndTheDefaultPermutation) {
  for (ScalarType dtype : {ScalarType::Bool, ScalarType::UInt8, ScalarType::Float16}) {
    expect_reference(patterned(dtype, {3, 19, 40}, 1), {0, 2, 1}, 1, "tiles");
    expect_reference(patterned(dtype, {3, 19, 40}, 2), {1, 0, 2}, 1, "rows");
  }
  // No perm: the dimensions reversed.
  OwnedTensor x = patterned(ScalarType::Float32, {2, 3, 20}, 3);
  OpDesc desc;
  desc.op = "Transpose";
  desc.inputs = {TensorDesc{ScalarType::Float32, {2, 3, 20}}};
  auto op = CpuOp::create(desc);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->outputs()[0].sizes, (std::vector<int64_t>{20, 3, 2}));
  expect_reference(x, {2, 1, 0}, 1);
}

TEST(TransposeOp, LargeInputsSplitOverThreads) {
  // Over a megabyte: 2 threads over rows or tiles, and still whole tiles and edges.
  expect_reference(patterned(ScalarType::Float32, {8, 129, 300}, 4), {0, 2, 1}, 2,
                   cpu_has_avx512() ? "AVX-512" : "tiles");
  expect_reference(patterned(ScalarType::Float32, {1, 513, 8, 64}, 5), {0, 2, 1, 3}, 2, "rows");
  expect_reference(patterned(ScalarType::Float32, {700, 401}, 6), {1, 0}, 2);
  expect_reference(patterned(ScalarType::Int64, {3, 200, 300}, 7), {2, 0, 1}, 2);
}

TEST(TransposeOp, RunTimeShapesPlanEachCall) {
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{0, 1, 3, 2}, std::vector<int64_t>{0, 2, 1, 3}}) {
    OpDesc desc;
    desc.op = "Transpose";
    desc.attributes = {ints("perm", perm)};
    desc.inputs = {TensorDesc{ScalarType::Float32, {}}};
    desc.num_threads = 2;
    auto op = RuntimeElementwise::create(desc);
    ASSERT_TRUE(op.ok()) << op.status();
    uint32_t seed = 400;
    for (int64_t length : {96, 17, 128, 1, 0, 129, 600}) {
      // [1, 4, length, 32] and, past a megabyte, threads.
      const int64_t heads = length == 600 ? 16 : 4;
      OwnedTensor x = patterned(ScalarType::Float32, {1, heads, length, 32}, seed++);
      SCOPED_TRACE("perm " + runtime::shape_to_string(perm) + " length " + std::to_string(length));
      const runtime::Tensor* in = &x.tensor();
      auto sizes = (*op)->output_sizes(runtime::Span<const runtime::Tensor* const>(&in, 1));
      ASSERT_TRUE(sizes.ok()) << sizes.status();
      std::vector<int64_t> shape(sizes->begin(), sizes->end());
      OwnedTensor expected = zeros(shape), actual = zeros(shape);
      ASSERT_TRUE(kernels::transpose(x.tensor(), perm, expected.tensor()).ok());
      ASSERT_TRUE((*op)->run(runtime::Span<const runtime::Tensor* const>(&in, 1),
                             actual.tensor()).ok());
      ASSERT_EQ(std::memcmp(actual.tensor().data(), expected.tensor().data(),
                            expected.tensor().nbytes()),
                0);
    }
    // A rank the perm does not fit, and an output of other sizes, are named.
    OwnedTensor flat = patterned(ScalarType::Float32, {4, 5}, 1);
    const runtime::Tensor* in = &flat.tensor();
    OwnedTensor out = zeros({5, 4});
    runtime::Status status =
        (*op)->run(runtime::Span<const runtime::Tensor* const>(&in, 1), out.tensor());
    EXPECT_EQ(status.code(), Error::InvalidArgument);
    EXPECT_NE(status.message().find("expected the input's rank, 2"), std::string::npos) << status;
    OwnedTensor four = patterned(ScalarType::Float32, {1, 2, 3, 4}, 2);
    in = &four.tensor();
    status = (*op)->run(runtime::Span<const runtime::Tensor* const>(&in, 1), out.tensor());
    EXPECT_EQ(status.code(), Error::InvalidArgument);
    EXPECT_NE(status.message().find("output has shape [5, 4]"), std::string::npos) << status;
  }
}

TEST(TransposeOp, NamesABadPermutationAndDeclinesConstantInputs) {
  OpDesc desc;
  desc.op = "Transpose";
  desc.attributes = {ints("perm", {0, 0, 1})};
  desc.inputs = {TensorDesc{ScalarType::Float32, {2, 3, 4}}};
  auto bad = CpuOp::create(desc);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), Error::InvalidArgument);
  EXPECT_NE(bad.status().message().find("perm [0, 0, 1] is not a permutation of 0..2"),
            std::string::npos)
      << bad.status();
  desc.attributes = {ints("perm", {1, 0})};
  auto short_perm = CpuOp::create(desc);
  ASSERT_FALSE(short_perm.ok());
  EXPECT_NE(short_perm.status().message().find("has 2 entries (expected the input's rank, 3)"),
            std::string::npos)
      << short_perm.status();
  OwnedTensor w = patterned(ScalarType::Float32, {2, 3}, 8);
  desc.attributes = {ints("perm", {1, 0})};
  desc.inputs = {TensorDesc{ScalarType::Float32, {2, 3}}};
  desc.constants = {&w.tensor()};
  auto constant = CpuOp::create(desc);
  ASSERT_FALSE(constant.ok());
  EXPECT_EQ(constant.error(), Error::NotSupported);
}

}  // namespace
}  // namespace kiln::engine::cpu
