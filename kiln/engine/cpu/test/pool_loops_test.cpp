// MaxPool and AveragePool on kiln's loops (pool_loops.cpp) against the reference kernel on
// seeded random data: windows, strides, pads, dilations, ceil_mode, count_include_pad and
// SAME padding, channel counts around the 16 lanes, threads; nChw16c and nhwc read and written
// natively in every combination; and the pools they leave to oneDNN or the reference.

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

struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t ceil = 0, include_pad = 0;
  std::string auto_pad = "NOTSET";
};

std::string name_of(const std::string& op, const Window& w) {
  return op + " k" + runtime::shape_to_string(w.kernel) + " s" +
         runtime::shape_to_string(w.strides) + " p" + runtime::shape_to_string(w.pads) + " d" +
         runtime::shape_to_string(w.dilations) + " ceil" + std::to_string(w.ceil) + " include_pad" +
         std::to_string(w.include_pad) + " " + w.auto_pad;
}

Case pool_case(const std::string& op, const Window& w) {
  std::vector<ir::Attribute> attributes = {
      ints("kernel_shape", w.kernel), int_attr("ceil_mode", w.ceil), str("auto_pad", w.auto_pad)};
  if (!w.strides.empty()) attributes.push_back(ints("strides", w.strides));
  if (!w.pads.empty()) attributes.push_back(ints("pads", w.pads));
  if (!w.dilations.empty()) attributes.push_back(ints("dilations", w.dilations));
  if (op == "AveragePool") attributes.push_back(int_attr("count_include_pad", w.include_pad));
  Case c(op, attributes);
  c.desc.small_ops_own_loops = true;
  return c;
}

OwnedTensor reference(const std::string& op, const Window& w, const Tensor& x) {
  kernels::PoolOptions options;
  options.kernel_shape = w.kernel;
  options.strides = w.strides;
  options.pads = w.pads;
  options.dilations = w.dilations;
  options.ceil_mode = w.ceil != 0;
  options.count_include_pad = w.include_pad != 0;
  auto parsed = kernels::parse_auto_pad(op, w.auto_pad);
  EXPECT_TRUE(parsed.ok());
  options.auto_pad = *parsed;
  auto shape =
      kernels::pool_shape(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()), options);
  EXPECT_TRUE(shape.ok()) << shape.status();
  OwnedTensor expected = zeros(*shape);
  runtime::Status status = op == "MaxPool"
                               ? kernels::max_pool(x, options, expected.tensor(), nullptr)
                               : kernels::average_pool(x, options, expected.tensor());
  EXPECT_TRUE(status.ok()) << status;
  return expected;
}

const std::vector<Window>& windows() {
  static const std::vector<Window> all = {
      {{2, 2}, {2, 2}, {}, {}},                      // a classifier's downsampling
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}},            // ResNet's stem
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, 1},      // pads counted
      {{3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, 1},      // stride 1
      {{3, 3}, {2, 2}, {}, {}, 1},                   // ceil_mode (SqueezeNet)
      {{3, 3}, {3, 3}, {1, 1, 1, 1}, {}, 1, 1},      // ceil_mode's extra padding not counted
      {{2, 3}, {1, 2}, {0, 1, 1, 0}, {}},            // uneven kernel, strides and pads
      {{2, 2}, {1, 1}, {}, {2, 2}},                  // dilations
      {{3, 3}, {2, 2}, {}, {}, 0, 0, "SAME_UPPER"},  // SAME padding
      {{5, 5}, {1, 1}, {2, 2, 2, 2}, {}, 0, 0},      // a wide window
  };
  return all;
}

TEST(PoolLoops, MatchTheReferenceOnPlainTensorsOverWindowsChannelsAndThreads) {
  // Plain pools of little work (under 0.5 us: what the reference kernel took before).
  const std::vector<std::vector<int64_t>> shapes = {
      {1, 16, 8, 8}, {2, 5, 11, 10}, {1, 20, 7, 7}, {3, 33, 4, 5}};
  uint32_t seed = 4100;
  for (int threads : {1, 2}) {
    for (const std::string op : {"MaxPool", "AveragePool"}) {
      for (const Window& w : windows()) {
        for (const auto& shape : shapes) {
          SCOPED_TRACE(name_of(op, w) + " on " + runtime::shape_to_string(shape) + ", " +
                       std::to_string(threads) + " thread(s)");
          Case c = pool_case(op, w);
          c.desc.num_threads = threads;
          c.add(random_tensor(shape, seed++), false);
          OwnedTensor expected = reference(op, w, c.at(0));
          expect_near(c.run(), expected);
          EXPECT_NE(c.description.find("kiln " + op), std::string::npos) << c.description;
        }
      }
    }
  }
}

