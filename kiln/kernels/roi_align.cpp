// RoiAlign, as onnxruntime and the ONNX reference compute it: each output bin averages (or
// takes the max of) a grid of bilinear samples; a sample more than one pixel outside the
// image contributes 0 but still counts.

#include <kiln/kernels/image_common.h>
#include <kiln/kernels/image_ops.h>
#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kiln::kernels {

using runtime::Error;
using runtime::Result;
using runtime::ScalarType;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "RoiAlign";

// One bilinear sample: four plane offsets and their weights.
struct Sample {
  int64_t offset[4] = {0, 0, 0, 0};
  double weight[4] = {0, 0, 0, 0};
};

Sample bilinear_sample(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) {
    return s;
  }
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y_low = static_cast<int64_t>(y);
  auto x_low = static_cast<int64_t>(x);
  int64_t y_high = y_low + 1;
  int64_t x_high = x_low + 1;
  if (y_low >= height - 1) {
    y_low = y_high = height - 1;
    y = static_cast<double>(y_low);
  }
  if (x_low >= width - 1) {
    x_low = x_high = width - 1;
    x = static_cast<double>(x_low);
  }
  const double ly = y - static_cast<double>(y_low);
  const double lx = x - static_cast<double>(x_low);
  const double hy = 1 - ly;
  const double hx = 1 - lx;
  s.offset[0] = y_low * width + x_low;
  s.offset[1] = y_low * width + x_high;
  s.offset[2] = y_high * width + x_low;
  s.offset[3] = y_high * width + x_high;
  s.weight[0] = hy * hx;
  s.weight[1] = hy * lx;
  s.weight[2] = ly * hx;
  s.weight[3] = ly * lx;
  return s;
}

template <typename T>
Status roi_align_typed(const Tensor& x, const Tensor& rois, const std::vector<int64_t>& batch,
                     const RoiAlignOptions& options, Tensor& out) {
  const int64_t channels = x.size(1);
  const int64_t height = x.size(2);
  const int64_t width = x.size(3);
  const int64_t out_h = options.output_height;
  const int64_t out_w = options.output_width;
  const T* in = x.data_ptr<T>();
  const T* boxes = rois.data_ptr<T>();
  T* dst = out.mutable_data_ptr<T>();
  const double offset = options.half_pixel ? 0.5 : 0.0;
  std::vector<Sample> samples;
  for (size_t r = 0; r < batch.size(); ++r) {
    double box[4];
    for (int i = 0; i < 4; ++i) {
      box[i] = static_cast<double>(load(boxes[r * 4 + i])) * options.spatial_scale - offset;
    }
    double roi_w = box[2] - box[0];
    double roi_h = box[3] - box[1];
    if (!options.half_pixel) {  // output_half_pixel keeps rois at least 1 pixel wide
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(out_h);
    const double bin_w = roi_w / static_cast<double>(out_w);
    // Samples per bin side; an inverted roi has none (its bins are 0), and a roi so large that
    // its samples would not fit in memory is an error rather than an allocation failure.
    const double side_h = options.sampling_ratio > 0 ? static_cast<double>(options.sampling_ratio)
                                                     : std::ceil(roi_h / static_cast<double>(out_h));
    const double side_w = options.sampling_ratio > 0 ? static_cast<double>(options.sampling_ratio)
                                                     : std::ceil(roi_w / static_cast<double>(out_w));
    const bool finite = std::isfinite(box[0]) && std::isfinite(box[1]) && std::isfinite(box[2]) &&
                        std::isfinite(box[3]);
    if (!finite || !(std::max(side_h, 0.0) * std::max(side_w, 0.0) * static_cast<double>(out_h * out_w) <=
          67108864.0)) {  // 2^26
      return internal::invalid_argument(
          kOp, "roi " + std::to_string(r) + " needs " + std::to_string(side_h) + " x " +
                   std::to_string(side_w) + " samples per bin (expected finite box coordinates "
                   "and at most 2^26 samples per roi)");
    }
    const auto grid_h = static_cast<int64_t>(std::max(side_h, 0.0));
    const auto grid_w = static_cast<int64_t>(std::max(side_w, 0.0));
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    // The samples of every bin, in (ph, pw, iy, ix) order; shared by all channels.
    samples.clear();
    for (int64_t ph = 0; ph < out_h; ++ph) {
      for (int64_t pw = 0; pw < out_w; ++pw) {
        for (int64_t iy = 0; iy < grid_h; ++iy) {
          const double y = box[1] + static_cast<double>(ph) * bin_h +
                           (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
          for (int64_t ix = 0; ix < grid_w; ++ix) {
            const double xx = box[0] + static_cast<double>(pw) * bin_w +
                              (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
            samples.push_back(bilinear_sample(y, xx, height, width));
          }
        }
      }
    }
    const auto per_bin = static_cast<size_t>(grid_h * grid_w);
    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = in + (batch[r] * channels + c) * height * width;
      T* bins = dst + (static_cast<int64_t>(r) * channels + c) * out_h * out_w;
      for (int64_t bin = 0; bin < out_h * out_w; ++bin) {
        double value = 0;
        for (size_t k = 0; k < per_bin; ++k) {
          const Sample& s = samples[static_cast<size_t>(bin) * per_bin + k];
          if (options.max_mode) {
            // onnxruntime's max: the largest weighted corner, not the max of samples.
            double best = s.weight[0] * static_cast<double>(load(plane[s.offset[0]]));
            for (int i = 1; i < 4; ++i) {
              best = std::max(best, s.weight[i] * static_cast<double>(load(plane[s.offset[i]])));
            }
            value = k == 0 ? best : std::max(value, best);
          } else {
            for (int i = 0; i < 4; ++i) {
              value += s.weight[i] * static_cast<double>(load(plane[s.offset[i]]));
            }
          }
        }
        if (!options.max_mode) value /= count;
        bins[bin] = store<T>(static_cast<ComputeType<T>>(value));
      }
    }
  }
  return Status();
}

Result<RoiAlignOptions> read_options(const runtime::Attributes& attributes) {
  RoiAlignOptions options;
  KILN_ASSIGN_OR_RETURN(auto mode, internal::string_attribute(kOp, attributes, "mode", "avg"));
  KILN_ASSIGN_OR_RETURN(auto coordinates,
                        internal::string_attribute(kOp, attributes,
                                                   "coordinate_transformation_mode", "half_pixel"));
  if (mode != "avg" && mode != "max") {
    return internal::invalid_argument(kOp,
                                      "attribute 'mode' is '" + mode + "' (expected 'avg' or 'max')");
  }
  if (coordinates != "half_pixel" && coordinates != "output_half_pixel") {
    return internal::invalid_argument(
        kOp, "attribute 'coordinate_transformation_mode' is '" + coordinates +
                 "' (expected 'half_pixel' or 'output_half_pixel')");
  }
  options.max_mode = mode == "max";
  options.half_pixel = coordinates == "half_pixel";
  KILN_ASSIGN_OR_RETURN(options.output_height,
                        internal::int_attribute(kOp, attributes, "output_height", 1));
  KILN_ASSIGN_OR_RETURN(options.output_width,
                        internal::int_attribute(kOp, attributes, "output_width", 1));
  KILN_ASSIGN_OR_RETURN(options.sampling_ratio,
                        internal::int_attribute(kOp, attributes, "sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(options.spatial_scale,
                        internal::double_attribute(kOp, attributes, "spatial_scale", 1.0));
  return options;
}

Status roi_align_kernel(runtime::KernelContext& context, Span<runtime::EValue* const> inputs,
                        Span<runtime::EValue* const> outputs,
                        const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* rois, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* batch, internal::input_tensor(kOp, inputs, 2));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x->dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 1 (rois)", rois->dtype(), x->dtype()));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 2 (batch_indices)", batch->dtype(), kIndexDtypes));
  KILN_ASSIGN_OR_RETURN(RoiAlignOptions options, read_options(attributes));
  auto shape = roi_align_shape(x->sizes(), rois->sizes(), batch->sizes(), options);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_ASSIGN_OR_RETURN(runtime::EValue * out, internal::output_tensor(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, *shape));
  return roi_align(*x, *rois, *batch, options, out->to_tensor());
}

