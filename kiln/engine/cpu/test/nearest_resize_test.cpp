// Resize of mode nearest on kiln's loops (nearest_resize.cpp) against the reference kernel on
// seeded random data: each coordinate mode and nearest rounding, up- and downscales, scales
// and sizes, channel counts around the blocks of 16, batches, threads; plain, or in a
// producer's nChw16c with the input and the output each native or plain.

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

TEST(NearestResize, MatchesTheReferencePlainOrInNChw16c) {
  const std::vector<Mode> modes = {{"asymmetric", "floor"},
                                   {"half_pixel", "round_prefer_floor"},
                                   {"align_corners", "round_prefer_ceil"},
                                   {"pytorch_half_pixel", "ceil"}};
  struct Shape {
    std::vector<int64_t> x;
    std::vector<float> scales;
  };
  const std::vector<Shape> shapes = {
      {{1, 16, 5, 7}, {1, 1, 2, 2}},        // an FPN's x2
      {{2, 20, 3, 4}, {1, 1, 8, 8}},        // a batch, a padded block, x8
      {{1, 40, 9, 6}, {1, 1, 0.5f, 1.5f}},  // down and up, three blocks
  };
  uint32_t seed = 6400;
  for (int threads : {1, 2}) {
    for (const Mode& m : modes) {
      for (const Shape& s : shapes) {
        for (int layout = 0; layout < 5; ++layout) {
          // 0: plain; 1-4: nChw16c with the input (bit 0) and the output (bit 1) native.
          const bool blocked = layout > 0, native_in = ((layout - 1) & 1) != 0,
                     native_out = ((layout - 1) & 2) != 0;
          SCOPED_TRACE(m.coordinates + " " + m.nearest + " " + runtime::shape_to_string(s.x) +
                       " layout " + std::to_string(layout) + ", " + std::to_string(threads) +
                       " thread(s)");
          Case c("Resize",
                 {str("mode", "nearest"), str("coordinate_transformation_mode", m.coordinates),
                  str("nearest_mode", m.nearest)});
          c.desc.small_ops_own_loops = true;
          c.desc.num_threads = threads;
          c.add(random_tensor(s.x, seed++), false);
          c.add_absent();
          c.add(OwnedTensor::of({4}, std::vector<float>(s.scales)), true);
          if (blocked) c.desc.input_layouts = {dnnl_impl::layout_bytes(blocked16_md(s.x)), "", ""};
          kernels::ResizeOptions options;
          options.coordinates = *kernels::parse_resize_coordinates(m.coordinates);
          options.nearest = *kernels::parse_resize_nearest(m.nearest);
          const std::vector<double> scales(s.scales.begin(), s.scales.end());
          auto plan = kernels::resize_plan(s.x, nullptr, &scales, nullptr, options);
          ASSERT_TRUE(plan.ok()) << plan.status();
          OwnedTensor expected = zeros(plan->sizes);
          ASSERT_TRUE(kernels::resize(c.at(0), *plan, options, expected.tensor()).ok());

          auto op_or = c.create();
          ASSERT_TRUE(op_or.ok()) << op_or.status();
          CpuOp& op = **op_or;
          ASSERT_NE(op.describe().find(kNearest), std::string::npos) << op.describe();
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
              op.run(runtime::Span<const Tensor*>(inputs, 3), runtime::Span<Tensor*>(&out, 1))
                  .ok());
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
}

// Other layouts than nChw16c, and other modes, stay on oneDNN's resampling.
TEST(NearestResize, LeavesOtherLayoutsAndModesToOneDnn) {
  const std::vector<int64_t> x = {1, 16, 4, 4};
  for (int which = 0; which < 2; ++which) {
    Case c("Resize",
           {str("mode", which == 0 ? "nearest" : "linear"),
            str("coordinate_transformation_mode", which == 0 ? "asymmetric" : "half_pixel"),
            str("nearest_mode", "floor")});
    c.desc.small_ops_own_loops = true;
    c.add(random_tensor(x, 6500), false);
    c.add_absent();
    c.add(OwnedTensor::of({4}, std::vector<float>{1, 1, 2, 2}), true);
    if (which == 0) {
      c.desc.input_layouts = {
          dnnl_impl::layout_bytes(dnnl::memory::desc({1, 16, 4, 4}, dnnl::memory::data_type::f32,
                                                     dnnl::memory::format_tag::nhwc)),
          "", ""};
    }
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->describe().find(kNearest), std::string::npos) << (*op)->describe();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
