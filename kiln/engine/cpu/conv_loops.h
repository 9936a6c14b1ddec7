#pragma once
// The loops of kiln's own blocked Convs (blocked_conv.cpp): nChw16c in and out, each output
// vector 16 output channels of one pixel, a tile up to 12 pixels by two such vectors.

#include <kiln/engine/cpu/cpu_op.h>

#include <cstdint>

namespace kiln::engine::cpu::dnnl_impl {

// One run's work, in plain values.
struct ConvJob {
  const float* x = nullptr;         // [N][C16 / 16][H][W][16]
  const float* w = nullptr;         // [OB][C16 / 16][KH][KW][16 input][16 output]
  const float* bias = nullptr;      // [OB x 16], or null
  const float* residual = nullptr;  // the output's layout, or null
  float* y = nullptr;               // [N][OB][OH][OW][16]
  int64_t channels = 0, c16 = 0, blocks_out = 0;
  int64_t pixels = 0;  // the output's (OH x OW)
  // The geometry of a Conv of taps (spatial_range); a 1x1 Conv's input is read as its pixels.
  int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
  const PostOp* ops = nullptr;
  size_t num_ops = 0;
  // 1 for each lane of the last output block that is a channel, 0 for its padding (which the
  // loops write zero, whatever the post-ops make of a zero sum).
  const float* last_lanes = nullptr;
};

// A 1x1 Conv without pads or strides: output blocks [ob_begin, ob_end) of pixels
// [p_begin, p_end) of image n.
void pointwise_range(const ConvJob& j, int64_t n, int64_t ob_begin, int64_t ob_end, int64_t p_begin,
                     int64_t p_end);

// A Conv of taps (any kernel, stride 1 or 2, pads, no dilation): output blocks
// [ob_begin, ob_end) of output rows [row_begin, row_end) of image n.
void spatial_range(const ConvJob& j, int64_t n, int64_t ob_begin, int64_t ob_end, int64_t row_begin,
                   int64_t row_end);

// The raw sums that a Conv's tiles stored in j.y for blocks [ob, ob + blocks) of `count` output
// pixels from p0 of image n, finished in place: biases, then the post-ops in order (a residual
// read in the output's layout), then the last block's padding lanes zero.
void finish_sums(const ConvJob& j, int64_t n, int64_t ob, int64_t blocks, int64_t p0,
                 int64_t count);

}  // namespace kiln::engine::cpu::dnnl_impl
