// Resize and Upsample on oneDNN's resampling primitive, for the cases where oneDNN's index
// mapping is ONNX's: 4-D NCHW f32 scaling H and W only, mode nearest or linear (bilinear),
// scales or sizes constant. oneDNN maps output o of an axis to (o + 0.5) * in / out - 0.5
// (nearest: rounded half away from zero), ONNX to its coordinate_transformation_mode with the
// given scale and rounds per nearest_mode; the two agree for some combinations and shapes
// only (asymmetric + floor with integer upscales, half_pixel linear when the scale is out /
// in, ...). Rather than trust a table, `create` proves it for the op's own shapes: it runs
// the primitive once on a probe image and compares it with the reference kernel
// (kernels::resize) on the same image, exactly for nearest, within float rounding for linear;
// any difference gives NotSupported, so the reference kernel runs the node. The activations
// may stay in their producer's layout (nhwc, nChw16c, nChw8c: see ResampleOp). Where kiln's
// loops take a Resize (plain NCHW or nChw16c, with AVX-512: resize_loops.cpp, which also takes
// cubic, antialias and exclude_outside), oneDNN is not asked.

#include <kiln/engine/cpu/dnnl_staged.h>
#include <kiln/kernels/image_ops.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

/// The resampling primitive over caller tensors. oneDNN 2.6's jit resampling writes its
/// result with non-temporal stores that fault unless the destination is 64-byte aligned, so
/// an output at another address is written into an aligned buffer the op holds and copied.
/// When the primitive's layouts differ from the plain ones (the producer's layout, adopted to
/// skip two conversions), the plain source and result are converted through buffers the op
/// holds, unless layout propagation hands them over natively.
class ResampleOp final : public DnnlOp {
 public:
  ResampleOp(const OpDesc& desc, const dnnl::resampling_forward::primitive_desc& pd,
             std::vector<int64_t> output_sizes, const memory::desc& x_plain,
             const memory::desc& y_plain)
      : primitive_(pd) {
    op_ = desc.op;
    num_threads_ = desc.num_threads;
    num_inputs_ = desc.inputs.size();
    outputs_ = {TensorDesc{runtime::ScalarType::Float32, std::move(output_sizes)}};
    describe_ = describe_pd(pd) + " resampling";
    hold_scratchpad(pd);
    args_[DNNL_ARG_SRC] = wrap(pd.src_desc(), nullptr);
    args_[DNNL_ARG_DST] = wrap(pd.dst_desc(), nullptr);
    aligned_dst_ = memory(pd.dst_desc(), cpu_engine());
    if (pd.src_desc() != x_plain) {
      src_stage_.emplace(x_plain, pd.src_desc(), true);
      describe_ += " src:" + format_of(pd.src_desc());
    }
    if (pd.dst_desc() != y_plain) {
      // Converted out of the aligned buffer, which the primitive then always writes.
      dst_stage_.emplace(y_plain, pd.dst_desc(), false, false);
      describe_ += " dst:" + format_of(pd.dst_desc());
    }
  }

  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
    if (inputs[0] == nullptr) {
      return Status(Error::InvalidArgument, "run op '" + op_ + "' (oneDNN): input 0 is null");
    }
    if (!finished_) KILN_RETURN_IF_ERROR(finish());
    if (src_stage_) {
      KILN_RETURN_IF_ERROR(convert(*src_stage_, inputs[0]->data()));
    } else {
      point(args_[DNNL_ARG_SRC], inputs[0]->data());
    }
    void* out = outputs[0]->mutable_data();
    if (dst_stage_) {
      args_[DNNL_ARG_DST] = aligned_dst_;
      KILN_RETURN_IF_ERROR(execute(primitive_, args_));
      return convert(*dst_stage_, out, &aligned_dst_);
    }
    const bool aligned = reinterpret_cast<uintptr_t>(out) % 64 == 0;
    point(args_[DNNL_ARG_DST], aligned ? out : aligned_dst_.get_data_handle());
    KILN_RETURN_IF_ERROR(execute(primitive_, args_));
    if (!aligned) {
      std::memcpy(out, aligned_dst_.get_data_handle(), aligned_dst_.get_desc().get_size());
    }
    return Status();
  }

  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index == 0 && src_stage_) return src_stage_->native();
    return std::nullopt;
  }
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index == 0 && dst_stage_) return dst_stage_->native();
    return std::nullopt;
  }
  Status use_native_input(size_t index) override {
    if (index != 0 || !src_stage_) return CpuOp::use_native_input(index);
    src_stage_.reset();
    return Status();
  }
  Status use_native_output(size_t index) override {
    if (index != 0 || !dst_stage_) return CpuOp::use_native_output(index);
    args_[DNNL_ARG_DST] = wrap(aligned_dst_.get_desc(), nullptr);
    dst_stage_.reset();
    return Status();
  }
  Status finish() override {
    if (finished_) return Status();
    if (src_stage_) {
      KILN_RETURN_IF_ERROR(make(*src_stage_));
      args_[DNNL_ARG_SRC] = src_stage_->internal();
    }
    if (dst_stage_) {
      KILN_RETURN_IF_ERROR(make(*dst_stage_));
      // Written and converted out at every run: only then is the aligned buffer needed always.
      KILN_ASSIGN_OR_RETURN(aligned_dst_, step_buffer(aligned_dst_.get_desc()));
    }
    finished_ = true;
    return Status();
  }

 private:
  dnnl::resampling_forward primitive_;
  /// Where the primitive writes when the output is not 64-byte aligned; the staged result
  /// (then a step buffer), in the primitive's layout.
  memory aligned_dst_;
  std::optional<Staging> src_stage_, dst_stage_;
  bool finished_ = false;
};