enum class Layout { Blocked16, Nhwc };

dnnl::memory::desc layout_md(Layout layout, const std::vector<int64_t>& sizes) {
  return dnnl::memory::desc(dnnl_impl::to_dims(sizes), dnnl::memory::data_type::f32,
                            layout == Layout::Blocked16 ? dnnl::memory::format_tag::aBcd16b
                                                        : dnnl::memory::format_tag::acdb);
}

// Element (n, c, h, w)'s index in `layout`.
int64_t index_in(Layout layout, const std::vector<int64_t>& s, int64_t n, int64_t c, int64_t h,
                 int64_t w) {
  if (layout == Layout::Nhwc) return ((n * s[2] + h) * s[3] + w) * s[1] + c;
  const int64_t groups = (s[1] + 15) / 16;
  return (((n * groups + c / 16) * s[2] + h) * s[3] + w) * 16 + c % 16;
}

// `plain`'s values in `layout`; the padding of a blocked layout is `pad`.
std::vector<float> to_layout(Layout layout, const Tensor& plain, float pad) {
  const std::vector<int64_t> s(plain.sizes().begin(), plain.sizes().end());
  std::vector<float> out(layout_md(layout, s).get_size() / sizeof(float), pad);
  const float* p = plain.data_ptr<float>();
  int64_t i = 0;
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      for (int64_t h = 0; h < s[2]; ++h) {
        for (int64_t w = 0; w < s[3]; ++w) out[index_in(layout, s, n, c, h, w)] = p[i++];
      }
    }
  }
  return out;
}

OwnedTensor from_layout(Layout layout, const std::vector<float>& data,
                        const std::vector<int64_t>& s) {
  OwnedTensor out = zeros(s);
  float* p = out.tensor().mutable_data_ptr<float>();
  int64_t i = 0;
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      for (int64_t h = 0; h < s[2]; ++h) {
        for (int64_t w = 0; w < s[3]; ++w) p[i++] = data[index_in(layout, s, n, c, h, w)];
      }
    }
  }
  return out;
}

// A producer computing in nChw16c or nhwc: the loops read that layout natively and write the
// same, each side given natively or plain.
TEST(PoolLoops, ReadAndWriteNChw16cAndNhwcNativelyOrPlain) {
  const std::vector<std::vector<int64_t>> shapes = {{10, 32, 4, 4}, {2, 20, 9, 7}, {1, 5, 6, 6}};
  uint32_t seed = 4300;
  for (Layout layout : {Layout::Blocked16, Layout::Nhwc}) {
    for (const std::string op : {"MaxPool", "AveragePool"}) {
      for (const Window& w : {windows()[0], windows()[2], windows()[4], windows()[6]}) {
        for (const auto& shape : shapes) {
          for (int native : {0, 1, 2, 3}) {  // bit 0: input native, bit 1: output native
            const bool native_in = (native & 1) != 0, native_out = (native & 2) != 0;
            SCOPED_TRACE(name_of(op, w) + " on " + runtime::shape_to_string(shape) +
                         (layout == Layout::Blocked16 ? " nChw16c" : " nhwc") +
                         (native_in ? ", native in" : "") + (native_out ? ", native out" : ""));
            Case c = pool_case(op, w);
            c.add(random_tensor(shape, seed++), false);
            c.desc.input_layouts = {dnnl_impl::layout_bytes(layout_md(layout, shape))};
            OwnedTensor expected = reference(op, w, c.at(0));
            const std::vector<int64_t> out_sizes(expected.tensor().sizes().begin(),
                                                 expected.tensor().sizes().end());
            auto op_or = c.create();
            ASSERT_TRUE(op_or.ok()) << op_or.status();
            CpuOp& pool = **op_or;
            ASSERT_TRUE(pool.native_input_layout(0).has_value()) << pool.describe();
            ASSERT_TRUE(pool.native_output_layout(0).has_value());
            EXPECT_EQ(pool.native_input_layout(0)->id, c.desc.input_layouts[0]);
            EXPECT_EQ(pool.native_output_layout(0)->id,
                      dnnl_impl::layout_bytes(layout_md(layout, out_sizes)));
            if (native_in) {
              ASSERT_TRUE(pool.use_native_input(0).ok());
            }
            if (native_out) {
              ASSERT_TRUE(pool.use_native_output(0).ok());
            }
            ASSERT_TRUE(pool.finish().ok());

            // The input's padding lanes are NaN: whatever they hold, the output's stay zero.
            std::vector<float> in_data = to_layout(layout, c.at(0), std::nanf(""));
            Tensor native_in_tensor(ScalarType::Float32, shape, in_data.data(),
                                    runtime::ShapeDynamism::Static, in_data.size() * sizeof(float));
            const Tensor* in = native_in ? &native_in_tensor : &c.at(0);
            // Output padding lanes start as NaN: the loops must leave them zero.
            std::vector<float> out_data(layout_md(layout, out_sizes).get_size() / sizeof(float),
                                        std::nanf(""));
            Tensor native_out_tensor(ScalarType::Float32, out_sizes, out_data.data(),
                                     runtime::ShapeDynamism::Static,
                                     out_data.size() * sizeof(float));
            OwnedTensor plain_out = zeros(out_sizes);
            Tensor* out = native_out ? &native_out_tensor : &plain_out.tensor();
            ASSERT_TRUE(
                pool.run(runtime::Span<const Tensor*>(&in, 1), runtime::Span<Tensor*>(&out, 1))
                    .ok());
            if (!native_out) {
              expect_near(plain_out, expected);
              continue;
            }
            expect_near(from_layout(layout, out_data, out_sizes), expected);
            if (layout == Layout::Blocked16) {
              const std::vector<float> zero_padded =
                  to_layout(layout, from_layout(layout, out_data, out_sizes).tensor(), 0.0f);
              for (size_t i = 0; i < out_data.size(); ++i) {
                ASSERT_EQ(out_data[i], zero_padded[i]) << "padding element " << i;
              }
            }
          }
        }
      }
    }
  }
}

