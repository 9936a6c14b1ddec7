// ConvTranspose and Resize/Upsample on oneDNN against the reference kernels (kiln/kernels) on
// seeded random data over each op's options, and the cases they leave to the reference kernel
// (NotSupported). Every op runs with num_threads = 1 but those of
// OpsOfTwoThreadsAreProvedOnOneAndMatchTheReference.

#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Error;
using runtime::ScalarType;
using runtime::Tensor;

// ---- ConvTranspose ---------------------------------------------------------------------------

struct DeconvShape {
  std::vector<int64_t> x, w;
  kernels::ConvTransposeOptions options;
};

std::vector<ir::Attribute> deconv_attributes(const kernels::ConvTransposeOptions& o) {
  std::vector<ir::Attribute> attributes;
  if (!o.strides.empty()) attributes.push_back(ints("strides", o.strides));
  if (!o.dilations.empty()) attributes.push_back(ints("dilations", o.dilations));
  if (!o.pads.empty()) attributes.push_back(ints("pads", o.pads));
  if (!o.output_padding.empty()) attributes.push_back(ints("output_padding", o.output_padding));
  if (!o.output_shape.empty()) attributes.push_back(ints("output_shape", o.output_shape));
  if (o.group != 1) attributes.push_back(int_attr("group", o.group));
  if (o.auto_pad == kernels::AutoPad::SameUpper) attributes.push_back(str("auto_pad", "SAME_UPPER"));
  if (o.auto_pad == kernels::AutoPad::SameLower) attributes.push_back(str("auto_pad", "SAME_LOWER"));
  if (o.auto_pad == kernels::AutoPad::Valid) attributes.push_back(str("auto_pad", "VALID"));
  return attributes;
}

kernels::ConvTransposeOptions deconv_options(std::vector<int64_t> strides,
                                             std::vector<int64_t> dilations,
                                             std::vector<int64_t> pads,
                                             std::vector<int64_t> output_padding,
                                             int64_t group = 1) {
  kernels::ConvTransposeOptions o;
  o.strides = std::move(strides);
  o.dilations = std::move(dilations);
  o.pads = std::move(pads);
  o.output_padding = std::move(output_padding);
  o.group = group;
  return o;
}

std::vector<DeconvShape> deconv_shapes() {
  std::vector<DeconvShape> shapes = {
      {{1, 4, 5, 6}, {4, 3, 3, 3}, {}},
      {{1, 8, 7, 9}, {8, 4, 2, 2}, deconv_options({2, 2}, {}, {}, {})},  // the DBNet head
      {{2, 3, 5, 4}, {3, 5, 3, 3}, deconv_options({2, 2}, {}, {1, 1, 1, 1}, {1, 1})},
      {{1, 3, 4, 5}, {3, 2, 3, 2}, deconv_options({2, 3}, {2, 1}, {0, 1, 2, 0}, {})},
      {{2, 4, 5, 5}, {4, 3, 3, 3}, deconv_options({1, 2}, {}, {1, 0, 0, 1}, {}, 2)},
      {{1, 16, 6, 6}, {16, 1, 3, 3}, deconv_options({2, 2}, {}, {1, 1, 1, 1}, {1, 1}, 16)},
      {{1, 6, 4, 4}, {6, 2, 4, 4}, deconv_options({3, 3}, {1, 2}, {2, 1, 2, 3}, {2, 1}, 3)},
      {{1, 32, 5, 5}, {32, 16, 4, 4}, deconv_options({2, 2}, {}, {1, 1, 1, 1}, {})},
      // output_padding beyond the end pad: the extra positions get only the bias.
      {{1, 4, 5, 6}, {4, 8, 3, 3}, deconv_options({2, 2}, {}, {}, {1, 1})},
      {{1, 2, 3, 3}, {2, 2, 2, 2}, deconv_options({3, 3}, {}, {0, 1, 0, 0}, {2, 1})},
  };
  for (auto pad : {kernels::AutoPad::SameUpper, kernels::AutoPad::SameLower,
                   kernels::AutoPad::Valid}) {
    DeconvShape s{{1, 3, 5, 6}, {3, 4, 3, 3}, deconv_options({2, 2}, {}, {}, {})};
    s.options.auto_pad = pad;
    shapes.push_back(s);
  }
  for (auto pad : {kernels::AutoPad::NotSet, kernels::AutoPad::SameUpper}) {
    // Full extents 11 and 13: totals 0 and 1; then an output larger than the full extent
    // (the extra positions get only the bias).
    DeconvShape s{{1, 3, 5, 6}, {3, 2, 3, 3}, deconv_options({2, 2}, {}, {}, {})};
    s.options.output_shape = {11, 12};
    s.options.auto_pad = pad;
    shapes.push_back(s);
    s.options.output_shape = {1, 2, 10, 9};
    shapes.push_back(s);
    s.options.output_shape = {12, 14};
    shapes.push_back(s);
  }
  return shapes;
}

TEST(DnnlConvTranspose, MatchesReferenceOverGeometryBiasAndPostOps) {
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {}, {{PostOpKind::Relu}}, {{PostOpKind::Sigmoid}}, {{PostOpKind::AddResidual}, {PostOpKind::Relu}}};
  uint32_t seed = 1;
  for (const DeconvShape& s : deconv_shapes()) {
    auto shape = kernels::conv_transpose_shape(s.x, s.w, s.options);
    ASSERT_TRUE(shape.ok()) << shape.status();
    const int64_t m = (*shape)[1];
    for (int bias : {0, 1, 2}) {  // none, constant, run-time
      for (const auto& post_ops : post_op_sets) {
        for (auto layout : {ActivationLayout::Preferred, ActivationLayout::Plain}) {
          SCOPED_TRACE(runtime::shape_to_string(s.x) + " * " + runtime::shape_to_string(s.w) +
                       " -> " + runtime::shape_to_string(*shape) + " bias " + std::to_string(bias) +
                       " post-ops " + std::to_string(post_ops.size()) +
                       (layout == ActivationLayout::Plain ? " plain" : ""));
          Case c("ConvTranspose", deconv_attributes(s.options));
          c.desc.activation_layout = layout;
          c.add(random_tensor(s.x, seed++), false);
          c.add(random_tensor(s.w, seed++), true);
          if (bias != 0) c.add(random_tensor({m}, seed++), bias == 1);
          OwnedTensor expected = zeros(*shape);
          ASSERT_TRUE(kernels::conv_transpose(c.at(0), c.at(1), bias != 0 ? &c.at(2) : nullptr,
                                              s.options, expected.tensor())
                          .ok());
          float* y = expected.tensor().mutable_data_ptr<float>();
          for (const PostOp& p : post_ops) {
            if (p.kind == PostOpKind::AddResidual) {
              c.add(random_tensor(*shape, seed++), false);
              const float* r = c.at(c.inputs.size() - 1).data_ptr<float>();
              for (int64_t i = 0; i < expected.tensor().numel(); ++i) y[i] += r[i];
            }
            for (int64_t i = 0; i < expected.tensor().numel(); ++i) {
              if (p.kind == PostOpKind::Relu) y[i] = std::max(y[i], 0.0f);
              if (p.kind == PostOpKind::Sigmoid) y[i] = 1.0f / (1.0f + std::exp(-y[i]));
            }
          }
          c.desc.post_ops = post_ops;
          expect_near(c.run(), expected);
        }
      }
    }
  }
}

