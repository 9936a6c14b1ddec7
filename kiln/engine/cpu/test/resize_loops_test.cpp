// Resize on kiln's loops (resize_loops.cpp) against the reference kernel on seeded random
// data: nearest (each coordinate mode and nearest rounding) and linear and cubic (coordinate
// modes, antialias, exclude_outside), up- and downscales, channel counts around the blocks of
// 16, batches, threads; plain, or in a producer's nChw16c with the input and the output each
// native or plain.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/blocked16.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::ScalarType;
using runtime::Tensor;

constexpr const char* kNearest = "kiln nearest Resize";

struct Mode {
  std::string coordinates, nearest;
};

struct Shape {
  std::vector<int64_t> x;
  std::vector<float> scales;
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      {{1, 16, 5, 7}, {1, 1, 2, 2}},        // an FPN's x2
      {{2, 20, 3, 4}, {1, 1, 8, 8}},        // a batch, a padded block, x8
      {{1, 40, 9, 6}, {1, 1, 0.5f, 1.5f}},  // down and up, three blocks
  };
  return all;
}

// Runs a Resize of `attributes` (mode and the rest) on kiln's loops (their description
// starting with `kind`) over shapes(), layouts and threads against the reference kernel.
void expect_like_reference(const std::vector<ir::Attribute>& attributes,
                           const kernels::ResizeOptions& options, const std::string& kind,
                           uint32_t seed) {
  for (int threads : {1, 2}) {
    for (const Shape& s : shapes()) {
      for (int layout = 0; layout < 5; ++layout) {
        // 0: plain; 1-4: nChw16c with the input (bit 0) and the output (bit 1) native.
        const bool blocked = layout > 0, native_in = ((layout - 1) & 1) != 0,
                   native_out = ((layout - 1) & 2) != 0;
        SCOPED_TRACE(runtime::shape_to_string(s.x) + " layout " + std::to_string(layout) + ", " +
                     std::to_string(threads) + " thread(s)");
        Case c("Resize", attributes);
        c.desc.small_ops_own_loops = true;
        c.desc.num_threads = threads;
        c.add(random_tensor(s.x, seed++), false);
        c.add_absent();
        c.add(OwnedTensor::of({4}, std::vector<float>(s.scales)), true);
        if (blocked) c.desc.input_layouts = {dnnl_impl::layout_bytes(blocked16_md(s.x)), "", ""};
        const std::vector<double> scales(s.scales.begin(), s.scales.end());
        auto plan = kernels::resize_plan(s.x, nullptr, &scales, nullptr, options);
        ASSERT_TRUE(plan.ok()) << plan.status();
        OwnedTensor expected = zeros(plan->sizes);
        ASSERT_TRUE(kernels::resize(c.at(0), *plan, options, expected.tensor()).ok());

        auto op_or = c.create();
        ASSERT_TRUE(op_or.ok()) << op_or.status();
        CpuOp& op = **op_or;
        ASSERT_EQ(op.describe().rfind(kind, 0), 0u) << op.describe();
        EXPECT_EQ(op.native_input_layout(0).has_value(), blocked);
        if (!blocked) {
          expect_near(c.run(op), expected);
          continue;
        }
        if (native_in) {
          ASSERT_TRUE(op.use_native_input(0).ok());
        }
        if (native_out) {
          ASSERT_TRUE(op.use_native_output(0).ok());
        }
        std::vector<float> x_data = to_blocked16(c.at(0), 0.0f);
        Tensor x_native(ScalarType::Float32, s.x, x_data.data(), runtime::ShapeDynamism::Static,
                        x_data.size() * sizeof(float));
        std::vector<float> y_data(blocked16_md(plan->sizes).get_size() / sizeof(float),
                                  std::nanf(""));
        Tensor y_native(ScalarType::Float32, plan->sizes, y_data.data(),
                        runtime::ShapeDynamism::Static, y_data.size() * sizeof(float));
        OwnedTensor y_plain = zeros(plan->sizes);
        const Tensor* inputs[] = {native_in ? &x_native : &c.at(0), nullptr, &c.at(2)};
        Tensor* out = native_out ? &y_native : &y_plain.tensor();
        ASSERT_TRUE(
            op.run(runtime::Span<const Tensor*>(inputs, 3), runtime::Span<Tensor*>(&out, 1)).ok());
        if (!native_out) {
          expect_near(y_plain, expected);
          continue;
        }
        expect_near(from_blocked16(y_data, plan->sizes), expected);
        // The padding lanes of the last block are written zero.
        EXPECT_EQ(y_data, to_blocked16(from_blocked16(y_data, plan->sizes).tensor(), 0.0f));
      }
    }
  }
}

