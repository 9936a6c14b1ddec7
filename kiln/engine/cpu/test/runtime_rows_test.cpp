// RuntimeRows (Softmax, LogSoftmax, LayerNormalization, RMSNormalization, InstanceNormalization
// and GroupNormalization of run-time shapes, for shape-generic plans) against the reference kernels
// on seeded random data: one op over many shapes and thread counts, rows of whole vectors and
// remainders, special values, the calls it leaves to the reference kernel, and its errors.

#include <kiln/engine/cpu/runtime_rows.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Error;
using runtime::Tensor;
using ::testing::HasSubstr;

// The reference kernel's result for `op` (with `axis`) of `x`.
OwnedTensor reference(const std::string& op, const Tensor& x, int64_t axis,
                      const Tensor* scale = nullptr, const Tensor* bias = nullptr,
                      double epsilon = 1e-5) {
  OwnedTensor out = zeros(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()));
  runtime::Status status;
  if (op == "LayerNormalization") {
    kernels::LayerNormOptions options;
    options.axis = axis;
    options.epsilon = epsilon;
    status = kernels::layer_norm(x, *scale, bias, options, out.tensor(), nullptr, nullptr);
  } else if (op == "Softmax") {
    status = kernels::softmax(x, axis, out.tensor());
  } else {
    status = kernels::log_softmax(x, axis, out.tensor());
  }
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

OwnedTensor run(RuntimeRows& op, const Tensor& x) {
  OwnedTensor out = zeros(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()));
  runtime::Status status = op.run(x, out.tensor());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// An op description: input 0 of `rank` (0: known at run time only), then the constants.
OpDesc desc_of(const std::string& op, int64_t rank, std::vector<ir::Attribute> attributes,
               int threads, std::vector<const Tensor*> constants = {}) {
  OpDesc desc;
  desc.op = op;
  desc.attributes = std::move(attributes);
  desc.num_threads = threads;
  desc.inputs.push_back(
      TensorDesc{runtime::ScalarType::Float32, std::vector<int64_t>(static_cast<size_t>(rank), 1)});
  desc.constants.push_back(nullptr);
  for (const Tensor* c : constants) {
    desc.inputs.push_back(
        TensorDesc{c->dtype(), std::vector<int64_t>(c->sizes().begin(), c->sizes().end())});
    desc.constants.push_back(c);
  }
  return desc;
}

TEST(RuntimeRows, SoftmaxAndLogSoftmaxMatchTheReferenceOverShapesAndThreads) {
  // Rows of 1, 15, 16, 17, 40 and 768 floats (remainders, whole vectors, both); enough rows
  // in some shapes to split over threads.
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 1}, {3, 15}, {2, 4, 16}, {5, 17}, {1, 64, 40}, {300, 40}, {2, 768}, {0, 8}, {40}};
  uint32_t seed = 1;
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    for (int threads : {1, 2}) {
      // The rank known at creation, or only at run time (one op for every rank).
      auto any_rank = RuntimeRows::create(desc_of(op, 0, {int_attr("axis", -1)}, threads));
      ASSERT_TRUE(any_rank.ok()) << any_rank.status();
      EXPECT_THAT((*any_rank)->describe(), HasSubstr("kiln rows (run-time shapes)"));
      for (const auto& shape : shapes) {
        SCOPED_TRACE(op + " " + runtime::shape_to_string(shape) + ", " + std::to_string(threads) +
                     " thread(s)");
        // Logits up to +-30: exponentials over many orders of magnitude.
        OwnedTensor x = random_tensor(shape, seed++, -30.0, 30.0);
        OwnedTensor expected = reference(op, x.tensor(), -1);
        expect_near(run(**any_rank, x.tensor()), expected);
        auto ranked = RuntimeRows::create(
            desc_of(op, static_cast<int64_t>(shape.size()), {int_attr("axis", -1)}, threads));
        ASSERT_TRUE(ranked.ok()) << ranked.status();
        expect_near(run(**ranked, x.tensor()), expected);
      }
    }
  }
}

