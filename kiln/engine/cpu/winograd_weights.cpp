// Winograd weight packing (winograd_weights.h). Each transformed kernel is
// U[i][j] = sum_k G[i][k] (sum_w g[k][w] G[j][w]), summed in that order, as oneDNN's reorder
// does, so the bytes match its own. The file is built without floating-point contraction
// (CMakeLists.txt) for the same reason: a fused multiply-add rounds differently.

#include <kiln/engine/cpu/vector_math.h>
#include <kiln/engine/cpu/winograd_weights.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using runtime::Error;
using runtime::Status;

constexpr int kKernel = 3;
constexpr int kBlock = static_cast<int>(vec::kLanes);

// oneDNN's transform matrices: F(2x2, 3x3) and its scaled F(4x4, 3x3).
constexpr float kG4[4][3] = {
    {1.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0.0f, 0.0f, 1.0f}};
constexpr float kG6[6][3] = {{1.13777777777778f, 0.f, 0.f},
                             {-0.688403361344538f, -0.430252100840336f, -0.26890756302521f},
                             {-0.688403361344538f, 0.430252100840336f, -0.26890756302521f},
                             {0.119514472455649f, 0.179271708683473f, 0.26890756302521f},
                             {0.119514472455649f, -0.179271708683473f, 0.26890756302521f},
                             {0.f, 0.f, 1.f}};

// Where element (a = u_h * alpha + u_w, input channel, output block) of a layout starts: the
// 16 output channels of the block follow one another.
struct Layout {
  dnnl_wino_memory_format_t format;
  int64_t alpha, ic_block, oc2, ic2, nb_ic, nb_oc;

  int64_t offset(int64_t a, int64_t ic, int64_t ob) const {
    if (format == dnnl_wino_wei_aaOio) return ((a * nb_oc + ob) * nb_ic * ic_block + ic) * kBlock;
    const int64_t ib = ic / ic_block, i = ic % ic_block;
    const int64_t occ = ob / oc2, o2 = ob % oc2;
    if (format == dnnl_wino_wei_aaOBiOo) {  // [a][oc chunk][ib][i][o2][o]
      return ((((a * (nb_oc / oc2) + occ) * nb_ic + ib) * ic_block + i) * oc2 + o2) * kBlock;
    }
    const int64_t icc = ib / ic2, i2 = ib % ic2;  // [oc chunk][a][icc][o2][i2][i][o]
    const int64_t row = (((occ * alpha * alpha + a) * (nb_ic / ic2) + icc) * oc2 + o2) * ic2 + i2;
    return (row * ic_block + i) * kBlock;
  }
};

// The kernels of input channels [0, ic) and output channels [ob * 16, ob * 16 + 16) (those at
// or above `oc` zero), transformed and stored.
template <int Alpha>
KILN_VECTOR_CLONES void pack_block(const float (&G)[Alpha][3], const Layout& layout,
                                   const float* oihw, int64_t oc, int64_t ic, int64_t ob,
                                   float* out) {
  const int64_t lanes = std::min<int64_t>(kBlock, oc - ob * kBlock);
  const int64_t stride = ic * kKernel * kKernel;
  for (int64_t c = 0; c < ic; ++c) {
    float in[kKernel * kKernel][kBlock] = {};
    for (int64_t o = 0; o < lanes; ++o) {
      const float* kernel = oihw + (ob * kBlock + o) * stride + c * kKernel * kKernel;
      for (int t = 0; t < kKernel * kKernel; ++t) in[t][o] = kernel[t];
    }
    vec::Floats ws[kKernel][Alpha];
    for (int k = 0; k < kKernel; ++k) {
      for (int j = 0; j < Alpha; ++j) {
        vec::Floats sum = vec::splat(0.0f);
        for (int w = 0; w < kKernel; ++w) sum += vec::load(in[k * kKernel + w]) * G[j][w];
        ws[k][j] = sum;
      }
    }
    for (int i = 0; i < Alpha; ++i) {
      for (int j = 0; j < Alpha; ++j) {
        vec::Floats sum = vec::splat(0.0f);
        for (int k = 0; k < kKernel; ++k) sum += G[i][k] * ws[k][j];
        vec::store(out + layout.offset(i * Alpha + j, c, ob), sum);
      }
    }
  }
}

}  // namespace

bool packs_winograd(const dnnl::memory::desc& target) {
  const dnnl_memory_desc_t& md = target.data;
  if (md.format_kind != dnnl_format_kind_wino || md.data_type != dnnl_f32) return false;
  const dnnl_wino_desc_t& w = md.format_desc.wino_desc;
  const bool two =
      (w.wino_format == dnnl_wino_wei_aaOBiOo || w.wino_format == dnnl_wino_wei_aaOio) &&
      w.alpha == 4;
  const bool four = w.wino_format == dnnl_wino_wei_OBaaIBOIio && w.alpha == 6;
  if (!(two || four) || w.r != kKernel || w.oc_block != kBlock || w.ic_block <= 0 ||
      w.oc2_block <= 0 || w.oc <= 0 || w.ic <= 0 || w.oc % kBlock != 0 || w.ic % w.ic_block != 0 ||
      (w.oc / kBlock) % w.oc2_block != 0) {
    return false;
  }
  if (four && (w.ic2_block <= 0 || (w.ic / w.ic_block) % w.ic2_block != 0)) return false;
  const size_t bytes = sizeof(float) * static_cast<size_t>(w.alpha) * static_cast<size_t>(w.alpha) *
                       static_cast<size_t>(w.oc) * static_cast<size_t>(w.ic);
  return target.get_size() >= bytes;
}

Status pack_winograd_weights(const dnnl::memory::desc& target, const float* oihw, int64_t oc,
                             int64_t ic, void* out) {
  if (!packs_winograd(target)) {
    return Status(Error::InvalidArgument,
                  "Winograd packing: the target layout is not oneDNN's f32 aaOBiOo or aaOio "
                  "(alpha 4) or OBaaIBOIio (alpha 6) with 16-channel output blocks");
  }
  const dnnl_wino_desc_t& w = target.data.format_desc.wino_desc;
  if (oc <= 0 || ic <= 0 || oc > w.oc || ic > w.ic) {
    return Status(Error::InvalidArgument, "Winograd packing: weights of " + std::to_string(oc) +
                                              " x " + std::to_string(ic) +
                                              " channels do not fit the layout's " +
                                              std::to_string(w.oc) + " x " + std::to_string(w.ic));
  }
  Layout layout{w.wino_format, w.alpha,           w.ic_block,   w.oc2_block,
                w.ic2_block,   w.ic / w.ic_block, w.oc / kBlock};
  auto* dst = static_cast<float*>(out);
  // The blocks below write every output channel up to a whole block (zero lanes past `oc`) for
  // input channels [0, ic); the rest (padded input channels, whole padded output blocks) is
  // zeroed first, only when the layout has any.
  const int64_t written_oc = (oc + kBlock - 1) / kBlock * kBlock;
  if (ic < w.ic || written_oc < w.oc) std::memset(dst, 0, target.get_size());
  for (int64_t ob = 0; ob * kBlock < oc; ++ob) {
    if (w.alpha == 6) {
      pack_block<6>(kG6, layout, oihw, oc, ic, ob, dst);
    } else {
      pack_block<4>(kG4, layout, oihw, oc, ic, ob, dst);
    }
  }
  return Status();
}

}  // namespace kiln::engine::cpu::dnnl_impl
