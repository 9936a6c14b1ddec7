// finish_sums (loop_epilogue.h): the epilogue kiln's GEMMs apply after their last step over K.
#include <kiln/engine/cpu/loop_epilogue.h>

#include <algorithm>
#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

KILN_VECTOR_CLONES void finish_sums(float* t, int64_t ldt, int rows, int64_t width, int64_t m0,
                                    int64_t n0, int64_t ldc, const Epilogue& e) {
  for (int r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; j += vec::kLanes) {
      const int64_t part = std::min(vec::kLanes, width - j);
      float padded[vec::kLanes] = {};
      const float* residual = padded;
      if (e.residual != nullptr) {
        residual = e.residual + (m0 + r) * ldc + n0 + j;
        if (part < vec::kLanes) {
          std::memcpy(padded, residual, sizeof(float) * static_cast<size_t>(part));
          residual = padded;
        }
      }
      float* at = t + r * ldt + j;
      vec::Floats v = vec::load(at);
      if (e.row_bias != nullptr) v += e.row_bias[m0 + r];
      vec::store(at, post_process(v, e, vec::load(residual)));
    }
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl
