#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

/// Image and detection operators (ONNX semantics): Resize (and the deprecated Upsample),
/// GridSample, RoiAlign and NonMaxSuppression. Part of the typed API that `kernels.h`
/// includes; its conventions hold here. Coordinates and weights are computed in double and
/// the result is rounded once on store (f16 and bf16 to nearest even). Plan and shape helpers
/// return InvalidArgument errors without the "run kernel" prefix; the adapters add it.
namespace kiln::kernels {

// ---- Resize, Upsample --------------------------------------------------------------------

/// Resize's `mode`.
enum class ResizeMode { Nearest, Linear, Cubic };

/// Resize's `coordinate_transformation_mode`: how an output coordinate maps to the input.
enum class ResizeCoordinates {
  HalfPixel,           ///< (x + 0.5) / scale - 0.5 (the default).
  HalfPixelSymmetric,  ///< half_pixel, centred when the output size was rounded (opset 19).
  PytorchHalfPixel,    ///< half_pixel, but -0.5 when the output size is 1.
  AlignCorners,        ///< x * (in - 1) / (out - 1), with out = scale * in (not rounded).
  Asymmetric,          ///< x / scale (Upsample and Resize-10).
  TfCropAndResize,     ///< from the `roi` box; outside [0, in - 1] gives `extrapolation_value`.
  TfHalfPixelForNn,    ///< (x + 0.5) / scale (opset 11 only).
};

/// Resize's `nearest_mode`: how mode Nearest rounds the input coordinate.
enum class ResizeNearest {
  RoundPreferFloor,  ///< Round half down (the default).
  RoundPreferCeil,   ///< Round half up.
  Floor,
  Ceil,
  /// Upsample and Resize-10: floor when the axis's scale is at least 1, else ceil.
  Simple,
};

/// Resize's `keep_aspect_ratio_policy` (opset 18; applies to `sizes` only).
enum class ResizeAspect {
  Stretch,     ///< Each axis gets its own size (the default).
  NotLarger,   ///< One scale for all axes, the smallest: no axis exceeds its size.
  NotSmaller,  ///< One scale for all axes, the largest: no axis falls short of its size.
};

/// Resize's attributes (ONNX defaults).
struct ResizeOptions {
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::HalfPixel;
  ResizeNearest nearest = ResizeNearest::RoundPreferFloor;
  double cubic_coeff_a = -0.75;      ///< The cubic kernel's `a` (-0.5 is TensorFlow's).
  bool exclude_outside = false;      ///< Taps outside the input get weight 0, then renormalize.
  double extrapolation_value = 0.0;  ///< TfCropAndResize's value outside the input.
  /// Linear and Cubic stretch their kernel by 1 / scale when downscaling (opset 18). Ignored
  /// by Nearest.
  bool antialias = false;
  std::vector<int64_t> axes;  ///< The axes `roi`, `scales` and `sizes` list; empty: all.
  ResizeAspect aspect = ResizeAspect::Stretch;
};

/// Parses Resize's string attributes; InvalidArgument naming the attribute, the value and
/// the accepted ones.
runtime::Result<ResizeMode> parse_resize_mode(std::string_view mode);
runtime::Result<ResizeCoordinates> parse_resize_coordinates(std::string_view mode);
runtime::Result<ResizeNearest> parse_resize_nearest(std::string_view mode);
runtime::Result<ResizeAspect> parse_resize_aspect(std::string_view policy);

/// The geometry of one Resize, per axis of the input.
struct ResizePlan {
  std::vector<int64_t> sizes;   ///< Output sizes.
  std::vector<double> scales;   ///< Output / input scale used by the coordinate transform.
  std::vector<double> roi;      ///< [starts..., ends...] (2 * rank); 0s and 1s without roi.
};

/// Plans Resize of an input of shape `input`. Exactly one of `scales` (> 0) and `sizes`
/// (>= 0) is set, with one entry per axis of `options.axes` (all axes when empty). Scales
/// give sizes floor(scale * in); sizes give scales out / in, unified per
/// `options.aspect`. `roi` (null, or 2 entries per listed axis) is required by
/// TfCropAndResize. Errors: InvalidArgument for counts that do not match, non-positive
/// scales, negative sizes, bad or repeated axes, a missing roi.
runtime::Result<ResizePlan> resize_plan(runtime::Span<const int64_t> input,
                                        const std::vector<double>* roi,
                                        const std::vector<double>* scales,
                                        const std::vector<int64_t>* sizes,
                                        const ResizeOptions& options);

/// Resizes `x` into `out` of shape `plan.sizes` (ONNX Resize, opsets 10 to 19): separable
/// nearest, N-d linear or N-d cubic interpolation over every axis, with the input's edge
/// values repeated past its border. Dtypes f32, f64, f16, bf16, i8, u8, i16, i32, i64 (integer
/// results of Linear and Cubic are rounded to nearest and saturated). No allocation beyond
/// per-axis tables of taps.
runtime::Status resize(const runtime::Tensor& x, const ResizePlan& plan,
                       const ResizeOptions& options, runtime::Tensor& out);

/// The taps one axis of a Resize reads, as `resize` combines them over every axis: for output
/// coordinate o, `taps` pairs (input index, clamped to the axis; weight) at
/// [o * taps, (o + 1) * taps), or `outside[o]` where tf_crop_and_resize extrapolates (its taps
/// unused). An axis whose every output reads one input with weight 1 has one tap.
struct ResizeTaps {
  int64_t taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
};

/// The taps of axis `axis` of a Resize of an input of shape `input` by `plan` (from
/// `resize_plan`, whose checks `resize` makes: scales finite and > 0, sizes of the input's
/// rank; `axis` < that rank).
ResizeTaps resize_axis_taps(const ResizeOptions& options, const ResizePlan& plan,
                            runtime::Span<const int64_t> input, size_t axis);

// ---- GridSample --------------------------------------------------------------------------

/// GridSample's `mode`: "bilinear"/"linear", "nearest", "bicubic"/"cubic".
enum class GridSampleMode { Linear, Nearest, Cubic };
/// GridSample's `padding_mode`: the value of a tap outside the input.
enum class GridSamplePadding {
  Zeros,       ///< 0.
  Border,      ///< The nearest edge value.
  Reflection,  ///< Reflected at the border (the pixel edges, or centres with align_corners).
};

/// GridSample's attributes (ONNX defaults).
struct GridSampleOptions {
  GridSampleMode mode = GridSampleMode::Linear;
  GridSamplePadding padding = GridSamplePadding::Zeros;
  bool align_corners = false;  ///< -1 and 1 are the centres (true) or edges of the corners.
};

/// The output shape of GridSample: [N, C, D1_out, ..., Dk_out] for X [N, C, D1, ..., Dk] and
/// grid [N, D1_out, ..., Dk_out, k]. Errors: InvalidArgument for rank below 3, differing
/// batch sizes or a last grid dimension other than k.
runtime::Result<std::vector<int64_t>> grid_sample_shape(runtime::Span<const int64_t> x,
                                                        runtime::Span<const int64_t> grid);
/// Samples `x` at the normalized coordinates of `grid` (the last entry indexes the last
/// axis) into `out` of shape `grid_sample_shape(...)` (ONNX GridSample, opsets 16 and 20,
/// any number of spatial axes). Dtypes f32, f64, f16, bf16; `grid` may have another float
/// dtype. A nan coordinate gives nan.
runtime::Status grid_sample(const runtime::Tensor& x, const runtime::Tensor& grid,
                            const GridSampleOptions& options, runtime::Tensor& out);

// ---- RoiAlign ----------------------------------------------------------------------------

/// RoiAlign's attributes (ONNX defaults of opset 16).
struct RoiAlignOptions {
  bool max_mode = false;         ///< `mode` "max" (else "avg").
  bool half_pixel = true;        ///< `coordinate_transformation_mode` "half_pixel" (else
                                 ///< "output_half_pixel", opset 10's behaviour).
  int64_t output_height = 1;
  int64_t output_width = 1;
  int64_t sampling_ratio = 0;    ///< Samples per bin side; 0: ceil(roi size / output size).
  double spatial_scale = 1.0;    ///< Scales the roi coordinates to the input's.
};

/// The output shape of RoiAlign: [num_rois, C, output_height, output_width] for X
/// [N, C, H, W], rois [num_rois, 4] and batch_indices [num_rois]. Errors: InvalidArgument for
/// other shapes, non-positive output sizes or a negative sampling ratio.
runtime::Result<std::vector<int64_t>> roi_align_shape(runtime::Span<const int64_t> x,
                                                      runtime::Span<const int64_t> rois,
                                                      runtime::Span<const int64_t> batch_indices,
                                                      const RoiAlignOptions& options);
/// Pools every roi (x1, y1, x2, y2) of `rois` over its image `batch_indices[i]` of `x` into
/// `out` (ONNX RoiAlign, opsets 10 and 16): bilinear samples averaged per bin, or for max
/// mode the largest weighted corner of any sample (as onnxruntime). Dtypes f32, f64, f16,
/// bf16 (`rois` has `x`'s dtype; batch_indices i32 or i64). Errors: InvalidArgument for a
/// batch index outside [0, N).
runtime::Status roi_align(const runtime::Tensor& x, const runtime::Tensor& rois,
                          const runtime::Tensor& batch_indices, const RoiAlignOptions& options,
                          runtime::Tensor& out);

// ---- NonMaxSuppression -------------------------------------------------------------------

/// NonMaxSuppression's parameters (inputs 2..4 and attribute `center_point_box`).
struct NmsOptions {
  bool center_point_box = false;  ///< Boxes are [xc, yc, w, h] (else corners [y1, x1, y2, x2]).
  int64_t max_output_boxes_per_class = 0;  ///< Negative counts as 0: nothing is selected.
  double iou_threshold = 0.0;              ///< In [0, 1]: suppress boxes with IoU above it.
  std::optional<double> score_threshold;   ///< Only boxes with a score above it are kept.
};

/// Greedy non-maximum suppression (ONNX NonMaxSuppression, opsets 10 and 11) of `boxes`
/// [B, S, 4] with `scores` [B, K, S] (f32, f64, f16 or bf16, one dtype): per batch and class,
/// boxes in decreasing score order (ties: lower index first) are kept unless their IoU with a
/// kept box exceeds the threshold, up to `max_output_boxes_per_class`. Returns the selected
/// [batch, class, box] triples in that order; the NonMaxSuppression adapter writes them as
/// the i64 output [num_selected, 3]. Errors: InvalidArgument for other shapes or an IoU
/// threshold outside [0, 1]; InvalidType for other dtypes.
runtime::Result<std::vector<int64_t>> non_max_suppression(const runtime::Tensor& boxes,
                                                          const runtime::Tensor& scores,
                                                          const NmsOptions& options);

}  // namespace kiln::kernels