TEST(RuntimeRows, LayerNormMatchesTheReferenceOverShapesAxesAndThreads) {
  struct Shape {
    std::vector<int64_t> x;
    int64_t axis;
    std::vector<int64_t> scale;  // the normalized dims, leading 1s aside
  };
  const std::vector<Shape> shapes = {{{4, 24}, -1, {24}},       {{2, 3, 7}, -1, {7}},
                                     {{2, 3, 8}, 1, {3, 8}},    {{300, 40}, 1, {40}},
                                     {{2, 128, 768}, 2, {768}}, {{6, 1, 33}, -2, {33}},
                                     {{6, 1, 33}, -2, {1, 33}}, {{0, 16}, -1, {16}}};
  uint32_t seed = 100;
  for (int threads : {1, 2}) {
    for (const Shape& s : shapes) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(runtime::shape_to_string(s.x) + " axis " + std::to_string(s.axis) +
                     (with_bias ? " with B, " : ", ") + std::to_string(threads) + " thread(s)");
        // Rows far from zero mean: the variance must not lose them to cancellation.
        OwnedTensor x = random_tensor(s.x, seed++, 2.0, 5.0);
        OwnedTensor scale = random_tensor(s.scale, seed++, -2.0, 2.0);
        OwnedTensor bias = random_tensor(s.scale, seed++);
        std::vector<const Tensor*> constants = {&scale.tensor()};
        if (with_bias) constants.push_back(&bias.tensor());
        auto op = RuntimeRows::create(
            desc_of("LayerNormalization", 0,
                    {int_attr("axis", s.axis), float_attr("epsilon", 1e-3)}, threads, constants));
        ASSERT_TRUE(op.ok()) << op.status();
        expect_near(run(**op, x.tensor()),
                    reference("LayerNormalization", x.tensor(), s.axis, &scale.tensor(),
                              with_bias ? &bias.tensor() : nullptr, 1e-3));
      }
    }
  }
}

OwnedTensor reference_rms(const Tensor& x, int64_t axis, const Tensor& scale, double epsilon) {
  OwnedTensor out = zeros(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()));
  kernels::RmsNormOptions options;
  options.axis = axis;
  options.epsilon = epsilon;
  runtime::Status status = kernels::rms_norm(x, scale, options, out.tensor());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// On the rows of run-time shapes (generic plans) and as the CpuOp of known shapes (oneDNN 2.6
// has no RMS normalization), against the reference kernel; a scale that broadcasts (a [1])
// takes the reference kernel and still matches.
TEST(RuntimeRows, RmsNormMatchesTheReferenceOverShapesAxesAndThreads) {
  struct Shape {
    std::vector<int64_t> x;
    int64_t axis;
    std::vector<int64_t> scale;
  };
  const std::vector<Shape> shapes = {{{4, 24}, -1, {24}},       {{2, 3, 7}, -1, {7}},
                                     {{2, 3, 8}, 1, {3, 8}},    {{300, 40}, 1, {40}},
                                     {{2, 128, 512}, 2, {512}}, {{6, 1, 33}, -2, {1, 33}},
                                     {{3, 17}, -1, {1}},        {{0, 16}, -1, {16}}};
  uint32_t seed = 400;
  for (int threads : {1, 2}) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(runtime::shape_to_string(s.x) + " axis " + std::to_string(s.axis) + ", " +
                   std::to_string(threads) + " thread(s)");
      OwnedTensor x = random_tensor(s.x, seed++, -3.0, 3.0);
      OwnedTensor scale = random_tensor(s.scale, seed++, -2.0, 2.0);
      const OwnedTensor expected = reference_rms(x.tensor(), s.axis, scale.tensor(), 1e-6);
      const std::vector<ir::Attribute> attributes = {int_attr("axis", s.axis),
                                                     float_attr("epsilon", 1e-6)};
      auto rows = RuntimeRows::create(
          desc_of("RMSNormalization", 0, attributes, threads, {&scale.tensor()}));
      ASSERT_TRUE(rows.ok()) << rows.status();
      EXPECT_THAT((*rows)->describe(), HasSubstr("RMS normalization"));
      expect_near(run(**rows, x.tensor()), expected);

      Case c("RMSNormalization", attributes);
      c.desc.num_threads = threads;
      c.add(std::move(x), false);
      c.add(std::move(scale), true);
      auto op = c.create();
      ASSERT_TRUE(op.ok()) << op.status();
      EXPECT_EQ((*op)->provider(), "kiln");
      EXPECT_EQ((*op)->outputs()[0].sizes, s.x);
      expect_near(c.run(**op), expected);
    }
  }
}

