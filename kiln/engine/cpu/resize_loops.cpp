// Resize and Upsample of 4-D images (H and W scaled) on kiln's own loops, 16 channels at a time
// in a producer's nChw16c, or plain. oneDNN's resampling generates its kernel's code at
// creation, and its coordinate mapping agrees with ONNX's only for some modes and shapes, so
// dnnl_resize.cpp proves it on a probe image with a second primitive: 0.8-1.2 ms per Resize
// for each new image size of the OCR detector. Here nothing is generated or proved:
// - nearest: each output pixel copies the input pixel an index map names, the reference
//   kernel's own (kernels::resize run once on an image of one plane whose values are their
//   flat indices, exact in floats below 2^24, which the caller checks);
// - linear and cubic: each output pixel sums the input pixels the reference kernel's taps
//   name (kernels::resize_axis_taps: the same indices and weights, per axis), weighted by
//   the product of its row's and column's weights.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/vector_math.h>
#include <kiln/kernels/image_ops.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;
constexpr int64_t kLanes = 16;

memory::desc blocked_md(const std::vector<int64_t>& sizes) {
  return memory::desc(to_dims(sizes), memory::data_type::f32, memory::format_tag::nChw16c);
}

// The taps of one image axis (H or W): per output coordinate, `taps` input indices and weights.
struct Taps {
  int64_t taps = 1;
  std::vector<int32_t> index;
  std::vector<float> weight;
};

// One row of an interpolated image in nChw16c: each output pixel the weighted sum of the input
// pixels its row's taps (`row_index`, `row_weight`) and the columns' taps name.
KILN_VECTOR_CLONES void interpolate_row(const float* plane, int64_t in_w, const int32_t* row_index,
                                        const float* row_weight, int64_t row_taps, const Taps& cols,
                                        int64_t out_w, float* to) {
  using vec::Floats;
  for (int64_t x = 0; x < out_w; ++x) {
    Floats sum = vec::splat(0.0f);
    const int32_t* col_index = cols.index.data() + x * cols.taps;
    const float* col_weight = cols.weight.data() + x * cols.taps;
    for (int64_t ty = 0; ty < row_taps; ++ty) {
      const float* row = plane + int64_t{row_index[ty]} * in_w * kLanes;
      for (int64_t tx = 0; tx < cols.taps; ++tx) {
        sum += vec::load(row + int64_t{col_index[tx]} * kLanes) * (row_weight[ty] * col_weight[tx]);
      }
    }
    vec::store(to + x * kLanes, sum);
  }
}