TEST(DnnlConvTranspose, LeavesUnsupportedCasesToTheReference) {
  {  // W not constant
    Case c("ConvTranspose", {});
    c.add(random_tensor({1, 2, 4, 4}, 1), false);
    c.add(random_tensor({2, 3, 3, 3}, 2), false);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
    EXPECT_NE(op.status().message().find("not constant"), std::string::npos) << op.status();
  }
  {  // 1-D
    Case c("ConvTranspose", {});
    c.add(random_tensor({1, 2, 4}, 1), false);
    c.add(random_tensor({2, 3, 3}, 2), true);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
    EXPECT_NE(op.status().message().find("rank 3"), std::string::npos) << op.status();
  }
  {  // Two residuals
    Case c("ConvTranspose", {});
    c.add(random_tensor({1, 2, 4, 4}, 1), false);
    c.add(random_tensor({2, 3, 3, 3}, 2), true);
    c.add(random_tensor({1, 3, 6, 6}, 3), false);
    c.add(random_tensor({1, 3, 6, 6}, 4), false);
    c.desc.post_ops = {{PostOpKind::AddResidual}, {PostOpKind::AddResidual}};
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
  }
  {  // W that does not fit X: the reference's InvalidArgument
    Case c("ConvTranspose", {});
    c.add(random_tensor({1, 2, 4, 4}, 1), false);
    c.add(random_tensor({3, 3, 3, 3}, 2), true);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::InvalidArgument);
  }
}

// ---- Resize, Upsample ------------------------------------------------------------------------

/// A Resize (opset 11+: X, roi, scales, sizes) with constant `scales` or `sizes`.
Case resize_case(const std::vector<ir::Attribute>& attributes, const OwnedTensor& x,
                 const std::vector<float>* scales, const std::vector<int64_t>* sizes) {
  Case c("Resize", attributes);
  c.add(OwnedTensor::of(std::vector<int64_t>(x.tensor().sizes().begin(), x.tensor().sizes().end()),
                        x.values<float>()),
        false);
  c.add_absent();
  if (scales != nullptr) {
    c.add(OwnedTensor::of({static_cast<int64_t>(scales->size())}, *scales), true);
  } else {
    c.add_absent();
    c.add(OwnedTensor::of({static_cast<int64_t>(sizes->size())}, *sizes), true);
  }
  return c;
}