OwnedTensor reference_instance(const Tensor& x, const Tensor& scale, const Tensor& bias,
                               double epsilon) {
  OwnedTensor out = zeros(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()));
  runtime::Status status = kernels::instance_norm(x, scale, bias, epsilon, out.tensor());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Each (n, c) row over the spatial axes, the scale and B of its channel (row r is channel
// r % C: batches of more than one tell a wrong index), on the rows of run-time shapes and as
// the CpuOp of known shapes, against the reference kernel.
TEST(RuntimeRows, InstanceNormMatchesTheReferenceOverShapesAndThreads) {
  const std::vector<std::vector<int64_t>> shapes = {{1, 4, 8, 8},    {3, 5, 7},       {2, 3, 17, 5},
                                                    {1, 64, 40, 40}, {2, 2, 3, 2, 4}, {1, 3, 1},
                                                    {0, 3, 4}};
  uint32_t seed = 700;
  for (int threads : {1, 2}) {
    for (const std::vector<int64_t>& shape : shapes) {
      SCOPED_TRACE(runtime::shape_to_string(shape) + ", " + std::to_string(threads) + " thread(s)");
      OwnedTensor x = random_tensor(shape, seed++, -3.0, 5.0);
      OwnedTensor scale = random_tensor({shape[1]}, seed++, -2.0, 2.0);
      OwnedTensor bias = random_tensor({shape[1]}, seed++, -1.0, 1.0);
      const OwnedTensor expected =
          reference_instance(x.tensor(), scale.tensor(), bias.tensor(), 1e-3);
      const std::vector<ir::Attribute> attributes = {float_attr("epsilon", 1e-3)};
      auto rows = RuntimeRows::create(desc_of("InstanceNormalization", 0, attributes, threads,
                                              {&scale.tensor(), &bias.tensor()}));
      ASSERT_TRUE(rows.ok()) << rows.status();
      EXPECT_THAT((*rows)->describe(), HasSubstr("instance normalization"));
      expect_near(run(**rows, x.tensor()), expected);

      Case c("InstanceNormalization", attributes);
      c.desc.num_threads = threads;
      c.add(std::move(x), false);
      c.add(std::move(scale), true);
      c.add(std::move(bias), true);
      auto op = c.create();
      ASSERT_TRUE(op.ok()) << op.status();
      EXPECT_EQ((*op)->provider(), "kiln");
      EXPECT_THAT((*op)->describe(), HasSubstr("instance normalization"));
      expect_near(c.run(**op), expected);
    }
  }
}

// Each (n, group) row over the group's channels and the spatial axes, each channel its own
// scale and bias (a wrong channel or group index shows in batches and in groups of several
// channels), on the rows of run-time shapes and as the CpuOp of known shapes, against the
// reference kernel; one group, one channel a group, remainders of a vector.
TEST(RuntimeRows, GroupNormMatchesTheReferenceOverShapesGroupsAndThreads) {
  struct Shape {
    std::vector<int64_t> sizes;
    int64_t groups;
  };
  const std::vector<Shape> shapes = {{{1, 8, 4, 4}, 2},     {{2, 6, 7}, 3},    {{2, 12, 5, 3}, 4},
                                     {{1, 64, 20, 20}, 32}, {{1, 8, 3, 3}, 1}, {{2, 4, 17}, 4},
                                     {{1, 4, 2, 3, 2}, 2},  {{0, 4, 4}, 2}};
  // Fused activations after it (SiLU's Swish among them), on whole vectors and tails.
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {},
      {{PostOpKind::Swish}},
      {{PostOpKind::Relu}},
      {{PostOpKind::Linear, 2.0f, -1.0f}, {PostOpKind::Sigmoid}}};
  uint32_t seed = 900;
  for (int threads : {1, 2}) {
    for (size_t k = 0; k < shapes.size(); ++k) {
      const Shape& shape = shapes[k];
      const std::vector<PostOp>& post_ops = post_op_sets[k % post_op_sets.size()];
      SCOPED_TRACE(runtime::shape_to_string(shape.sizes) + " in " + std::to_string(shape.groups) +
                   " groups, " + std::to_string(post_ops.size()) + " post-op(s), " +
                   std::to_string(threads) + " thread(s)");
      OwnedTensor x = random_tensor(shape.sizes, seed++, -3.0, 5.0);
      OwnedTensor scale = random_tensor({shape.sizes[1]}, seed++, -2.0, 2.0);
      OwnedTensor bias = random_tensor({shape.sizes[1]}, seed++, -1.0, 1.0);
      OwnedTensor expected = zeros(shape.sizes);
      ASSERT_TRUE(kernels::group_norm(x.tensor(), scale.tensor(), bias.tensor(), shape.groups, 1e-3,
                                      expected.tensor())
                      .ok());
      apply_post_ops(post_ops, {}, expected);
      const std::vector<ir::Attribute> attributes = {float_attr("epsilon", 1e-3),
                                                     int_attr("num_groups", shape.groups)};
      OpDesc rows_desc =
          desc_of("GroupNormalization", 0, attributes, threads, {&scale.tensor(), &bias.tensor()});
      rows_desc.post_ops = post_ops;
      auto rows = RuntimeRows::create(rows_desc);
      ASSERT_TRUE(rows.ok()) << rows.status();
      EXPECT_THAT((*rows)->describe(), HasSubstr("group normalization"));
      expect_near(run(**rows, x.tensor()), expected);

      Case c("GroupNormalization", attributes);
      c.desc.num_threads = threads;
      c.desc.post_ops = post_ops;
      c.add(std::move(x), false);
      c.add(std::move(scale), true);
      c.add(std::move(bias), true);
      auto op = c.create();
      ASSERT_TRUE(op.ok()) << op.status();
      EXPECT_EQ((*op)->provider(), "kiln");
      EXPECT_THAT((*op)->describe(), HasSubstr("group normalization"));
      expect_near(c.run(**op), expected);
    }
  }
}