class ResizeLoopsOp final : public CpuOp {
 public:
  // Nearest: `map` per output pixel; interpolated: `rows` and `cols` (map empty).
  ResizeLoopsOp(const OpDesc& desc, std::vector<int64_t> out, bool blocked,
                std::vector<int32_t> map, Taps rows, Taps cols, std::string mode)
      : in_(desc.inputs[0].sizes),
        map_(std::move(map)),
        rows_(std::move(rows)),
        cols_(std::move(cols)),
        mode_(std::move(mode)),
        blocked_(blocked) {
    outputs_ = {TensorDesc{runtime::ScalarType::Float32, std::move(out)}};
    num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override {
    return "kiln " + mode_ +
           " Resize (own loops: " + (map_.empty() ? "the reference's taps" : "an index map") +
           (blocked_ ? ", nChw16c)" : ")");
  }
  std::string provider() const override { return "kiln"; }

  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index != 0 || !blocked_) return std::nullopt;
    return native_layout(blocked_md(in_));
  }
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index != 0 || !blocked_) return std::nullopt;
    return native_layout(blocked_md(outputs_[0].sizes));
  }
  Status use_native_input(size_t index) override {
    if (index != 0 || !blocked_) return CpuOp::use_native_input(index);
    native_in_ = true;
    return Status();
  }
  Status use_native_output(size_t index) override {
    if (index != 0 || !blocked_) return CpuOp::use_native_output(index);
    native_out_ = true;
    return Status();
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    if (inputs.empty() || inputs[0] == nullptr || outputs.size() != 1 || outputs[0] == nullptr) {
      return Status(Error::InvalidArgument,
                    "run op 'Resize' (" + describe() + "): expected input 0 and one output");
    }
    const auto* x = static_cast<const float*>(inputs[0]->data());
    auto* y = static_cast<float*>(outputs[0]->mutable_data());
    if (native_in_ && native_out_) {
      if (map_.empty()) {
        interpolate_blocked(x, y);
      } else {
        copy_blocked(x, y);
      }
      return Status();
    }
    element_by_element(x, y);
    return Status();
  }

 private:
  int64_t out_plane() const { return outputs_[0].sizes[2] * outputs_[0].sizes[3]; }
  int64_t blocks() const { return (in_[1] + kLanes - 1) / kLanes; }
  int parts() const { return out_plane() * in_[1] >= 16384 ? num_threads_ : 1; }

  // Nearest, both sides nChw16c: whole vectors of 16 channels (the padding lanes copied: zero
  // in, zero out).
  void copy_blocked(const float* x, float* y) const {
    const int64_t in_plane = in_[2] * in_[3], out = out_plane(), planes = in_[0] * blocks();
    const int32_t* map = map_.data();
#pragma omp parallel for num_threads(parts()) schedule(static) if (parts() > 1)
    for (int64_t plane = 0; plane < planes; ++plane) {
      const float* from = x + plane * in_plane * kLanes;
      float* to = y + plane * out * kLanes;
      for (int64_t p = 0; p < out; ++p) {
        std::memcpy(to + p * kLanes, from + int64_t{map[p]} * kLanes, sizeof(float) * kLanes);
      }
    }
  }

  // Linear or cubic, both sides nChw16c: row by row of each plane (padding lanes: zero in,
  // zero out).
  void interpolate_blocked(const float* x, float* y) const {
    const int64_t in_w = in_[3], in_plane = in_[2] * in_w;
    const int64_t out_h = outputs_[0].sizes[2], out_w = outputs_[0].sizes[3];
    const int64_t rows = in_[0] * blocks() * out_h;
#pragma omp parallel for num_threads(parts()) schedule(static) if (parts() > 1)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t plane = r / out_h, oy = r % out_h;
      interpolate_row(x + plane * in_plane * kLanes, in_w, rows_.index.data() + oy * rows_.taps,
                      rows_.weight.data() + oy * rows_.taps, rows_.taps, cols_, out_w,
                      y + (plane * out_h + oy) * out_w * kLanes);
    }
  }

  // Element by element, each side plain or nChw16c (whose padding lanes are written zero).
  void element_by_element(const float* x, float* y) const {
    const int64_t n = in_[0], c = in_[1], in_w = in_[3], in_plane = in_[2] * in_w;
    const int64_t out_w = outputs_[0].sizes[3], out = out_plane(), b = blocks();
    auto in_at = [&](int64_t i, int64_t ch, int64_t p) {
      return native_in_ ? ((i * b + ch / kLanes) * in_plane + p) * kLanes + ch % kLanes
                        : (i * c + ch) * in_plane + p;
    };
    auto out_at = [&](int64_t i, int64_t ch, int64_t p) {
      return native_out_ ? ((i * b + ch / kLanes) * out + p) * kLanes + ch % kLanes
                         : (i * c + ch) * out + p;
    };
    const int64_t channels = native_out_ ? b * kLanes : c;
#pragma omp parallel for num_threads(parts()) schedule(static) if (parts() > 1)
    for (int64_t plane = 0; plane < n * channels; ++plane) {
      const int64_t i = plane / channels, ch = plane % channels;
      for (int64_t p = 0; p < out; ++p) {
        float value = 0.0f;
        if (ch < c && !map_.empty()) {
          value = x[in_at(i, ch, int64_t{map_[static_cast<size_t>(p)]})];
        } else if (ch < c) {
          const int64_t oy = p / out_w, ox = p % out_w;
          for (int64_t ty = 0; ty < rows_.taps; ++ty) {
            const auto at_y = static_cast<size_t>(oy * rows_.taps + ty);
            for (int64_t tx = 0; tx < cols_.taps; ++tx) {
              const auto at_x = static_cast<size_t>(ox * cols_.taps + tx);
              value += x[in_at(i, ch, int64_t{rows_.index[at_y]} * in_w + cols_.index[at_x])] *
                       (rows_.weight[at_y] * cols_.weight[at_x]);
            }
          }
        }
        y[out_at(i, ch, p)] = value;
      }
    }
  }

  std::vector<int64_t> in_;
  std::vector<TensorDesc> outputs_;
  std::vector<int32_t> map_;  // nearest: per output pixel of a plane, its input pixel
  Taps rows_, cols_;          // linear and cubic
  std::string mode_;
  bool blocked_ = false, native_in_ = false, native_out_ = false;
  int num_threads_ = 1;
};

