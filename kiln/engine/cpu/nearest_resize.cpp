// Resize and Upsample of mode nearest on kiln's own loops: each output pixel copies the input
// pixel an index map names, 16 channels at a time in a producer's nChw16c. oneDNN's resampling
// generates its kernel's code at creation, and its index mapping agrees with ONNX's only for
// some modes and shapes, so dnnl_resize.cpp proves it on a probe image with a second
// primitive: OCR detection's six Resizes took 0.45 ms of a first run. The map here is the
// reference kernel's own: kernels::resize run once on an image of one plane whose values are
// their flat indices (exact in floats below 2^24, which the caller checks).

#include <kiln/engine/cpu/dnnl_common.h>
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

class NearestResizeOp final : public CpuOp {
 public:
  NearestResizeOp(const OpDesc& desc, std::vector<int64_t> out, std::vector<int32_t> map,
                  bool blocked)
      : in_(desc.inputs[0].sizes), map_(std::move(map)), blocked_(blocked) {
    outputs_ = {TensorDesc{runtime::ScalarType::Float32, std::move(out)}};
    num_threads_ = desc.num_threads > 0 ? desc.num_threads : omp_get_max_threads();
  }

  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  std::string describe() const override {
    return std::string("kiln nearest Resize (own loops: an index map") +
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
    const int64_t n = in_[0], c = in_[1], in_plane = in_[2] * in_[3];
    const int64_t out_plane = static_cast<int64_t>(map_.size());
    const int64_t blocks = (c + kLanes - 1) / kLanes;
    const int32_t* map = map_.data();
    const int parts = out_plane * c >= 16384 ? num_threads_ : 1;
    if (native_in_ && native_out_) {
      // Whole vectors of 16 channels (the padding lanes copied: zero in, zero out).
      const int64_t planes = n * blocks;
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
      for (int64_t plane = 0; plane < planes; ++plane) {
        const float* from = x + plane * in_plane * kLanes;
        float* to = y + plane * out_plane * kLanes;
        for (int64_t p = 0; p < out_plane; ++p) {
          std::memcpy(to + p * kLanes, from + int64_t{map[p]} * kLanes, sizeof(float) * kLanes);
        }
      }
      return Status();
    }
    // Element by element, each side plain or nChw16c (whose padding lanes are written zero).
    auto in_at = [&](int64_t i, int64_t ch, int64_t p) {
      return native_in_ ? ((i * blocks + ch / kLanes) * in_plane + p) * kLanes + ch % kLanes
                        : (i * c + ch) * in_plane + p;
    };
    auto out_at = [&](int64_t i, int64_t ch, int64_t p) {
      return native_out_ ? ((i * blocks + ch / kLanes) * out_plane + p) * kLanes + ch % kLanes
                         : (i * c + ch) * out_plane + p;
    };
    const int64_t channels = native_out_ ? blocks * kLanes : c;
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
    for (int64_t plane = 0; plane < n * channels; ++plane) {
      const int64_t i = plane / channels, ch = plane % channels;
      for (int64_t p = 0; p < out_plane; ++p) {
        y[out_at(i, ch, p)] = ch < c ? x[in_at(i, ch, int64_t{map[p]})] : 0.0f;
      }
    }
    return Status();
  }

 private:
  std::vector<int64_t> in_;
  std::vector<TensorDesc> outputs_;
  std::vector<int32_t> map_;  // per output pixel of a plane, its input pixel
  bool blocked_ = false, native_in_ = false, native_out_ = false;
  int num_threads_ = 1;
};

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
  return std::unique_ptr<CpuOp>(
      std::make_unique<NearestResizeOp>(desc, plan.sizes, std::move(map), blocked));
}

}  // namespace kiln::engine::cpu::dnnl_impl