// A scale and bias of one value per group (opset 18) run on the reference kernel, as do groups
// that do not divide the channels (which it rejects, naming them); no num_groups, or one under
// 1, is rejected at creation.
TEST(RuntimeRows, GroupNormLeavesWhatItDoesNotCoverToTheReference) {
  OwnedTensor x = random_tensor({2, 6, 5}, 11);
  OwnedTensor group_scale = random_tensor({3}, 12), group_bias = random_tensor({3}, 13);
  auto rows = RuntimeRows::create(desc_of("GroupNormalization", 3, {int_attr("num_groups", 3)}, 1,
                                          {&group_scale.tensor(), &group_bias.tensor()}));
  ASSERT_TRUE(rows.ok()) << rows.status();
  OwnedTensor expected = zeros({2, 6, 5});
  ASSERT_TRUE(kernels::group_norm(x.tensor(), group_scale.tensor(), group_bias.tensor(), 3, 1e-5,
                                  expected.tensor())
                  .ok());
  expect_near(run(**rows, x.tensor()), expected);
  // With a fused activation, applied after the reference kernel.
  OpDesc swish = desc_of("GroupNormalization", 3, {int_attr("num_groups", 3)}, 1,
                         {&group_scale.tensor(), &group_bias.tensor()});
  swish.post_ops = {PostOp{PostOpKind::Swish}};
  auto swish_rows = RuntimeRows::create(swish);
  ASSERT_TRUE(swish_rows.ok()) << swish_rows.status();
  apply_post_ops(swish.post_ops, {}, expected);
  expect_near(run(**swish_rows, x.tensor()), expected);
  // Only activations, and only after instance and group normalizations.
  swish.post_ops = {PostOp{PostOpKind::AddResidual}};
  EXPECT_EQ(RuntimeRows::create(swish).status().code(), Error::NotSupported);
  OpDesc softmax = desc_of("Softmax", 2, {}, 1);
  softmax.post_ops = {PostOp{PostOpKind::Relu}};
  EXPECT_EQ(RuntimeRows::create(softmax).status().code(), Error::NotSupported);

  OwnedTensor scale = random_tensor({6}, 14), bias = random_tensor({6}, 15);
  auto four = RuntimeRows::create(desc_of("GroupNormalization", 3, {int_attr("num_groups", 4)}, 1,
                                          {&scale.tensor(), &bias.tensor()}));
  ASSERT_TRUE(four.ok()) << four.status();
  OwnedTensor out = zeros({2, 6, 5});
  runtime::Status status = (*four)->run(x.tensor(), out.tensor());
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("num_groups is 4"));

  auto missing = RuntimeRows::create(
      desc_of("GroupNormalization", 3, {}, 1, {&scale.tensor(), &bias.tensor()}));
  EXPECT_EQ(missing.status().code(), Error::InvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("'num_groups' is missing"));
  auto zero = RuntimeRows::create(desc_of("GroupNormalization", 3, {int_attr("num_groups", 0)}, 1,
                                          {&scale.tensor(), &bias.tensor()}));
  EXPECT_EQ(zero.status().code(), Error::InvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("'num_groups' is 0"));
}

