// RuntimeElementwise (Add, Sub, Mul, Div and Where of run-time shapes, for shape-generic plans)
// against the reference kernels on seeded random data: one op over many broadcasts in turn
// (rows contiguous or repeated, merged dims, ranks that differ, tails past the last 16 lanes,
// empty tensors), special values, and its errors. Results must be equal bit for bit.

#include <kiln/engine/cpu/runtime_elementwise.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/binary_ops.h>
#include <kiln/kernels/kernels.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Error;
using runtime::ScalarType;
using runtime::Span;
using runtime::Tensor;
using ::testing::HasSubstr;

std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

OwnedTensor random_mask(std::vector<int64_t> sizes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<bool> values(static_cast<size_t>(kernels::test_helpers::numel_of(sizes)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = (rng() & 1) != 0;
  return OwnedTensor::of(std::move(sizes), values);
}

OpDesc desc_of(const std::string& op) {
  OpDesc desc;
  desc.op = op;
  const size_t arity = op == "Where" ? 3 : 2;
  for (size_t i = 0; i < arity; ++i) {
    desc.inputs.push_back(
        TensorDesc{op == "Where" && i == 0 ? ScalarType::Bool : ScalarType::Float32, {}});
  }
  return desc;
}

// The reference kernel's result, sized as the broadcast.
OwnedTensor reference(const std::string& op, const std::vector<const Tensor*>& in,
                      const std::vector<int64_t>& shape) {
  OwnedTensor out = zeros(shape);
  runtime::Status status;
  if (op == "Add") status = kernels::add(*in[0], *in[1], out.tensor());
  if (op == "Sub") status = kernels::sub(*in[0], *in[1], out.tensor());
  if (op == "Mul") status = kernels::mul(*in[0], *in[1], out.tensor());
  if (op == "Div") status = kernels::div(*in[0], *in[1], out.tensor());
  if (op == "Where") status = kernels::where(*in[0], *in[1], *in[2], out.tensor());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Runs `op` on `in` (sizing the output as it says) and checks it equals the reference.
void expect_same_as_reference(RuntimeElementwise& op, const std::string& name,
                              const std::vector<const Tensor*>& in) {
  auto sizes = op.output_sizes(Span<const Tensor* const>(in.data(), in.size()));
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  std::vector<int64_t> shape(sizes->begin(), sizes->end());
  OwnedTensor out = zeros(shape);
  runtime::Status status = op.run(Span<const Tensor* const>(in.data(), in.size()), out.tensor());
  ASSERT_TRUE(status.ok()) << status;
  OwnedTensor expected = reference(name, in, shape);
  ASSERT_EQ(sizes_of(out.tensor()), sizes_of(expected.tensor()));
  std::vector<float> a = out.values<float>(), e = expected.values<float>();
  int failures = 0;
  for (size_t i = 0; i < a.size() && failures < 5; ++i) {
    if (std::memcmp(&a[i], &e[i], sizeof(float)) != 0) {
      ADD_FAILURE() << name << " element " << i << ": " << a[i] << " (expected " << e[i] << ")";
      ++failures;
    }
  }
}

struct Pair {
  std::vector<int64_t> a, b;
};

// Every kind of broadcast: equal shapes (merged to one row), a scalar either side, a bias row,
// a column, a middle dim, ranks that differ, both sides broadcast, tails under and past 16
// lanes, an empty dim.
const std::vector<Pair> kPairs = {
    {{4, 33}, {4, 33}},
    {{1}, {3, 17}},
    {{5, 40}, {}},
    {{2, 3, 48}, {48}},
    {{7, 1}, {7, 19}},
    {{2, 3, 4}, {2, 1, 4}},
    {{1, 4, 16, 16}, {1, 1, 16, 16}},
    {{3, 1, 5}, {1, 6, 1}},
    {{15}, {15}},
    {{2, 0, 3}, {3}},
    {{1, 1}, {1, 1}},
    {{6, 1, 1, 34}, {6, 2, 3, 34}},
};

TEST(RuntimeElementwise, BinaryOpsEqualTheReferenceOverEveryBroadcast) {
  uint32_t seed = 1;
  for (const std::string name : {"Add", "Sub", "Mul", "Div"}) {
    // One op for every call, of any shape and rank, in turn (as a shape-generic plan runs it).
    auto op = RuntimeElementwise::create(desc_of(name));
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe(), "kiln " + name + " (own loops, run-time shapes)");
    for (const Pair& p : kPairs) {
      for (bool swapped : {false, true}) {
        SCOPED_TRACE(name + " " + runtime::shape_to_string(p.a) + " with " +
                     runtime::shape_to_string(p.b) + (swapped ? " swapped" : ""));
        OwnedTensor a = random_tensor(swapped ? p.b : p.a, seed++, 0.5, 2.0);
        OwnedTensor b = random_tensor(swapped ? p.a : p.b, seed++, 0.5, 2.0);
        expect_same_as_reference(**op, name, {&a.tensor(), &b.tensor()});
      }
    }
  }
}

TEST(RuntimeElementwise, WhereEqualsTheReferenceOverEveryBroadcast) {
  struct Triple {
    std::vector<int64_t> c, x, y;
  };
  // A causal mask over attention scores (the case this is for), a constant fill, each input
  // repeated or contiguous in turn, ranks that differ, an empty result.
  const std::vector<Triple> triples = {
      {{1, 1, 16, 16}, {}, {1, 4, 16, 16}},
      {{1, 1, 9, 9}, {1, 3, 9, 9}, {1}},
      {{5, 37}, {5, 37}, {5, 37}},
      {{37}, {5, 37}, {5, 1}},
      {{5, 1}, {1, 37}, {}},
      {{2, 3, 1}, {3, 18}, {2, 1, 18}},
      {{0, 4}, {4}, {}},
      {{}, {3}, {3}},
  };
  auto op = RuntimeElementwise::create(desc_of("Where"));
  ASSERT_TRUE(op.ok()) << op.status();
  uint32_t seed = 100;
  for (const Triple& t : triples) {
    SCOPED_TRACE(runtime::shape_to_string(t.c) + " ? " + runtime::shape_to_string(t.x) + " : " +
                 runtime::shape_to_string(t.y));
    OwnedTensor c = random_mask(t.c, seed++);
    OwnedTensor x = random_tensor(t.x, seed++);
    OwnedTensor y = random_tensor(t.y, seed++);
    expect_same_as_reference(**op, "Where", {&c.tensor(), &x.tensor(), &y.tensor()});
  }
}

TEST(RuntimeElementwise, SpecialValuesFollowIeeeAsTheReferenceDoes) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 18 elements: a vector of 16 and a tail of 2 both see each value.
  std::vector<float> av = {1.0f, -1.0f, 0.0f, -0.0f, inf, -inf, nan, 3.0f, 1e-38f,
                           1.0f, -1.0f, 0.0f, -0.0f, inf, -inf, nan, 3.0f, 1e-38f};
  std::vector<float> bv = {0.0f,  0.0f,  0.0f, -0.0f, inf,  inf, 1.0f, nan, 1e38f,
                           -0.0f, -0.0f, 0.0f, 0.0f,  -inf, inf, 2.0f, nan, 1e-38f};
  OwnedTensor a = OwnedTensor::of({18}, av);
  OwnedTensor b = OwnedTensor::of({18}, bv);
  for (const std::string name : {"Add", "Sub", "Mul", "Div"}) {
    SCOPED_TRACE(name);
    auto op = RuntimeElementwise::create(desc_of(name));
    ASSERT_TRUE(op.ok()) << op.status();
    expect_same_as_reference(**op, name, {&a.tensor(), &b.tensor()});
  }
}

TEST(RuntimeElementwise, ShapesThatDoNotBroadcastAreNamed) {
  auto op = RuntimeElementwise::create(desc_of("Add"));
  ASSERT_TRUE(op.ok()) << op.status();
  OwnedTensor a = random_tensor({2, 3}, 1), b = random_tensor({2, 4}, 2);
  std::vector<const Tensor*> in = {&a.tensor(), &b.tensor()};
  auto sizes = (*op)->output_sizes(Span<const Tensor* const>(in.data(), in.size()));
  ASSERT_FALSE(sizes.ok());
  EXPECT_EQ(sizes.status().code(), Error::InvalidArgument);
  EXPECT_THAT(sizes.status().message(), HasSubstr("run op 'Add' (kiln, run-time shapes)"));
  EXPECT_THAT(sizes.status().message(), HasSubstr("[2, 3]"));
  EXPECT_THAT(sizes.status().message(), HasSubstr("[2, 4]"));

  // Where: the third input is the one that does not fit.
  auto where = RuntimeElementwise::create(desc_of("Where"));
  ASSERT_TRUE(where.ok()) << where.status();
  OwnedTensor c = random_mask({2, 3}, 3), x = random_tensor({3}, 4), y = random_tensor({5, 1}, 5);
  std::vector<const Tensor*> w = {&c.tensor(), &x.tensor(), &y.tensor()};
  auto where_sizes = (*where)->output_sizes(Span<const Tensor* const>(w.data(), w.size()));
  ASSERT_FALSE(where_sizes.ok());
  EXPECT_THAT(where_sizes.status().message(), HasSubstr("[5, 1]"));
}

TEST(RuntimeElementwise, AWrongOutputMissingInputOrTypeIsAnError) {
  auto op = RuntimeElementwise::create(desc_of("Mul"));
  ASSERT_TRUE(op.ok()) << op.status();
  OwnedTensor a = random_tensor({2, 3}, 1), b = random_tensor({3}, 2);
  std::vector<const Tensor*> in = {&a.tensor(), &b.tensor()};
  Span<const Tensor* const> span(in.data(), in.size());
  OwnedTensor wrong = zeros({3, 2});
  runtime::Status status = (*op)->run(span, wrong.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("output has shape [3, 2] (expected [2, 3], f32)"));

  std::vector<const Tensor*> missing = {&a.tensor(), nullptr};
  OwnedTensor out = zeros({2, 3});
  status = (*op)->run(Span<const Tensor* const>(missing.data(), missing.size()), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("expected 2 inputs"));

  OwnedTensor ints = OwnedTensor::of({3}, std::vector<int64_t>{1, 2, 3});
  std::vector<const Tensor*> typed = {&a.tensor(), &ints.tensor()};
  status = (*op)->run(Span<const Tensor* const>(typed.data(), typed.size()), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 1 is i64 (expected f32)"));
}

TEST(RuntimeElementwise, CreateRefusesWhatItDoesNotHandle) {
  EXPECT_TRUE(RuntimeElementwise::handles("Where"));
  EXPECT_FALSE(RuntimeElementwise::handles("Pow"));
  EXPECT_EQ(RuntimeElementwise::create(desc_of("Pow")).status().code(), Error::NotSupported);

  OpDesc ints = desc_of("Add");
  ints.inputs[1].dtype = ScalarType::Int64;
  auto status = RuntimeElementwise::create(ints).status();
  EXPECT_EQ(status.code(), Error::NotSupported);
  EXPECT_THAT(status.message(), HasSubstr("not both f32"));

  OpDesc float_condition = desc_of("Where");
  float_condition.inputs[0].dtype = ScalarType::Float32;
  EXPECT_THAT(RuntimeElementwise::create(float_condition).status().message(),
              HasSubstr("not a bool condition"));

  OpDesc one_input = desc_of("Add");
  one_input.inputs.pop_back();
  EXPECT_THAT(RuntimeElementwise::create(one_input).status().message(),
              HasSubstr("expected 2 inputs"));

  OpDesc fused = desc_of("Add");
  fused.post_ops.push_back(PostOp{PostOpKind::Relu});
  EXPECT_EQ(RuntimeElementwise::create(fused).status().code(), Error::NotSupported);
}

}  // namespace
}  // namespace kiln::engine::cpu