/// The format of `hint` (the producer's layout of [N, C, H, W]) when it is one the resampling
/// reads as fast as plain (nhwc, nChw16c, nChw8c); nullopt otherwise.
std::optional<memory::format_tag> hinted_format(const OpDesc& desc, const memory::dims& dims) {
  auto hint = input_layout_hint(desc, 0, dims);
  if (!hint) return std::nullopt;
  using tag = memory::format_tag;
  for (tag t : {tag::nhwc, tag::nChw16c, tag::nChw8c}) {
    if (layout_bytes(memory::desc(dims, memory::data_type::f32, t)) == layout_bytes(*hint)) {
      return t;
    }
  }
  return std::nullopt;
}

/// Input `index`'s constant values as doubles (f32 or f64) or integers (i64, i32); `name`
/// names it in errors. Absent or empty: nullopt.
template <typename T>
Result<std::optional<std::vector<T>>> constant_list(const OpDesc& desc, size_t index,
                                                    const std::string& name) {
  if (!input_present(desc, index)) return std::optional<std::vector<T>>();
  const runtime::Tensor* t = input_constant(desc, index);
  if (t == nullptr) {
    return error(desc, Error::NotSupported,
                 "input " + std::to_string(index) + " (" + name + ") is not constant");
  }
  std::vector<T> values(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t->dtype()) {
      case runtime::ScalarType::Float32:
        values[i] = static_cast<T>(t->data_ptr<float>()[i]);
        break;
      case runtime::ScalarType::Float64:
        values[i] = static_cast<T>(t->data_ptr<double>()[i]);
        break;
      case runtime::ScalarType::Int64:
        values[i] = static_cast<T>(t->data_ptr<int64_t>()[i]);
        break;
      case runtime::ScalarType::Int32:
        values[i] = static_cast<T>(t->data_ptr<int32_t>()[i]);
        break;
      default:
        return error(desc, Error::NotSupported,
                     "input " + std::to_string(index) + " (" + name + ") has dtype " +
                         std::string(runtime::to_string(t->dtype())));
    }
  }
  if (values.empty()) return std::optional<std::vector<T>>();
  return std::optional<std::vector<T>>(std::move(values));
}

/// The ONNX options of a Resize or Upsample node, and its scales or sizes.
struct ResizeSpec {
  kernels::ResizeOptions options;
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
};

Result<ResizeSpec> read_upsample(const OpDesc& desc) {
  Attrs attrs(desc);
  ResizeSpec spec;
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.get_string("mode", "nearest"));
  if (mode == "nearest") {
    spec.options.mode = kernels::ResizeMode::Nearest;
  } else if (mode == "linear" || mode == "bilinear") {
    spec.options.mode = kernels::ResizeMode::Linear;
  } else {
    return error(desc, Error::NotSupported, "attribute 'mode' is '" + mode + "'");
  }
  spec.options.coordinates = kernels::ResizeCoordinates::Asymmetric;
  spec.options.nearest = kernels::ResizeNearest::Simple;
  if (desc.inputs.size() >= 2) {
    KILN_ASSIGN_OR_RETURN(spec.scales, constant_list<double>(desc, 1, "scales"));
  } else {
    for (const ir::Attribute& attribute : desc.attributes) {
      if (attribute.name != "scales") continue;
      if (const auto* v = std::get_if<std::vector<double>>(&attribute.value)) spec.scales = *v;
    }
  }
  if (!spec.scales) return error(desc, Error::InvalidArgument, "has no scales");
  return spec;
}