// Parameters that are not one value per channel go to the reference kernel, which names them;
// a known rank under 3 and a missing B are rejected at creation.
TEST(RuntimeRows, InstanceNormLeavesWhatItDoesNotCoverToTheReference) {
  OwnedTensor scale = random_tensor({4}, 1), bias = random_tensor({4}, 2);
  auto rows = RuntimeRows::create(
      desc_of("InstanceNormalization", 0, {}, 1, {&scale.tensor(), &bias.tensor()}));
  ASSERT_TRUE(rows.ok()) << rows.status();
  OwnedTensor five = random_tensor({1, 5, 6}, 3);
  OwnedTensor out = zeros({1, 5, 6});
  runtime::Status channels = (*rows)->run(five.tensor(), out.tensor());
  EXPECT_EQ(channels.code(), Error::InvalidArgument);
  OwnedTensor flat = random_tensor({2, 4}, 4);
  OwnedTensor flat_out = zeros({2, 4});
  EXPECT_EQ((*rows)->run(flat.tensor(), flat_out.tensor()).code(), Error::InvalidArgument);

  auto rank2 = RuntimeRows::create(
      desc_of("InstanceNormalization", 2, {}, 1, {&scale.tensor(), &bias.tensor()}));
  EXPECT_EQ(rank2.status().code(), Error::InvalidArgument);
  EXPECT_THAT(rank2.status().message(), HasSubstr("rank 2 (expected >= 3"));
  OpDesc no_bias = desc_of("InstanceNormalization", 4, {}, 1, {&scale.tensor(), &bias.tensor()});
  no_bias.inputs_present = {true, true, false};
  auto missing = RuntimeRows::create(no_bias);
  EXPECT_EQ(missing.status().code(), Error::InvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("input 2 is absent"));
}

