#pragma once

// nChw16c (oneDNN's aBcd16b) for the CPU op tests: the layout kiln's loops and oneDNN's blocked
// kernels hand each other values in, and conversions of [N, C, H, W] tensors to and from it.
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/op_case.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::engine::cpu::test_support {

/// The nChw16c memory descriptor of f32 [N, C, H, W] `sizes` (C padded to blocks of 16).
inline dnnl::memory::desc blocked16_md(const std::vector<int64_t>& sizes) {
  return dnnl::memory::desc(dnnl_impl::to_dims(sizes), dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::aBcd16b);
}

/// Where element (n, c, pixel p) of [N, C, H, W] `sizes` lies in nChw16c.
inline int64_t blocked16_index(const std::vector<int64_t>& sizes, int64_t n, int64_t c, int64_t p) {
  const int64_t blocks = (sizes[1] + 15) / 16;
  return ((n * blocks + c / 16) * sizes[2] * sizes[3] + p) * 16 + c % 16;
}

/// `plain`'s values ([N, C, H, W]) in nChw16c, the padding lanes `pad` (oneDNN's results leave
/// them zero).
inline std::vector<float> to_blocked16(const runtime::Tensor& plain, float pad = 0.0f) {
  const std::vector<int64_t> s(plain.sizes().begin(), plain.sizes().end());
  std::vector<float> out(blocked16_md(s).get_size() / sizeof(float), pad);
  const float* v = plain.data_ptr<float>();
  const int64_t pixels = s[2] * s[3];
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      for (int64_t p = 0; p < pixels; ++p) {
        out[blocked16_index(s, n, c, p)] = v[(n * s[1] + c) * pixels + p];
      }
    }
  }
  return out;
}

/// The plain [N, C, H, W] `sizes` tensor of nChw16c `data` (its padding lanes dropped).
inline OwnedTensor from_blocked16(const std::vector<float>& data, const std::vector<int64_t>& s) {
  OwnedTensor out = zeros(s);
  float* v = out.tensor().mutable_data_ptr<float>();
  const int64_t pixels = s[2] * s[3];
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      for (int64_t p = 0; p < pixels; ++p)
        v[(n * s[1] + c) * pixels + p] = data[blocked16_index(s, n, c, p)];
    }
  }
  return out;
}

/// Runs a created Conv `op` of X (input 0) and a residual (input `residual`, the last of
/// `num_inputs`) twice, each of X, the residual and the output in nChw16c when asked (given
/// with zero padding lanes; the output's padding lanes checked zero after the runs) or plain,
/// after checking the layouts the op reports (`plain_input`: X has none, an image's Conv);
/// returns the output, plain.
inline OwnedTensor run_blocked16(CpuOp& op, const runtime::Tensor& x, const runtime::Tensor& res,
                                 size_t residual, size_t num_inputs, bool native_in,
                                 bool native_out, bool native_residual, bool plain_input = false) {
  using runtime::Tensor;
  const std::vector<int64_t> x_sizes(x.sizes().begin(), x.sizes().end());
  const std::vector<int64_t> out = op.outputs()[0].sizes;
  auto reports = [](const std::optional<CpuOp::NativeLayout>& layout,
                    const std::vector<int64_t>& sizes) {
    return layout.has_value() && layout->id == dnnl_impl::layout_bytes(blocked16_md(sizes));
  };
  EXPECT_EQ(reports(op.native_input_layout(0), x_sizes), !plain_input);
  EXPECT_TRUE(reports(op.native_output_layout(0), out));
  EXPECT_TRUE(reports(op.native_input_layout(residual), out));
  EXPECT_FALSE(op.native_input_layout(1).has_value());
  EXPECT_TRUE(!native_in || op.use_native_input(0).ok());
  EXPECT_TRUE(!native_out || op.use_native_output(0).ok());
  EXPECT_TRUE(!native_residual || op.use_native_input(residual).ok());
  EXPECT_TRUE(op.finish().ok());
  std::vector<float> x_data = to_blocked16(x, 0.0f), r_data = to_blocked16(res, 0.0f);
  Tensor x_native(runtime::ScalarType::Float32, x_sizes, x_data.data(),
                  runtime::ShapeDynamism::Static, x_data.size() * sizeof(float));
  Tensor r_native(runtime::ScalarType::Float32, out, r_data.data(), runtime::ShapeDynamism::Static,
                  r_data.size() * sizeof(float));
  std::vector<float> y_data(blocked16_md(out).get_size() / sizeof(float), std::nanf(""));
  Tensor y_native(runtime::ScalarType::Float32, out, y_data.data(), runtime::ShapeDynamism::Static,
                  y_data.size() * sizeof(float));
  OwnedTensor y_plain = zeros(out);
  std::vector<const Tensor*> inputs(num_inputs, nullptr);
  inputs[0] = native_in ? &x_native : &x;
  inputs[residual] = native_residual ? &r_native : &res;
  Tensor* y = native_out ? &y_native : &y_plain.tensor();
  for (int run = 0; run < 2; ++run) {
    EXPECT_TRUE(op.run(inputs, runtime::Span<Tensor*>(&y, 1)).ok());
  }
  if (!native_out) return y_plain;
  OwnedTensor plain = from_blocked16(y_data, out);
  const std::vector<float> zero_padded = to_blocked16(plain.tensor(), 0.0f);
  for (size_t i = 0; i < y_data.size(); ++i) {
    if (y_data[i] != zero_padded[i]) {
      ADD_FAILURE() << "padding element " << i << " is " << y_data[i] << " (expected 0)";
      break;
    }
  }
  return plain;
}

}  // namespace kiln::engine::cpu::test_support