Result<ResizeSpec> read_resize(const OpDesc& desc) {
  Attrs attrs(desc);
  ResizeSpec spec;
  kernels::ResizeOptions& o = spec.options;
  KILN_ASSIGN_OR_RETURN(std::string mode, attrs.get_string("mode", "nearest"));
  KILN_ASSIGN_OR_RETURN(std::string coordinates,
                        attrs.get_string("coordinate_transformation_mode", "half_pixel"));
  KILN_ASSIGN_OR_RETURN(std::string nearest,
                        attrs.get_string("nearest_mode", "round_prefer_floor"));
  KILN_ASSIGN_OR_RETURN(std::string aspect,
                        attrs.get_string("keep_aspect_ratio_policy", "stretch"));
  KILN_ASSIGN_OR_RETURN(int64_t antialias, attrs.get_int("antialias", 0));
  KILN_ASSIGN_OR_RETURN(int64_t exclude_outside, attrs.get_int("exclude_outside", 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, attrs.get_ints("axes"));
  auto parsed_mode = kernels::parse_resize_mode(mode);
  auto parsed_coordinates = kernels::parse_resize_coordinates(coordinates);
  auto parsed_nearest = kernels::parse_resize_nearest(nearest);
  auto parsed_aspect = kernels::parse_resize_aspect(aspect);
  for (const Status& s : {parsed_mode.status(), parsed_coordinates.status(),
                          parsed_nearest.status(), parsed_aspect.status()}) {
    if (!s.ok()) return error(desc, s.code(), s.message());
  }
  o.mode = *parsed_mode;
  o.coordinates = *parsed_coordinates;
  o.nearest = *parsed_nearest;
  o.aspect = *parsed_aspect;
  if (o.coordinates == kernels::ResizeCoordinates::TfCropAndResize) {
    return error(desc, Error::NotSupported,
                 "attribute 'coordinate_transformation_mode' is 'tf_crop_and_resize'");
  }
  // Cubic, antialias and exclude_outside: kiln's loops only (see create_resize).
  o.antialias = antialias != 0;
  o.exclude_outside = exclude_outside != 0;
  if (!axes.empty()) return error(desc, Error::NotSupported, "attribute 'axes' is set");
  if (desc.inputs.size() == 2) {
    // Opset 10: (X, scales), asymmetric coordinates and Upsample's nearest rounding.
    o.coordinates = kernels::ResizeCoordinates::Asymmetric;
    o.nearest = kernels::ResizeNearest::Simple;
    KILN_ASSIGN_OR_RETURN(spec.scales, constant_list<double>(desc, 1, "scales"));
  } else {
    KILN_ASSIGN_OR_RETURN(spec.scales, constant_list<double>(desc, 2, "scales"));
    KILN_ASSIGN_OR_RETURN(spec.sizes, constant_list<int64_t>(desc, 3, "sizes"));
  }
  if (spec.scales.has_value() == spec.sizes.has_value()) {
    return error(desc, Error::InvalidArgument,
                 std::string(spec.scales ? "both" : "neither") +
                     " of scales and sizes are given (expected exactly one)");
  }
  return spec;
}

/// The probe image: distinct exact values (the flat spatial index) for nearest, so equality
/// proves the same source index; a scrambled pattern in [0, 1) for linear, so a different
/// coordinate shows as a different value.
float probe_value(kernels::ResizeMode mode, int64_t index) {
  if (mode == kernels::ResizeMode::Nearest) return static_cast<float>(index);
  const auto hash = static_cast<uint32_t>(static_cast<uint64_t>(index) * 2654435761u);
  return static_cast<float>(hash >> 8) / static_cast<float>(1 << 24);
}

/// Runs `op` on the probe image and compares every output plane with the reference kernel's
/// result on one plane. Ok when they agree; NotSupported naming the first difference.
std::atomic<uint64_t> proofs_run{0};

Status prove_against_reference(const OpDesc& desc, CpuOp& op, const kernels::ResizePlan& plan,
                               const kernels::ResizeOptions& options) {
  proofs_run.fetch_add(1, std::memory_order_relaxed);
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const int64_t planes = x[0] * x[1], in_plane = x[2] * x[3];
  const int64_t out_plane = plan.sizes[2] * plan.sizes[3];
  // The proof's buffers are kept per thread between proofs (a model's Resizes are proved one
  // after another): fresh pages cost more than the proof's own work on some machines.
  thread_local std::vector<float> src_storage, dst_storage, expected_storage;
  auto at_least = [](std::vector<float>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  };
  float* src = at_least(src_storage, planes * in_plane);
  for (int64_t i = 0; i < in_plane; ++i) {
    const float v = probe_value(options.mode, i);
    for (int64_t p = 0; p < planes; ++p) src[static_cast<size_t>(p * in_plane + i)] = v;
  }
  // One float more than the output, used at an offset of 1: the probe writes to an unaligned
  // address, so it also proves the copy through the aligned buffer.
  float* dst_base = at_least(dst_storage, planes * out_plane + 16);
  float* dst = dst_base + ((reinterpret_cast<uintptr_t>(dst_base) % 64) == 0 ? 1 : 0);
  float* expected = at_least(expected_storage, out_plane);
  runtime::Tensor src_t(runtime::ScalarType::Float32, x, src);
  runtime::Tensor dst_t(runtime::ScalarType::Float32, plan.sizes, dst);
  runtime::Tensor plane_t(runtime::ScalarType::Float32, {1, 1, x[2], x[3]}, src);
  runtime::Tensor expected_t(runtime::ScalarType::Float32, {1, 1, plan.sizes[2], plan.sizes[3]},
                             expected);
  kernels::ResizePlan plane_plan = plan;
  plane_plan.sizes[0] = plane_plan.sizes[1] = 1;
  KILN_RETURN_IF_ERROR(kernels::resize(plane_t, plane_plan, options, expected_t));
  std::vector<const runtime::Tensor*> inputs(desc.inputs.size(), nullptr);
  inputs[0] = &src_t;
  runtime::Tensor* outputs[] = {&dst_t};
  KILN_RETURN_IF_ERROR(op.run(inputs, runtime::Span<runtime::Tensor*>(outputs, 1)));
  const bool exact = options.mode == kernels::ResizeMode::Nearest;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < out_plane; ++i) {
      const float a = dst[static_cast<size_t>(p * out_plane + i)];
      const float e = expected[static_cast<size_t>(i)];
      if (exact ? a != e : !(std::fabs(a - e) <= 1e-5f)) {
        return error(desc, Error::NotSupported,
                     "oneDNN's resampling differs from ONNX's for this mode and scale: output " +
                         std::to_string(i / plan.sizes[3]) + "," +
                         std::to_string(i % plan.sizes[3]) + " reads " + std::to_string(a) +
                         " (expected " + std::to_string(e) + ")");
      }
    }
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_resize(const OpDesc& desc) {
  if (desc.inputs.empty() || desc.inputs.size() > 4) {
    return error(desc, Error::InvalidArgument,
                 "has " + std::to_string(desc.inputs.size()) + " inputs (expected 1..4)");
  }
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  if (desc.num_outputs != 1) {
    return error(desc, Error::NotSupported,
                 "asks for " + std::to_string(desc.num_outputs) + " outputs (expected 1)");
  }
  if (desc.inputs[0].dtype != runtime::ScalarType::Float32) {
    return error(desc, Error::NotSupported,
                 "input 0 has dtype " + std::string(runtime::to_string(desc.inputs[0].dtype)) +
                     " (expected f32)");
  }
  if (input_constant(desc, 0) != nullptr) {
    return error(desc, Error::NotSupported, "input 0 (X) is constant (expected a run-time input)");
  }
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  if (x.size() != 4) {
    return error(desc, Error::NotSupported,
                 "input 0 has rank " + std::to_string(x.size()) + " (expected 4: NCHW)");
  }
  KILN_ASSIGN_OR_RETURN(ResizeSpec spec,
                        desc.op == "Upsample" ? read_upsample(desc) : read_resize(desc));
  auto plan = kernels::resize_plan(x, nullptr, spec.scales ? &*spec.scales : nullptr,
                                   spec.sizes ? &*spec.sizes : nullptr, spec.options);
  if (!plan.ok()) return error(desc, plan.error(), plan.status().message());
  if (plan->sizes[0] != x[0] || plan->sizes[1] != x[1] || plan->scales[0] != 1.0 ||
      plan->scales[1] != 1.0) {
    return error(desc, Error::NotSupported,
                 "scales N or C (output " + runtime::shape_to_string(plan->sizes) + " for input " +
                     runtime::shape_to_string(x) + "; expected H and W only)");
  }
  for (size_t d = 0; d < 4; ++d) {
    if (x[d] == 0 || plan->sizes[d] == 0) {
      return error(desc, Error::NotSupported,
                   "input " + runtime::shape_to_string(x) + " or output " +
                       runtime::shape_to_string(plan->sizes) + " is empty");
    }
  }
  if (x[2] * x[3] >= (int64_t{1} << 24)) {
    return error(desc, Error::NotSupported,
                 "input plane " + std::to_string(x[2]) + "x" + std::to_string(x[3]) +
                     " is too large to prove the index mapping (expected < 2^24 elements)");
  }
  // The producer's layout, when adopted, for this op and for its proof's.
  const std::optional<memory::format_tag> format = hinted_format(desc, plain_md(x).dims());
  // Plain or in nChw16c, kiln's loops copy the pixels the reference kernel's index map names
  // (nearest) or sum those its taps name (linear, cubic), with no code generated and nothing
  // to prove (resize_loops.cpp).
  const bool blocked = format == memory::format_tag::nChw16c;
  if (desc.small_ops_own_loops && own_vector_loops() && (!format || blocked)) {
    return spec.options.mode == kernels::ResizeMode::Nearest
               ? create_nearest_resize(desc, *plan, spec.options, blocked)
               : create_interpolated_resize(desc, *plan, spec.options, blocked);
  }
  if (spec.options.mode == kernels::ResizeMode::Cubic) {
    return error(desc, Error::NotSupported,
                 "attribute 'mode' is 'cubic' (oneDNN's resampling has none; kiln's loops "
                 "take it in plain NCHW or nChw16c, with AVX-512)");
  }
  if (spec.options.antialias || spec.options.exclude_outside) {
    return error(desc, Error::NotSupported,
                 std::string("attribute '") +
                     (spec.options.antialias ? "antialias" : "exclude_outside") +
                     "' is set (oneDNN's resampling has none; kiln's loops take it in plain "
                     "NCHW or nChw16c, with AVX-512)");
  }
  auto make = [&](const OpDesc& made, const std::vector<int64_t>& out) {
    const memory::desc x_plain = plain_md(made.inputs[0].sizes);
    const memory::desc y_plain = plain_md(out);
    memory::desc x_md = x_plain;
    memory::desc y_md = y_plain;
    if (format) {
      x_md = memory::desc(x_plain.dims(), memory::data_type::f32, *format);
      y_md = memory::desc(y_plain.dims(), memory::data_type::f32, *format);
    }
    const auto alg = spec.options.mode == kernels::ResizeMode::Nearest
                         ? dnnl::algorithm::resampling_nearest
                         : dnnl::algorithm::resampling_linear;
    dnnl::resampling_forward::desc resampling_desc(dnnl::prop_kind::forward_inference, alg, x_md,
                                                   y_md);
    dnnl::resampling_forward::primitive_desc pd(resampling_desc, base_attr(), cpu_engine());
    return std::make_unique<ResampleOp>(made, pd, out, x_plain, y_plain);
  };
  auto op = make(desc, plan->sizes);
  // A plan a cache entry records was proved when the entry was made; the caller compares it.
  if (desc.proofs_recorded) return std::unique_ptr<CpuOp>(std::move(op));
  // The proof runs on an op of its own, when oneDNN runs that on the same implementation:
  // - on one image of one block of channels: the proof touches every plane of the source and
  //   result, whose fresh pages can cost more than the proof (a detector's 256-channel Resize:
  //   megabytes), and the index mapping does not depend on the planes;
  // - on one thread: an OpenMP team woken in the middle of a specialization spins between its
  //   regions, and every page-table change of the serial work that follows (oneDNN generating
  //   code) then interrupts the spinning core. OCR detection's first run at 2 threads took
  //   twice its 1-thread time on a 2-vCPU machine. The mapping does not depend on threads.
  constexpr int64_t kProofChannels = 16;
  const bool fewer_planes = x[0] * x[1] > kProofChannels;
  if (fewer_planes || desc.num_threads > 1) {
    OpDesc proof_desc = desc;
    proof_desc.num_threads = 1;
    kernels::ResizePlan proof_plan = *plan;
    if (fewer_planes) {
      proof_desc.inputs[0].sizes = {1, std::min(x[1], kProofChannels), x[2], x[3]};
      proof_plan.sizes[0] = 1;
      proof_plan.sizes[1] = proof_desc.inputs[0].sizes[1];
    }
    auto proof_op = make(proof_desc, proof_plan.sizes);
    if (proof_op->describe() == op->describe()) {
      KILN_RETURN_IF_ERROR(
          prove_against_reference(proof_desc, *proof_op, proof_plan, spec.options));
      return std::unique_ptr<CpuOp>(std::move(op));
    }
  }
  KILN_RETURN_IF_ERROR(prove_against_reference(desc, *op, *plan, spec.options));
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace kiln::engine::cpu::dnnl_impl

namespace kiln::engine::cpu {
uint64_t resize_proofs_run() { return dnnl_impl::proofs_run.load(std::memory_order_relaxed); }
}  // namespace kiln::engine::cpu