TEST(RuntimeRows, SpecialValuesFollowTheReference) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Rows of 20 (a vector and a remainder): masked logits (-inf and -1e9), a row of -inf only,
  // a row holding +inf, a row holding NaN (in the vector part and in the remainder).
  std::vector<float> values(5 * 20);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) * 0.5f - 1.0f;
  for (int j = 10; j < 20; ++j) values[static_cast<size_t>(j)] = j % 2 ? -inf : -1e9f;
  for (int j = 20; j < 40; ++j) values[static_cast<size_t>(j)] = -inf;
  values[45] = inf;
  values[63] = nan;
  values[98] = nan;
  OwnedTensor x = OwnedTensor::of({5, 20}, values);
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    auto made = RuntimeRows::create(desc_of(op, 2, {}, 1));
    ASSERT_TRUE(made.ok()) << made.status();
    std::vector<float> actual = run(**made, x.tensor()).values<float>();
    std::vector<float> expected = reference(op, x.tensor(), -1).values<float>();
    for (size_t i = 0; i < actual.size(); ++i) {
      if (std::isnan(expected[i]) || std::isinf(expected[i])) {
        EXPECT_EQ(std::isnan(actual[i]), std::isnan(expected[i])) << "element " << i;
        if (std::isinf(expected[i])) {
          EXPECT_EQ(actual[i], expected[i]) << "element " << i;
        }
      } else {
        EXPECT_NEAR(actual[i], expected[i], 1e-5 + 1e-4 * std::fabs(expected[i]))
            << "element " << i;
      }
    }
  }
}

// A causal mask's logits (-1e9, -inf, float's lowest) and logits 88-200 below the row's max
// give probabilities of exactly 0, in whole vectors and remainders: no subnormal values, which
// make every product that reads them many times slower. Softmax's other values stay normal
// where the reference's are.
TEST(RuntimeRows, MaskedLogitsGiveZerosNotSubnormals) {
  const int64_t n = 40;  // two vectors and a remainder
  const float masks[] = {-1e9f, -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::lowest(), -88.5f, -120.0f, -200.0f};
  for (float mask : masks) {
    SCOPED_TRACE("mask " + std::to_string(mask));
    std::vector<float> values(static_cast<size_t>(n * n));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        values[static_cast<size_t>(r * n + c)] =
            c <= r ? static_cast<float>((r * 7 + c * 3) % 11) * 0.25f : mask;
      }
    }
    OwnedTensor x = OwnedTensor::of({n, n}, values);
    for (int threads : {1, 2}) {
      auto made = RuntimeRows::create(desc_of("Softmax", 2, {}, threads));
      ASSERT_TRUE(made.ok()) << made.status();
      std::vector<float> actual = run(**made, x.tensor()).values<float>();
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          const float v = actual[static_cast<size_t>(r * n + c)];
          if (c > r) {
            EXPECT_EQ(v, 0.0f) << "row " << r << " column " << c;
          } else {
            EXPECT_EQ(std::fpclassify(v), FP_NORMAL) << "row " << r << " column " << c;
          }
        }
      }
    }
  }
}

TEST(RuntimeRows, CallsTheLoopsDoNotCoverRunOnTheReferenceKernel) {
  // A Softmax over a middle axis of an op whose rank was unknown at creation.
  auto softmax = RuntimeRows::create(desc_of("Softmax", 0, {int_attr("axis", 1)}, 1));
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  OwnedTensor x = random_tensor({3, 5, 4}, 7);
  expect_near(run(**softmax, x.tensor()), reference("Softmax", x.tensor(), 1));

  // A Scale that broadcasts (one value for 24 normalized elements).
  OwnedTensor scale = random_tensor({1}, 8);
  auto layer_norm = RuntimeRows::create(desc_of("LayerNormalization", 0, {}, 1, {&scale.tensor()}));
  ASSERT_TRUE(layer_norm.ok()) << layer_norm.status();
  OwnedTensor y = random_tensor({2, 24}, 9);
  expect_near(run(**layer_norm, y.tensor()),
              reference("LayerNormalization", y.tensor(), -1, &scale.tensor()));

  // Shapes the reference rejects keep its error: an axis outside the rank, a Scale of more
  // dims than the normalized ones.
  OwnedTensor vector = random_tensor({6}, 10);
  OwnedTensor out = zeros({6});
  runtime::Status outside = (*softmax)->run(vector.tensor(), out.tensor());
  EXPECT_EQ(outside.code(), Error::InvalidArgument);
  EXPECT_THAT(outside.message(), HasSubstr("'axis'"));
  OwnedTensor wide = random_tensor({1, 24}, 11);
  auto wide_norm = RuntimeRows::create(desc_of("LayerNormalization", 0, {}, 1, {&wide.tensor()}));
  ASSERT_TRUE(wide_norm.ok()) << wide_norm.status();
  OwnedTensor row = random_tensor({24}, 12);
  OwnedTensor row_out = zeros({24});
  runtime::Status too_wide = (*wide_norm)->run(row.tensor(), row_out.tensor());
  EXPECT_EQ(too_wide.code(), Error::InvalidArgument);
  EXPECT_THAT(too_wide.message(), HasSubstr("Scale"));
}

