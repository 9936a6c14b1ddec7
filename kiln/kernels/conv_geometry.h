#pragma once

// Sliding-window geometry shared by the convolution and pooling kernels: attribute reading
// and validation, output sizes and padding, and the range of window positions that fall
// inside the input; and the operand checks the convolutions (Conv, ConvInteger, ConvTranspose)
// share. Internal to kiln/kernels.

#include <kiln/kernels/layout.h>
#include <kiln/kernels/nn_conv_ops.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::kernels::internal {

/// The most spatial axes the kernels handle (Conv3d, MaxPool3d).
inline constexpr size_t kMaxSpatialRank = 3;

/// The geometry of one sliding window over up to three spatial axes. Fewer axes are padded at
/// the front with axes of size 1 (kernel 1, stride 1, no padding), so the loops are always three
/// deep and a flat spatial index reads the same in the padded form.
struct Window {
  using Axes = std::array<int64_t, kMaxSpatialRank>;
  size_t rank = 0;  ///< The number of real spatial axes, S.
  Axes in{1, 1, 1};
  Axes out{1, 1, 1};
  Axes kernel{1, 1, 1};
  Axes stride{1, 1, 1};
  Axes dilation{1, 1, 1};
  Axes pad_begin{0, 0, 0};
  Axes pad_end{0, 0, 0};

  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
  /// The index in the padded arrays of real spatial axis `axis` (0 = the first of S).
  size_t slot(size_t axis) const { return kMaxSpatialRank - rank + axis; }
};

/// The positions o in [0, count) with 0 <= o * step + offset < limit, as [first, last).
struct Span1d {
  int64_t first = 0;
  int64_t last = 0;
};
Span1d valid_range(int64_t count, int64_t limit, int64_t step, int64_t offset);

/// Ok when `x` (an input's sizes) has rank 3..5. Errors: InvalidArgument for rank < 3,
/// NotSupported above (naming the op, the input and its shape).
runtime::Status check_spatial_rank(std::string_view op, std::string_view subject,
                                   runtime::Span<const int64_t> x);

/// `values` checked to have `count` entries, each in [min, 2^31), or `count` copies of
/// `fallback` when empty. Errors: InvalidArgument "attribute 'strides' [1, 0] has ...".
runtime::Result<std::vector<int64_t>> axis_values(std::string_view op, std::string_view name,
                                                  const std::vector<int64_t>& values, size_t count,
                                                  int64_t fallback, int64_t min);

/// The window of a forward op (Conv or a pool) over an input of shape `x` [N, C, in...] with
/// window sizes `kernel` (S values, already checked >= 1): sizes, strides, dilations and pads
/// checked, SAME_*/VALID padding resolved, and output sizes computed (rounded up with
/// `ceil_mode`, dropping a last window that would start in the end padding).
/// Errors: InvalidArgument naming the attribute or the axis whose padded input is smaller
/// than the dilated window.
runtime::Result<Window> forward_window(std::string_view op, runtime::Span<const int64_t> x,
                                       runtime::Span<const int64_t> kernel,
                                       const std::vector<int64_t>& strides,
                                       const std::vector<int64_t>& dilations,
                                       const std::vector<int64_t>& pads, AutoPad auto_pad,
                                       bool ceil_mode);

/// [N, channels, out...] for a window's S real axes.
std::vector<int64_t> window_output_shape(int64_t batch, int64_t channels, const Window& window);

/// The window attributes every op of the family reads (absent: empty, NOTSET).
struct WindowAttributes {
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;
  AutoPad auto_pad = AutoPad::NotSet;
};
/// Reads `kernel_shape`, `strides`, `dilations`, `pads` and `auto_pad`, prefixing the op to
/// any error.
runtime::Result<WindowAttributes> read_window_attributes(std::string_view op,
                                                         const runtime::Attributes& attributes);
/// Reads int list attribute `name` (empty when absent), prefixing the op to any error.
runtime::Result<std::vector<int64_t>> ints_attribute(std::string_view op,
                                                     const runtime::Attributes& attributes,
                                                     std::string_view name);

/// Reads the attributes of a convolution into `Options` (ConvOptions or ConvTransposeOptions):
/// the window attributes and `group` (default 1), prefixing the op to any error.
template <typename Options>
runtime::Result<Options> read_conv_attributes(std::string_view op,
                                              const runtime::Attributes& attributes) {
  KILN_ASSIGN_OR_RETURN(auto window, read_window_attributes(op, attributes));
  Options options;
  options.kernel_shape = std::move(window.kernel_shape);
  options.strides = std::move(window.strides);
  options.dilations = std::move(window.dilations);
  options.pads = std::move(window.pads);
  options.auto_pad = window.auto_pad;
  KILN_ASSIGN_OR_RETURN(options.group, int_attribute(op, attributes, "group", 1));
  return options;
}

/// The first checks of a convolution's sizes, X of shape `x` by W of shape `w`: X has 1 to 3
/// spatial axes, W has X's rank and `group` >= 1. How the channels must fit differs between
/// Conv and ConvTranspose and is left to the caller. Errors: InvalidArgument naming `op`
/// (NotSupported for more than 3 spatial axes).
runtime::Status check_conv_ranks(std::string_view op, runtime::Span<const int64_t> x,
                                 runtime::Span<const int64_t> w, int64_t group);

/// W's spatial sizes (its axes 2...), checked to be >= 1 and, when `kernel_shape` is not empty,
/// equal to it. Errors: InvalidArgument naming `op`, input 1 (W) and the attribute.
runtime::Result<std::vector<int64_t>> conv_kernel_sizes(std::string_view op,
                                                        runtime::Span<const int64_t> w,
                                                        const std::vector<int64_t>& kernel_shape);

/// InvalidType unless X has a float dtype and W the same one: the dtype check of the float
/// convolutions (Conv, ConvTranspose), before their sizes are checked.
runtime::Status check_float_conv_dtypes(std::string_view op, const runtime::Tensor& x,
                                        const runtime::Tensor& w);

/// The tensor checks of a float convolution (Conv, ConvTranspose) whose sizes are valid:
/// B, when not null, has X's dtype, is contiguous and has shape [out_channels]; X and W are
/// contiguous; `out` has X's dtype and shape `out_shape` and is contiguous.
/// Errors: InvalidType, InvalidArgument or NotSupported naming `op` and the tensor.
runtime::Status check_conv_tensors(std::string_view op, const runtime::Tensor& x,
                                   const runtime::Tensor& w, const runtime::Tensor* b,
                                   int64_t out_channels, const runtime::Tensor& out,
                                   runtime::Span<const int64_t> out_shape);

}  // namespace kiln::kernels::internal