// The reference kernel's taps of image axis `axis` (2: H, 3: W) as kiln's loops read them.
Result<Taps> image_taps(const OpDesc& desc, const kernels::ResizePlan& plan,
                        const kernels::ResizeOptions& options, size_t axis) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  kernels::ResizeTaps reference = kernels::resize_axis_taps(options, plan, x, axis);
  Taps taps;
  taps.taps = reference.taps;
  for (size_t k = 0; k < reference.index.size(); ++k) {
    const int64_t i = reference.index[k];
    if (i < 0 || i >= x[axis]) {
      return error(desc, Error::Internal,
                   "the Resize's taps read index " + std::to_string(i) + " of axis " +
                       std::to_string(axis) + " (expected 0.." + std::to_string(x[axis] - 1) + ")");
    }
    taps.index.push_back(static_cast<int32_t>(i));
    taps.weight.push_back(static_cast<float>(reference.weight[k]));
  }
  return taps;
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_nearest_resize(const OpDesc& desc,
                                                     const kernels::ResizePlan& plan,
                                                     const kernels::ResizeOptions& options,
                                                     bool blocked) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  if (options.mode != kernels::ResizeMode::Nearest || x.size() != 4 || plan.sizes.size() != 4) {
    return error(desc, Error::NotSupported, "not a 4-D nearest Resize");
  }
  const int64_t in_plane = x[2] * x[3], out_plane = plan.sizes[2] * plan.sizes[3];
  std::vector<float> probe(static_cast<size_t>(in_plane));
  for (int64_t i = 0; i < in_plane; ++i) probe[static_cast<size_t>(i)] = static_cast<float>(i);
  std::vector<float> mapped(static_cast<size_t>(out_plane));
  runtime::Tensor probe_t(runtime::ScalarType::Float32, {1, 1, x[2], x[3]}, probe.data());
  runtime::Tensor mapped_t(runtime::ScalarType::Float32, {1, 1, plan.sizes[2], plan.sizes[3]},
                           mapped.data());
  kernels::ResizePlan plane_plan = plan;
  plane_plan.sizes[0] = plane_plan.sizes[1] = 1;
  KILN_RETURN_IF_ERROR(kernels::resize(probe_t, plane_plan, options, mapped_t));
  std::vector<int32_t> map(static_cast<size_t>(out_plane));
  for (size_t p = 0; p < map.size(); ++p) {
    const float v = mapped[p];
    if (!(v >= 0.0f && v < static_cast<float>(in_plane))) {
      return error(desc, Error::Internal,
                   "the nearest index map reads " + std::to_string(v) + " at output pixel " +
                       std::to_string(p) + " (expected 0.." + std::to_string(in_plane - 1) + ")");
    }
    map[p] = static_cast<int32_t>(v);
  }
  return std::unique_ptr<CpuOp>(std::make_unique<ResizeLoopsOp>(
      desc, plan.sizes, blocked, std::move(map), Taps{}, Taps{}, "nearest"));
}

Result<std::unique_ptr<CpuOp>> create_interpolated_resize(const OpDesc& desc,
                                                          const kernels::ResizePlan& plan,
                                                          const kernels::ResizeOptions& options,
                                                          bool blocked) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const bool linear = options.mode == kernels::ResizeMode::Linear;
  if ((!linear && options.mode != kernels::ResizeMode::Cubic) || x.size() != 4 ||
      plan.sizes.size() != 4) {
    return error(desc, Error::NotSupported, "not a 4-D linear or cubic Resize");
  }
  if (options.coordinates == kernels::ResizeCoordinates::TfCropAndResize) {
    return error(desc, Error::NotSupported,
                 "coordinate_transformation_mode 'tf_crop_and_resize' (its extrapolated "
                 "pixels are the reference kernel's)");
  }
  KILN_ASSIGN_OR_RETURN(Taps rows, image_taps(desc, plan, options, 2));
  KILN_ASSIGN_OR_RETURN(Taps cols, image_taps(desc, plan, options, 3));
  return std::unique_ptr<CpuOp>(std::make_unique<ResizeLoopsOp>(
      desc, plan.sizes, blocked, std::vector<int32_t>{}, std::move(rows), std::move(cols),
      linear ? "linear" : "cubic"));
}

}  // namespace kiln::engine::cpu::dnnl_impl
