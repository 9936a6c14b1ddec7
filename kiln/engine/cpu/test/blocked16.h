#pragma once

// nChw16c (oneDNN's aBcd16b) for the CPU op tests: the layout kiln's loops and oneDNN's blocked
// kernels hand each other values in, and conversions of [N, C, H, W] tensors to and from it.
#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/op_case.h>

#include <cstdint>
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

}  // namespace kiln::engine::cpu::test_support
