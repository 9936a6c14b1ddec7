#pragma once

// Test support: plain tensors in oneDNN's layouts (the bytes a producer hands over natively).

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/runtime/core/tensor.h>

#include <vector>

namespace kiln::engine::cpu::test_support {

/// `plain` (f32, dense row-major) reordered by oneDNN into `md`'s bytes (padding zero).
inline std::vector<float> to_layout(const runtime::Tensor& plain, const dnnl::memory::desc& md) {
  std::vector<float> bytes(md.get_size() / sizeof(float), 0.0f);
  dnnl::memory from = dnnl_impl::wrap(
      dnnl_impl::plain_md(runtime::Span<const int64_t>(plain.sizes().data(), plain.sizes().size())),
      plain.data());
  dnnl::memory to = dnnl_impl::wrap(md, bytes.data());
  dnnl::reorder(from, to).execute(dnnl_impl::cpu_stream(), from, to);
  dnnl_impl::cpu_stream().wait();
  return bytes;
}

}  // namespace kiln::engine::cpu::test_support