// A map in a producer's layout larger than the loops take by default goes to oneDNN's
// kernel, unless the op avoids generated code (a function expecting frequent reshapes): then
// the loops read and write it natively, with no staging, at 1 and 2 threads (a partial group
// of nhwc channels staged).
TEST(PoolLoops, TakeLargeMapsWhenAvoidingGeneratedCode) {
  struct Large {
    Layout layout;
    std::vector<int64_t> shape;
    int threads;
  };
  const std::vector<Large> larges = {{Layout::Blocked16, {1, 16, 96, 96}, 1},
                                     {Layout::Blocked16, {2, 40, 40, 40}, 2},
                                     {Layout::Nhwc, {1, 20, 48, 48}, 2}};
  uint32_t seed = 4700;
  for (const Large& l : larges) {
    for (bool avoid : {false, true}) {
      SCOPED_TRACE(runtime::shape_to_string(l.shape) +
                   (l.layout == Layout::Blocked16 ? " nChw16c" : " nhwc") +
                   (avoid ? ", avoiding generated code" : ""));
      const Window& w = windows()[1];
      Case c = pool_case("MaxPool", w);
      c.desc.num_threads = l.threads;
      c.desc.avoid_generated_code = avoid;
      c.add(random_tensor(l.shape, seed++), false);
      c.desc.input_layouts = {dnnl_impl::layout_bytes(layout_md(l.layout, l.shape))};
      OwnedTensor expected = reference("MaxPool", w, c.at(0));
      const std::vector<int64_t> out_sizes(expected.tensor().sizes().begin(),
                                           expected.tensor().sizes().end());
      auto op_or = c.create();
      ASSERT_TRUE(op_or.ok()) << op_or.status();
      CpuOp& pool = **op_or;
      EXPECT_EQ(pool.describe().find("kiln MaxPool") != std::string::npos, avoid)
          << pool.describe();
      if (!avoid) continue;
      ASSERT_TRUE(pool.use_native_input(0).ok());
      ASSERT_TRUE(pool.use_native_output(0).ok());
      ASSERT_TRUE(pool.finish().ok());
      std::vector<float> in_data = to_layout(l.layout, c.at(0), 0.0f);
      Tensor in_tensor(ScalarType::Float32, l.shape, in_data.data(), runtime::ShapeDynamism::Static,
                       in_data.size() * sizeof(float));
      std::vector<float> out_data(layout_md(l.layout, out_sizes).get_size() / sizeof(float),
                                  std::nanf(""));
      Tensor out_tensor(ScalarType::Float32, out_sizes, out_data.data(),
                        runtime::ShapeDynamism::Static, out_data.size() * sizeof(float));
      const Tensor* in = &in_tensor;
      Tensor* out = &out_tensor;
      ASSERT_TRUE(
          pool.run(runtime::Span<const Tensor*>(&in, 1), runtime::Span<Tensor*>(&out, 1)).ok());
      expect_near(from_layout(l.layout, out_data, out_sizes), expected);
    }
  }
}

