// Resize on oneDNN in its producer's layout (nhwc, nChw16c, nChw8c) against the reference
// kernel on seeded random data: plain tensors converted through the op's buffers, and the
// source and result handed over natively. Every op runs with num_threads = 1.

#include <kiln/engine/cpu/dnnl_common.h>
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
using tag = dnnl::memory::format_tag;

/// `plain` (f32 NCHW, `sizes`) reordered into `md`'s bytes.
std::vector<float> to_layout(const float* plain, const std::vector<int64_t>& sizes,
                             const dnnl::memory::desc& md) {
  std::vector<float> bytes(md.get_size() / sizeof(float), 0.0f);
  dnnl::memory from = dnnl_impl::wrap(dnnl_impl::plain_md(sizes), plain);
  dnnl::memory to = dnnl_impl::wrap(md, bytes.data());
  dnnl::reorder(from, to).execute(dnnl_impl::cpu_stream(), from, to);
  dnnl_impl::cpu_stream().wait();
  return bytes;
}

dnnl::memory::desc layout(const std::vector<int64_t>& sizes, tag format) {
  return dnnl::memory::desc(dnnl::memory::dims(sizes.begin(), sizes.end()),
                            dnnl::memory::data_type::f32, format);
}

TEST(DnnlResizeLayouts, RunsInTheProducersLayoutPlainOrNative) {
  struct Mode {
    std::string mode, coordinates;
  };
  const std::vector<Mode> modes = {{"nearest", "asymmetric"}, {"linear", "half_pixel"}};
  const std::vector<int64_t> x_sizes = {2, 16, 5, 7}, y_sizes = {2, 16, 10, 14};
  uint32_t seed = 4000;
  for (tag format : {tag::nhwc, tag::nChw16c, tag::nChw8c}) {
    for (const Mode& m : modes) {
      SCOPED_TRACE(m.mode + " format " + std::to_string(static_cast<int>(format)));
      Case c("Resize", {str("mode", m.mode), str("coordinate_transformation_mode", m.coordinates),
                        str("nearest_mode", "floor")});
      c.add(random_tensor(x_sizes, seed++), false);
      c.add_absent();
      c.add(OwnedTensor::of({4}, std::vector<float>{1, 1, 2, 2}), true);
      const dnnl::memory::desc x_md = layout(x_sizes, format), y_md = layout(y_sizes, format);
      c.desc.input_layouts = {dnnl_impl::layout_bytes(x_md), "", ""};
      kernels::ResizeOptions options;
      options.mode = *kernels::parse_resize_mode(m.mode);
      options.coordinates = *kernels::parse_resize_coordinates(m.coordinates);
      options.nearest = kernels::ResizeNearest::Floor;
      const std::vector<double> scales = {1, 1, 2, 2};
      auto plan = kernels::resize_plan(c.at(0).sizes(), nullptr, &scales, nullptr, options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      OwnedTensor expected = zeros(y_sizes);
      ASSERT_TRUE(kernels::resize(c.at(0), *plan, options, expected.tensor()).ok());

      auto op = c.create();
      ASSERT_TRUE(op.ok()) << op.status();
      ASSERT_TRUE((*op)->native_input_layout(0).has_value()) << (*op)->describe();
      EXPECT_EQ((*op)->native_input_layout(0)->id, dnnl_impl::layout_bytes(x_md));
      ASSERT_TRUE((*op)->native_output_layout(0).has_value());
      EXPECT_EQ((*op)->native_output_layout(0)->id, dnnl_impl::layout_bytes(y_md));
      expect_near(c.run(**op), expected);  // Plain in and out, converted by the op.
      {
        // The conversions' buffers placed in shared scratch memory hold nothing between runs.
        auto placed_op = c.create();
        ASSERT_TRUE(placed_op.ok()) << placed_op.status();
        uint64_t placed = 0;
        expect_near(c.run_in_spoiled_scratch(**placed_op, placed), expected);
        EXPECT_GE(placed, x_md.get_size() + y_md.get_size());  // both conversions' buffers
      }

      ASSERT_TRUE((*op)->use_native_input(0).ok());
      ASSERT_TRUE((*op)->use_native_output(0).ok());
      std::vector<float> x_native = to_layout(c.at(0).data_ptr<float>(), x_sizes, x_md);
      Tensor x_tensor(ScalarType::Float32, x_sizes, x_native.data(), runtime::ShapeDynamism::Static,
                      x_native.size() * sizeof(float));
      // One float past a 64-byte boundary: the op's aligned-buffer copy covers native output.
      std::vector<float> storage(y_md.get_size() / sizeof(float) + 32, 0.0f);
      const auto base = reinterpret_cast<uintptr_t>(storage.data());
      float* at = storage.data() + (64 - base % 64) % 64 / sizeof(float) + 1;
      Tensor y_tensor(ScalarType::Float32, y_sizes, at, runtime::ShapeDynamism::Static,
                      y_md.get_size());
      const Tensor* in[] = {&x_tensor, nullptr, nullptr};
      Tensor* out = &y_tensor;
      ASSERT_TRUE(
          (*op)->run(runtime::Span<const Tensor*>(in, 3), runtime::Span<Tensor*>(&out, 1)).ok());
      std::vector<float> want = to_layout(expected.tensor().data_ptr<float>(), y_sizes, y_md);
      int failures = 0;
      for (size_t i = 0; i < want.size() && failures < 5; ++i) {
        if (!(std::fabs(at[i] - want[i]) <= 1e-5 + 1e-4 * std::fabs(want[i]))) {
          ADD_FAILURE() << "native element " << i << ": " << at[i] << " (expected " << want[i]
                        << ")";
          ++failures;
        }
      }
    }
  }
}

TEST(DnnlResizeLayouts, OtherHintsStayPlain) {
  const std::vector<int64_t> x_sizes = {1, 16, 4, 4};
  Case c("Resize", {str("mode", "nearest"), str("coordinate_transformation_mode", "asymmetric"),
                    str("nearest_mode", "floor")});
  c.add(random_tensor(x_sizes, 4100), false);
  c.add_absent();
  c.add(OwnedTensor::of({4}, std::vector<float>{1, 1, 2, 2}), true);
  for (tag format : {tag::nchw, tag::nChw4c}) {
    c.desc.input_layouts = {dnnl_impl::layout_bytes(layout(x_sizes, format)), "", ""};
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_FALSE((*op)->native_input_layout(0).has_value()) << (*op)->describe();
    EXPECT_FALSE((*op)->native_output_layout(0).has_value()) << (*op)->describe();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