/// The reference kernel's Resize of `x`.
OwnedTensor reference_resize(const OwnedTensor& x, const kernels::ResizeOptions& options,
                             const std::vector<float>* scales, const std::vector<int64_t>* sizes) {
  std::optional<std::vector<double>> s;
  if (scales != nullptr) s = std::vector<double>(scales->begin(), scales->end());
  auto plan = kernels::resize_plan(x.tensor().sizes(), nullptr, s ? &*s : nullptr, sizes, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return zeros({0});
  OwnedTensor out = zeros(plan->sizes);
  EXPECT_TRUE(kernels::resize(x.tensor(), *plan, options, out.tensor()).ok());
  return out;
}

struct ResizeMode {
  std::string mode, coordinates, nearest;
};

TEST(DnnlResize, MatchesReferenceWhereverAcceptedAndAcceptsTheCommonCases) {
  const std::vector<ResizeMode> modes = {
      {"nearest", "asymmetric", "floor"},
      {"nearest", "asymmetric", "round_prefer_floor"},
      {"nearest", "asymmetric", "round_prefer_ceil"},
      {"nearest", "asymmetric", "ceil"},
      {"nearest", "half_pixel", "round_prefer_floor"},
      {"nearest", "half_pixel", "round_prefer_ceil"},
      {"nearest", "half_pixel", "floor"},
      {"nearest", "pytorch_half_pixel", "round_prefer_floor"},
      {"nearest", "align_corners", "round_prefer_floor"},
      {"nearest", "tf_half_pixel_for_nn", "floor"},
      {"linear", "half_pixel", ""},
      {"linear", "pytorch_half_pixel", ""},
      {"linear", "half_pixel_symmetric", ""},
      {"linear", "asymmetric", ""},
      {"linear", "align_corners", ""},
  };
  const std::vector<std::vector<float>> scale_sets = {
      {1, 1, 2, 2}, {1, 1, 3, 2}, {1, 1, 4, 4}, {1, 1, 0.5f, 0.5f}, {1, 1, 1.5f, 2.5f},
      {1, 1, 0.75f, 1.25f}, {1, 1, 1, 2}, {1, 1, 1.0f / 3, 0.6f}};
  // Over one block of 16 channels the op is proved on one image of one block: {2, 16, 7, 5}
  // and {1, 40, 6, 5} check that what that proof accepts matches on every plane.
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 3, 4, 6}, {2, 16, 7, 5}, {1, 1, 9, 12}, {1, 40, 6, 5}};
  uint32_t seed = 1000;
  int accepted = 0, total = 0;
  for (const ResizeMode& m : modes) {
    std::vector<ir::Attribute> attributes = {str("mode", m.mode),
                                             str("coordinate_transformation_mode", m.coordinates)};
    if (!m.nearest.empty()) attributes.push_back(str("nearest_mode", m.nearest));
    kernels::ResizeOptions options;
    options.mode = *kernels::parse_resize_mode(m.mode);
    options.coordinates = *kernels::parse_resize_coordinates(m.coordinates);
    if (!m.nearest.empty()) options.nearest = *kernels::parse_resize_nearest(m.nearest);
    for (const auto& shape : shapes) {
      OwnedTensor x = random_tensor(shape, seed++);
      for (const auto& scales : scale_sets) {
        // Both by scales and by the sizes those scales give.
        std::vector<int64_t> sizes = shape;
        for (size_t d = 0; d < 4; ++d) {
          sizes[d] = static_cast<int64_t>(std::floor(static_cast<double>(scales[d]) *
                                                     static_cast<double>(shape[d])));
        }
        for (bool by_sizes : {false, true}) {
          SCOPED_TRACE(m.mode + " " + m.coordinates + " " + m.nearest + " " +
                       runtime::shape_to_string(shape) + " -> " + runtime::shape_to_string(sizes) +
                       (by_sizes ? " by sizes" : " by scales " + std::to_string(scales[2]) + "," +
                                                     std::to_string(scales[3])));
          const std::vector<float>* s = by_sizes ? nullptr : &scales;
          const std::vector<int64_t>* z = by_sizes ? &sizes : nullptr;
          Case c = resize_case(attributes, x, s, z);
          auto op = c.create();
          ++total;
          if (!op.ok()) {
            EXPECT_EQ(op.status().code(), Error::NotSupported) << op.status();
            continue;
          }
          ++accepted;
          expect_near(c.run(**op), reference_resize(x, options, s, z));
        }
      }
    }
  }
  std::printf("Resize: %d of %d cases on oneDNN\n", accepted, total);
  EXPECT_GT(accepted, total / 4);

  // The cases exported models use most must run on oneDNN: PyTorch's nearest upsampling by an
  // integer factor (asymmetric, floor) and bilinear without align_corners (half_pixel or
  // pytorch_half_pixel), up and down by a factor of two.
  struct Required {
    ResizeMode mode;
    std::vector<float> scales;
  };
  const std::vector<Required> required = {
      {{"nearest", "asymmetric", "floor"}, {1, 1, 2, 2}},
      {{"nearest", "asymmetric", "floor"}, {1, 1, 4, 4}},
      {{"nearest", "asymmetric", "floor"}, {1, 1, 3, 2}},
      {{"nearest", "half_pixel", "round_prefer_ceil"}, {1, 1, 0.5f, 0.5f}},
      {{"linear", "half_pixel", ""}, {1, 1, 2, 2}},
      {{"linear", "half_pixel", ""}, {1, 1, 0.5f, 0.5f}},
      {{"linear", "half_pixel", ""}, {1, 1, 1.5f, 1.25f}},
      {{"linear", "pytorch_half_pixel", ""}, {1, 1, 2, 2}},
  };
  for (const Required& r : required) {
    SCOPED_TRACE(r.mode.mode + " " + r.mode.coordinates + " " + r.mode.nearest + " " +
                 std::to_string(r.scales[2]));
    std::vector<ir::Attribute> attributes = {
        str("mode", r.mode.mode), str("coordinate_transformation_mode", r.mode.coordinates)};
    if (!r.mode.nearest.empty()) attributes.push_back(str("nearest_mode", r.mode.nearest));
    OwnedTensor x = random_tensor({1, 8, 8, 12}, seed++);
    Case c = resize_case(attributes, x, &r.scales, nullptr);
    auto op = c.create();
    EXPECT_TRUE(op.ok()) << op.status();
    if (op.ok()) {
      EXPECT_EQ((*op)->describe().rfind("oneDNN", 0), 0u) << (*op)->describe();
    }
  }
}