TEST(PoolLoops, LeaveOtherPoolsToOneDnnOrTheReference) {
  struct Other {
    std::string why;
    std::vector<int64_t> shape;
    std::vector<int64_t> kernel;
    int outputs = 1;
    std::vector<PostOp> post_ops;
    bool blocked = false;
  };
  const std::vector<Other> others = {
      {"3-D", {1, 4, 6, 6, 6}, {2, 2, 2}, 1, {}},
      {"plain, more than a little work", {10, 16, 8, 8}, {2, 2}, 1, {}},
      {"nChw16c, over 2^13 elements", {1, 32, 16, 17}, {2, 2}, 1, {}, true},
      {"MaxPool's Indices", {1, 4, 8, 8}, {2, 2}, 2, {}},
      {"post-ops", {1, 4, 8, 8}, {2, 2}, 1, {{PostOpKind::Relu}}},
  };
  uint32_t seed = 4500;
  for (const Other& o : others) {
    SCOPED_TRACE(o.why);
    Case c("MaxPool", {ints("kernel_shape", o.kernel)});
    c.desc.small_ops_own_loops = true;
    c.desc.num_outputs = o.outputs;
    c.desc.post_ops = o.post_ops;
    c.add(random_tensor(o.shape, seed++), false);
    if (o.blocked)
      c.desc.input_layouts = {dnnl_impl::layout_bytes(layout_md(Layout::Blocked16, o.shape))};
    auto op = c.create();
    if (op.ok()) {
      EXPECT_EQ((*op)->describe().find("kiln MaxPool"), std::string::npos) << (*op)->describe();
    } else {
      EXPECT_EQ(op.error(), runtime::Error::NotSupported) << op.status();
    }
  }
}

TEST(PoolLoops, RejectAWindowLargerThanThePaddedInput) {
  Case c = pool_case("MaxPool", Window{{5, 5}, {1, 1}, {}, {}});
  c.add(random_tensor({1, 4, 3, 3}, 4600), false);
  auto op = c.create();
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), runtime::Error::InvalidArgument) << op.status();
  EXPECT_NE(op.status().message().find("MaxPool"), std::string::npos) << op.status();
}

// Kernel sizes below 1, and sizes, pads, kernel and dilation whose window overflows 64 bits
// (a package's attributes may hold any int64), are refused by name before any window is laid
// out: a kernel of -2^62 once sized a vector of 2^62 windows, and the process aborted.
TEST(PoolLoops, RejectKernelsBelowOneAndWindowsOverflowing64Bits) {
  const int64_t huge = int64_t{1} << 62;
  struct Bad {
    Window window;
    const char* says;
  };
  for (const Bad& bad : std::vector<Bad>{
           {Window{{-5, 2}, {2, 2}, {}, {}},
            "kernel size -5 on spatial axis 0 (expected at least 1)"},
           {Window{{-huge, 2}, {2, 2}, {}, {}}, "expected at least 1"},
           {Window{{huge, 2}, {1, 1}, {}, {4, 1}}, "overflow 64 bits"},
           {Window{{2, 2}, {1, 1}, {0, huge, 0, huge}, {}}, "holds 4611686018427387904"}}) {
    Case c = pool_case("MaxPool", bad.window);
    c.add(random_tensor({1, 4, 6, 6}, 4601), false);
    auto op = c.create();
    ASSERT_FALSE(op.ok()) << bad.says;
    EXPECT_EQ(op.error(), runtime::Error::InvalidArgument) << op.status();
    EXPECT_NE(op.status().message().find(bad.says), std::string::npos) << op.status();
  }
}

// An empty input of a huge spatial size (a package's shapes may hold any) gives an empty output:
// nothing to compute, so nothing laid out. Its 2^50 column windows were once allocated (the
// engine fuzzer: 2^55 bytes asked).
TEST(PoolLoops, AnEmptyOutputLaysOutNoWindowsWhateverItsOtherSizes) {
  const int64_t wide = int64_t{1} << 50;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{0, 4, 4, wide}, std::vector<int64_t>{1, 0, wide, 4}}) {
    Case c = pool_case("MaxPool", Window{{2, 2}, {1, 1}, {}, {}});
    c.add(random_tensor(shape, 4602), false);
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    const std::vector<int64_t>& y = (*op)->outputs()[0].sizes;
    EXPECT_EQ(std::count(y.begin(), y.end(), 0), 1) << runtime::shape_to_string(y);
    runtime::Tensor x(runtime::ScalarType::Float32, shape, nullptr);
    runtime::Tensor out(runtime::ScalarType::Float32, y, nullptr);
    const runtime::Tensor* in[] = {&x};
    runtime::Tensor* outs[] = {&out};
    EXPECT_TRUE((*op)->run(in, outs).ok());
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