const runtime::KernelRegistration kRegisterRoiAlign("RoiAlign", roi_align_kernel);

}  // namespace

Result<std::vector<int64_t>> roi_align_shape(Span<const int64_t> x, Span<const int64_t> rois,
                                             Span<const int64_t> batch_indices,
                                             const RoiAlignOptions& options) {
  if (x.size() != 4 || rois.size() != 2 || rois[1] != 4 || batch_indices.size() != 1 ||
      batch_indices[0] != rois[0]) {
    return Status(Error::InvalidArgument,
                  "inputs have shapes " + runtime::shape_to_string(x) + ", " +
                      runtime::shape_to_string(rois) + " and " +
                      runtime::shape_to_string(batch_indices) +
                      " (expected [N, C, H, W], [num_rois, 4] and [num_rois])");
  }
  if (options.output_height <= 0 || options.output_width <= 0 || options.sampling_ratio < 0) {
    return Status(Error::InvalidArgument,
                  "attributes 'output_height', 'output_width' and 'sampling_ratio' are " +
                      std::to_string(options.output_height) + ", " +
                      std::to_string(options.output_width) + " and " +
                      std::to_string(options.sampling_ratio) +
                      " (expected sizes > 0 and a ratio >= 0)");
  }
  return std::vector<int64_t>{rois[0], x[1], options.output_height, options.output_width};
}

Status roi_align(const Tensor& x, const Tensor& rois, const Tensor& batch_indices,
                 const RoiAlignOptions& options, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0", x.dtype(), kFloatDtypes));
  KILN_RETURN_IF_ERROR(internal::check_same_dtype(kOp, "input 1 (rois)", rois.dtype(), x.dtype()));
  KILN_RETURN_IF_ERROR(
      check_dtype(kOp, "input 2 (batch_indices)", batch_indices.dtype(), kIndexDtypes));
  auto shape = roi_align_shape(x.sizes(), rois.sizes(), batch_indices.sizes(), options);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1 (rois)", rois));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2 (batch_indices)", batch_indices));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), *shape));
  std::vector<int64_t> batch(static_cast<size_t>(batch_indices.numel()));
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i] = batch_indices.dtype() == ScalarType::Int64 ? batch_indices.data_ptr<int64_t>()[i]
                                                          : batch_indices.data_ptr<int32_t>()[i];
    if (batch[i] < 0 || batch[i] >= x.size(0)) {
      return internal::invalid_argument(
          kOp, "input 2 (batch_indices) has " + std::to_string(batch[i]) + " at element " +
                   std::to_string(i) + " (expected 0.." + std::to_string(x.size(0) - 1) +
                   " for input 0 of batch size " + std::to_string(x.size(0)) + ")");
    }
  }
  if (out.numel() == 0) return Status();
  if (x.size(2) == 0 || x.size(3) == 0) {
    return internal::invalid_argument(kOp, "input 0 has shape " +
                                               runtime::shape_to_string(x.sizes()) +
                                               " (expected non-empty H and W)");
  }
  return dispatch<DtypeGroup::Float>(kOp, "input 0", x.dtype(), [&](auto tag) {
    return roi_align_typed<typename decltype(tag)::type>(x, rois, batch, options, out);
  });
}

}  // namespace kiln::kernels