TEST(RuntimeRows, RejectsWhatItDoesNotTake) {
  auto not_last = RuntimeRows::create(desc_of("Softmax", 3, {int_attr("axis", 1)}, 1));
  EXPECT_EQ(not_last.status().code(), Error::NotSupported);
  EXPECT_THAT(not_last.status().message(), HasSubstr("only the last axis"));

  auto outside = RuntimeRows::create(desc_of("LogSoftmax", 2, {int_attr("axis", 2)}, 1));
  EXPECT_EQ(outside.status().code(), Error::InvalidArgument);
  EXPECT_THAT(outside.status().message(), HasSubstr("'axis' has value 2 (expected -2..1)"));

  OwnedTensor scale = random_tensor({8}, 1);
  auto stash = RuntimeRows::create(
      desc_of("LayerNormalization", 2, {int_attr("stash_type", 11)}, 1, {&scale.tensor()}));
  EXPECT_EQ(stash.status().code(), Error::NotSupported);
  EXPECT_THAT(stash.status().message(), HasSubstr("'stash_type' is 11"));

  OpDesc computed = desc_of("LayerNormalization", 2, {}, 1, {&scale.tensor()});
  computed.constants[1] = nullptr;
  auto not_constant = RuntimeRows::create(computed);
  EXPECT_EQ(not_constant.status().code(), Error::NotSupported);
  EXPECT_THAT(not_constant.status().message(), HasSubstr("input 1 is computed"));

  OpDesc stats = desc_of("LayerNormalization", 2, {}, 1, {&scale.tensor()});
  stats.num_outputs = 3;
  EXPECT_EQ(RuntimeRows::create(stats).status().code(), Error::NotSupported);

  OpDesc half = desc_of("Softmax", 2, {}, 1);
  half.inputs[0].dtype = runtime::ScalarType::Float16;
  auto f16 = RuntimeRows::create(half);
  EXPECT_EQ(f16.status().code(), Error::NotSupported);
  EXPECT_THAT(f16.status().message(), HasSubstr("expected f32"));

  EXPECT_EQ(RuntimeRows::create(desc_of("Relu", 2, {}, 1)).status().code(), Error::NotSupported);

  // At run: another rank than the one known at creation, an output of other sizes.
  auto ranked = RuntimeRows::create(desc_of("Softmax", 2, {}, 1));
  ASSERT_TRUE(ranked.ok()) << ranked.status();
  OwnedTensor x = random_tensor({2, 3, 4}, 2);
  OwnedTensor out = zeros({2, 3, 4});
  runtime::Status rank = (*ranked)->run(x.tensor(), out.tensor());
  EXPECT_EQ(rank.code(), Error::InvalidArgument);
  EXPECT_THAT(rank.message(), HasSubstr("input 0 has shape [2, 3, 4] (expected rank 2)"));
  OwnedTensor y = random_tensor({2, 4}, 3);
  OwnedTensor small = zeros({2, 3});
  runtime::Status sizes = (*ranked)->run(y.tensor(), small.tensor());
  EXPECT_EQ(sizes.code(), Error::InvalidArgument);
  EXPECT_THAT(sizes.message(), HasSubstr("output 0 has shape [2, 3] (expected [2, 4]"));
}

}  // namespace
}  // namespace kiln::engine::cpu