// An op of 2 threads is proved on an op of one thread (no OpenMP team woken while a model
// specializes): it accepts what the 1-thread op accepts, on the same implementation, and
// matches the reference. Large enough to keep both threads (op_threads); 8 channels: proved
// at its own size, 32: on one block of 16.
TEST(DnnlResize, OpsOfTwoThreadsAreProvedOnOneAndMatchTheReference) {
  const std::vector<std::pair<ResizeMode, std::vector<float>>> cases = {
      {{"nearest", "asymmetric", "floor"}, {1, 1, 2, 2}},
      {{"nearest", "half_pixel", "round_prefer_ceil"}, {1, 1, 0.5f, 0.5f}},
      {{"linear", "half_pixel", ""}, {1, 1, 2, 2}},
      {{"linear", "align_corners", ""}, {1, 1, 1.5f, 1.5f}},
      {{"nearest", "asymmetric", "ceil"}, {1, 1, 1.5f, 2}},
  };
  uint32_t seed = 1300;
  int accepted = 0;
  for (const auto& [m, scales] : cases) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{1, 8, 96, 128}, {1, 32, 64, 64}}) {
      SCOPED_TRACE(m.mode + " " + m.coordinates + " " + m.nearest + " " +
                   runtime::shape_to_string(shape));
      std::vector<ir::Attribute> attributes = {
          str("mode", m.mode), str("coordinate_transformation_mode", m.coordinates)};
      if (!m.nearest.empty()) attributes.push_back(str("nearest_mode", m.nearest));
      kernels::ResizeOptions options;
      options.mode = *kernels::parse_resize_mode(m.mode);
      options.coordinates = *kernels::parse_resize_coordinates(m.coordinates);
      if (!m.nearest.empty()) options.nearest = *kernels::parse_resize_nearest(m.nearest);
      OwnedTensor x = random_tensor(shape, seed++);
      Case one = resize_case(attributes, x, &scales, nullptr);
      Case two = resize_case(attributes, x, &scales, nullptr);
      two.desc.num_threads = 2;
      ASSERT_EQ(op_threads(two.desc), 2);  // the op keeps both threads
      auto op_one = one.create();
      auto op_two = two.create();
      ASSERT_EQ(op_one.ok(), op_two.ok()) << op_one.status() << " / " << op_two.status();
      if (!op_two.ok()) {
        EXPECT_EQ(op_two.status().code(), Error::NotSupported) << op_two.status();
        continue;
      }
      ++accepted;
      EXPECT_EQ((*op_one)->describe(), (*op_two)->describe());
      expect_near(two.run(**op_two), reference_resize(x, options, &scales, nullptr));
    }
  }
  EXPECT_GE(accepted, 6);  // the first three cases at both shapes at least
}

TEST(DnnlResize, UpsampleAndOpset10FormsUseAsymmetricCoordinates) {
  OwnedTensor x = random_tensor({1, 4, 5, 6}, 7);
  kernels::ResizeOptions options;
  options.coordinates = kernels::ResizeCoordinates::Asymmetric;
  options.nearest = kernels::ResizeNearest::Simple;
  const std::vector<float> scales = {1, 1, 2, 3};
  for (const std::string op_type : {"Upsample", "Resize"}) {
    for (const std::string mode : {"nearest", "linear"}) {
      SCOPED_TRACE(op_type + " " + mode);
      Case c(op_type, {str("mode", mode)});
      c.add(OwnedTensor::of({1, 4, 5, 6}, x.values<float>()), false);
      c.add(OwnedTensor::of({4}, scales), true);
      options.mode = mode == "nearest" ? kernels::ResizeMode::Nearest : kernels::ResizeMode::Linear;
      auto op = c.create();
      if (mode == "nearest") {
        ASSERT_TRUE(op.ok()) << op.status();  // floor(o / k) is oneDNN's for integer k
      } else if (!op.ok()) {
        EXPECT_EQ(op.status().code(), Error::NotSupported) << op.status();
        continue;
      }
      expect_near(c.run(**op), reference_resize(x, options, &scales, nullptr));
    }
  }
}

TEST(DnnlResize, LeavesUnsupportedCasesToTheReference) {
  OwnedTensor x = random_tensor({1, 2, 4, 4}, 3);
  const std::vector<float> scales = {1, 1, 2, 2};
  struct Bad {
    std::vector<ir::Attribute> attributes;
    std::string culprit;
  };
  const std::vector<Bad> bad = {
      {{str("mode", "cubic")}, "cubic"},
      {{str("mode", "linear"), str("coordinate_transformation_mode", "tf_crop_and_resize")},
       "tf_crop_and_resize"},
      {{str("mode", "linear"), int_attr("antialias", 1)}, "antialias"},
      {{str("mode", "linear"), int_attr("exclude_outside", 1)}, "exclude_outside"},
      {{ints("axes", {2, 3})}, "axes"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.culprit);
    Case c = resize_case(b.attributes, x, &scales, nullptr);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
    EXPECT_NE(op.status().message().find(b.culprit), std::string::npos) << op.status();
  }
  {  // Scales not constant
    Case c = resize_case({}, x, &scales, nullptr);
    c.constant_flags[2] = false;
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
    EXPECT_NE(op.status().message().find("not constant"), std::string::npos) << op.status();
  }
  {  // Scaling C
    const std::vector<float> channel_scales = {1, 2, 2, 2};
    Case c = resize_case({}, x, &channel_scales, nullptr);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
  }
  {  // Rank 3
    OwnedTensor x3 = random_tensor({2, 4, 4}, 4);
    const std::vector<float> scales3 = {1, 2, 2};
    Case c = resize_case({}, x3, &scales3, nullptr);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
    EXPECT_NE(op.status().message().find("rank 3"), std::string::npos) << op.status();
  }
  {  // A mapping oneDNN does not share: asymmetric floor upscaling by 1.5.
    const std::vector<float> odd = {1, 1, 1.5f, 1.5f};
    Case c = resize_case({str("coordinate_transformation_mode", "asymmetric"),
                          str("nearest_mode", "floor")},
                         x, &odd, nullptr);
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().code(), Error::NotSupported);
    EXPECT_NE(op.status().message().find("differs"), std::string::npos) << op.status();
  }
}

// oneDNN's jit resampling stores large outputs with non-temporal stores that need a 64-byte
// aligned destination; the op must produce the same result at any output address.
TEST(DnnlResize, LargeOutputsAtUnalignedAddresses) {
  uint32_t seed = 5000;
  const std::vector<int64_t> shape = {1, 64, 40, 40}, out_shape = {1, 64, 80, 80};
  const size_t out_numel = 64 * 80 * 80;
  for (const std::string mode : {"nearest", "linear"}) {
    for (size_t offset : {0, 1, 3, 16}) {
      SCOPED_TRACE(mode + " offset " + std::to_string(offset));
      OwnedTensor x = random_tensor(shape, seed++);
      const std::vector<float> scales = {1, 1, 2, 2};
      Case c = resize_case({str("mode", mode), str("coordinate_transformation_mode", "half_pixel"),
                            str("nearest_mode", "round_prefer_ceil")},
                           x, &scales, nullptr);
      auto op = c.create();
      ASSERT_TRUE(op.ok()) << op.status();
      std::vector<float> storage(out_numel + 32, 0.0f);
      const auto base = reinterpret_cast<uintptr_t>(storage.data());
      float* at = storage.data() + (64 - base % 64) % 64 / sizeof(float) + offset;
      Tensor out(ScalarType::Float32, out_shape, at);
      const Tensor* in[] = {&c.at(0), nullptr, nullptr};
      Tensor* out_ptr = &out;
      ASSERT_TRUE((*op)->run(in, runtime::Span<Tensor*>(&out_ptr, 1)).ok());
      kernels::ResizeOptions options;
      options.mode = *kernels::parse_resize_mode(mode);
      options.nearest = kernels::ResizeNearest::RoundPreferCeil;
      OwnedTensor expected = reference_resize(x, options, &scales, nullptr);
      expect_near(OwnedTensor::of(out_shape, std::vector<float>(at, at + out_numel)), expected);
    }
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
