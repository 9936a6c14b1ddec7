#pragma once
// Winograd weight packing: 3x3 Conv weights transformed (U = G g Gᵀ) and laid out as oneDNN's
// Winograd convolutions read them. oneDNN's own reorder for these layouts transforms one
// kernel at a time in scalar loops (about 10 ms for 256x256 weights, most of a ResNet's cold
// load); this one runs 16 output channels per vector and writes the same bytes.

#include <kiln/runtime/core/status.h>

#include <dnnl.hpp>

#include <cstdint>

namespace kiln::engine::cpu::dnnl_impl {

/// Whether `target` is a Winograd weight layout that pack_winograd_weights writes: oneDNN's
/// F(2x2, 3x3) `aaOBiOo` and `aaOio` or F(4x4, 3x3) `OBaaIBOIio` f32 layouts with 16-channel
/// output blocks.
bool packs_winograd(const dnnl::memory::desc& target);

/// Writes the f32 weights `oihw` ([oc][ic][3][3]) into `out` (target.get_size() bytes) in the
/// Winograd layout `target`; channels the layout pads are zero. InvalidArgument when `target`
/// is not a layout packs_winograd accepts or does not fit `oc` and `ic`.
runtime::Status pack_winograd_weights(const dnnl::memory::desc& target, const float* oihw,
                                      int64_t oc, int64_t ic, void* out);

}  // namespace kiln::engine::cpu::dnnl_impl