TEST(ResizeLoops, NearestMatchesTheReferencePlainOrInNChw16c) {
  const std::vector<Mode> modes = {{"asymmetric", "floor"},
                                   {"half_pixel", "round_prefer_floor"},
                                   {"align_corners", "round_prefer_ceil"},
                                   {"pytorch_half_pixel", "ceil"}};
  uint32_t seed = 6400;
  for (const Mode& m : modes) {
    SCOPED_TRACE(m.coordinates + " " + m.nearest);
    kernels::ResizeOptions options;
    options.coordinates = *kernels::parse_resize_coordinates(m.coordinates);
    options.nearest = *kernels::parse_resize_nearest(m.nearest);
    expect_like_reference(
        {str("mode", "nearest"), str("coordinate_transformation_mode", m.coordinates),
         str("nearest_mode", m.nearest)},
        options, kNearest, seed);
    seed += 100;
  }
}

TEST(ResizeLoops, LinearAndCubicMatchTheReferencePlainOrInNChw16c) {
  struct Interpolation {
    std::string mode, coordinates;
    bool antialias = false, exclude_outside = false;
  };
  const std::vector<Interpolation> cases = {
      {"linear", "half_pixel"},       {"linear", "align_corners"},
      {"linear", "asymmetric"},       {"linear", "pytorch_half_pixel"},
      {"linear", "half_pixel", true}, {"cubic", "half_pixel"},
      {"cubic", "align_corners"},     {"cubic", "half_pixel", false, true},
      {"cubic", "asymmetric", true},
  };
  uint32_t seed = 6600;
  for (const Interpolation& m : cases) {
    SCOPED_TRACE(m.mode + " " + m.coordinates + (m.antialias ? " antialias" : "") +
                 (m.exclude_outside ? " exclude_outside" : ""));
    kernels::ResizeOptions options;
    options.mode = *kernels::parse_resize_mode(m.mode);
    options.coordinates = *kernels::parse_resize_coordinates(m.coordinates);
    options.antialias = m.antialias;
    options.exclude_outside = m.exclude_outside;
    expect_like_reference(
        {str("mode", m.mode), str("coordinate_transformation_mode", m.coordinates),
         int_attr("antialias", m.antialias ? 1 : 0),
         int_attr("exclude_outside", m.exclude_outside ? 1 : 0)},
        options, "kiln " + m.mode + " Resize", seed);
    seed += 100;
  }
}

// Layouts other than plain and nChw16c stay on oneDNN's resampling; cubic then has none.
TEST(ResizeLoops, LeavesOtherLayoutsToOneDnn) {
  const std::vector<int64_t> x = {1, 16, 4, 4};
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    SCOPED_TRACE(mode);
    // Modes oneDNN agrees with (its proof passes), for the two it has.
    const bool nearest = std::string(mode) == "nearest";
    Case c("Resize", {str("mode", mode),
                      str("coordinate_transformation_mode", nearest ? "asymmetric" : "half_pixel"),
                      str("nearest_mode", "floor")});
    c.desc.small_ops_own_loops = true;
    c.add(random_tensor(x, 6500), false);
    c.add_absent();
    c.add(OwnedTensor::of({4}, std::vector<float>{1, 1, 2, 2}), true);
    c.desc.input_layouts = {
        dnnl_impl::layout_bytes(dnnl::memory::desc({1, 16, 4, 4}, dnnl::memory::data_type::f32,
                                                   dnnl::memory::format_tag::nhwc)),
        "", ""};
    auto op = c.create();
    if (std::string(mode) == "cubic") {
      ASSERT_FALSE(op.ok());
      EXPECT_EQ(op.status().code(), runtime::Error::NotSupported);
      EXPECT_NE(op.status().message().find("'cubic'"), std::string::npos) << op.status();
      continue;
    }
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find("kiln "), std::string::npos) << (*op)->describe();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
