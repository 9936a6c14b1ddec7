// 2-D ConvTranspose on oneDNN's deconvolution primitive: groups, strides, dilations, pads,
// output_padding, auto_pad, output_shape, bias (constant or not), eltwise post-ops and one
// residual sum. The output shape and pads follow the reference kernel (kernels::
// conv_transpose_shape); ONNX weights [C, M / group, kH, kW] are read through a strided view
// as oneDNN's [G,] OC, IC, KH, KW and packed once. With ActivationLayout::Preferred the
// activations use the layout oneDNN picks, reordered from and to plain NCHW through buffers
// the op holds.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/kernels/nn_conv_ops.h>

#include <algorithm>
#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

/// A reorder between a caller's plain tensor and an internal buffer.
struct Staging {
  memory plain;     ///< Re-pointed at the caller's data each run.
  memory internal;  ///< Owned, in the primitive's layout.
  dnnl::reorder reorder;
};

Staging make_stage(const memory::desc& plain, const memory::desc& internal, bool to_internal) {
  Staging stage{wrap(plain, nullptr), memory(internal, cpu_engine()), {}};
  stage.reorder = to_internal ? dnnl::reorder(stage.plain, stage.internal)
                              : dnnl::reorder(stage.internal, stage.plain);
  return stage;
}

class DeconvOp final : public DnnlOp {
 public:
  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
    if (inputs[0] == nullptr || (bias_index_ >= 0 && inputs[bias_index_] == nullptr) ||
        (residual_index_ >= 0 && inputs[residual_index_] == nullptr)) {
      return Status(Error::InvalidArgument,
                    "run op '" + op_ + "' (oneDNN): a required input is null");
    }
    std::unordered_map<int, memory>& args = args_;
    if (src_stage_) {
      point(src_stage_->plain, inputs[0]->data());
      KILN_RETURN_IF_ERROR(execute(src_stage_->reorder, {{DNNL_ARG_FROM, src_stage_->plain},
                                                         {DNNL_ARG_TO, src_stage_->internal}}));
    } else {
      point(args[DNNL_ARG_SRC], inputs[0]->data());
    }
    if (bias_index_ >= 0) point(args[DNNL_ARG_BIAS], inputs[bias_index_]->data());
    void* out = outputs[0]->mutable_data();
    if (dst_stage_) {
      point(dst_stage_->plain, out);
    } else {
      point(args[DNNL_ARG_DST], out);
    }
    if (residual_index_ >= 0) {
      const void* residual = inputs[residual_index_]->data();
      if (residual_stage_) {
        point(residual_stage_->plain, residual);
        KILN_RETURN_IF_ERROR(execute(
            residual_stage_->reorder,
            {{DNNL_ARG_FROM, residual_stage_->plain}, {DNNL_ARG_TO, dst_stage_->internal}}));
      } else if (residual != out) {
        std::memcpy(out, residual, outputs[0]->nbytes());
      }
    }
    KILN_RETURN_IF_ERROR(execute(primitive_, args));
    if (dst_stage_) {
      KILN_RETURN_IF_ERROR(execute(dst_stage_->reorder, {{DNNL_ARG_FROM, dst_stage_->internal},
                                                         {DNNL_ARG_TO, dst_stage_->plain}}));
    }
    return Status();
  }

  // Native layouts (see CpuOp): the source, and the result when no residual is added (the
  // residual path converts into the internal buffer, which a native result does not have).
  std::optional<NativeLayout> native_input_layout(size_t index) const override {
    if (index != 0 || !src_stage_) return std::nullopt;
    const memory::desc md = src_stage_->internal.get_desc();
    return NativeLayout{layout_bytes(md), static_cast<uint64_t>(md.get_size())};
  }
  std::optional<NativeLayout> native_output_layout(size_t index) const override {
    if (index != 0 || !dst_stage_ || residual_index_ >= 0) return std::nullopt;
    const memory::desc md = dst_stage_->internal.get_desc();
    return NativeLayout{layout_bytes(md), static_cast<uint64_t>(md.get_size())};
  }
  Status use_native_input(size_t index) override {
    if (index != 0 || !src_stage_) return CpuOp::use_native_input(index);
    args_[DNNL_ARG_SRC] = wrap(src_stage_->internal.get_desc(), nullptr);
    src_stage_.reset();
    return Status();
  }
  Status use_native_output(size_t index) override {
    if (!native_output_layout(index)) return CpuOp::use_native_output(index);
    args_[DNNL_ARG_DST] = wrap(dst_stage_->internal.get_desc(), nullptr);
    dst_stage_.reset();
    return Status();
  }

  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);

 private:
  dnnl::deconvolution_forward primitive_;
  std::optional<Staging> src_stage_, dst_stage_, residual_stage_;
  int bias_index_ = -1;
  int residual_index_ = -1;
  memory weights_, bias_;
};

/// oneDNN's geometry of one ConvTranspose: strides, dilations (oneDNN counts from 0), pads.
struct Geometry {
  memory::dims strides, dilations, pad_begin, pad_end;
};

/// Reads the ONNX attributes and returns the output shape (the reference kernel's); fills
/// `geometry` with the pads that give oneDNN exactly that output.
Result<std::vector<int64_t>> deconv_geometry(const OpDesc& desc, int64_t& group,
                                             Geometry& geometry) {
  Attrs attrs(desc);
  kernels::ConvTransposeOptions options;
  KILN_ASSIGN_OR_RETURN(options.kernel_shape, attrs.get_ints("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(options.strides, attrs.get_ints("strides"));
  KILN_ASSIGN_OR_RETURN(options.dilations, attrs.get_ints("dilations"));
  KILN_ASSIGN_OR_RETURN(options.pads, attrs.get_ints("pads"));
  KILN_ASSIGN_OR_RETURN(options.output_padding, attrs.get_ints("output_padding"));
  KILN_ASSIGN_OR_RETURN(options.output_shape, attrs.get_ints("output_shape"));
  KILN_ASSIGN_OR_RETURN(options.group, attrs.get_int("group", 1));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  auto parsed = kernels::parse_auto_pad("ConvTranspose", auto_pad);
  if (!parsed.ok()) return error(desc, parsed.error(), parsed.status().message());
  options.auto_pad = *parsed;
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  auto shape = kernels::conv_transpose_shape(x, w, options);
  if (!shape.ok()) return error(desc, shape.error(), shape.status().message());
  if (x.size() != 4) {
    return error(
        desc, Error::NotSupported,
        "input 0 has rank " + std::to_string(x.size()) + " (expected 4: 2-D ConvTranspose)");
  }
  group = options.group;
  const bool fixed_output = !options.output_shape.empty() ||
                            options.auto_pad == kernels::AutoPad::SameUpper ||
                            options.auto_pad == kernels::AutoPad::SameLower;
  for (size_t i = 0; i < 2; ++i) {
    const int64_t stride = options.strides.empty() ? 1 : options.strides[i];
    const int64_t dilation = options.dilations.empty() ? 1 : options.dilations[i];
    const int64_t extent = (w[2 + i] - 1) * dilation + 1;
    const int64_t out = (*shape)[2 + i];
    // The begin pad as the reference kernel resolves it.
    int64_t begin = 0;
    if (fixed_output) {
      const int64_t padding = options.output_padding.empty() ? 0 : options.output_padding[i];
      const int64_t full = stride * (x[2 + i] - 1) + padding + extent;
      const int64_t total = std::max<int64_t>(0, full - out);
      begin = options.auto_pad == kernels::AutoPad::SameUpper ? total / 2 : total - total / 2;
    } else if (options.auto_pad == kernels::AutoPad::NotSet && !options.pads.empty()) {
      begin = options.pads[i];
    }
    // The end pad oneDNN needs for exactly the ONNX output size. Negative when
    // output_padding or output_shape reach past the kernel's last position: oneDNN then
    // writes only the bias there, as the reference kernel does.
    const int64_t end = (x[2 + i] - 1) * stride + extent - out - begin;
    geometry.strides.push_back(stride);
    geometry.dilations.push_back(dilation - 1);
    geometry.pad_begin.push_back(begin);
    geometry.pad_end.push_back(end);
  }
  return shape;
}

/// ONNX's W [C, M / group, kH, kW] seen as oneDNN's weights {[G,] OC / G, IC / G, KH, KW}.
memory::desc onnx_weights_md(const std::vector<int64_t>& w, int64_t group) {
  const int64_t ic = w[0] / group, oc = w[1], kh = w[2], kw = w[3];
  const int64_t plane = kh * kw;
  if (group == 1) {
    return memory::desc({oc, ic, kh, kw}, memory::data_type::f32,
                        memory::dims{plane, oc * plane, kw, 1});
  }
  return memory::desc({group, oc, ic, kh, kw}, memory::data_type::f32,
                      memory::dims{ic * oc * plane, plane, oc * plane, kw, 1});
}

Result<std::unique_ptr<CpuOp>> DeconvOp::create(const OpDesc& desc) {
  auto op = std::make_unique<DeconvOp>();
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3));
  const int residuals = num_residuals(desc);
  if (residuals > 1) return error(desc, Error::NotSupported, "has more than one residual");
  const runtime::Tensor* weights = input_constant(desc, 1);
  if (weights == nullptr) {
    return error(desc, Error::NotSupported, "input 1 (W) is not constant (expected a weight)");
  }
  int64_t group = 1;
  Geometry geo;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out, deconv_geometry(desc, group, geo));
  for (int64_t size : out) {
    if (size == 0) {
      return error(desc, Error::NotSupported,
                   "output shape " + runtime::shape_to_string(out) + " is empty");
    }
  }
  op->op_ = desc.op;
  op->num_threads_ = desc.num_threads;
  op->num_inputs_ = desc.inputs.size();
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};

  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  memory::desc w_onnx = onnx_weights_md(w, group);
  memory::desc x_plain = plain_md(desc.inputs[0].sizes);
  memory::desc y_plain = plain_md(out);
  const bool preferred = desc.activation_layout == ActivationLayout::Preferred;
  auto any = [](const memory::dims& dims) {
    return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
  };
  memory::desc x_md = preferred ? any(x_plain.dims()) : x_plain;
  memory::desc y_md = preferred ? any(y_plain.dims()) : y_plain;
  const bool has_bias =
      desc.inputs.size() - static_cast<size_t>(residuals) == 3 && input_present(desc, 2);
  memory::desc b_md = plain_md(std::vector<int64_t>{out[1]});
  if (has_bias && desc.inputs[2].sizes != std::vector<int64_t>{out[1]}) {
    return error(desc, Error::InvalidArgument,
                 "input 2 (B) has shape " + runtime::shape_to_string(desc.inputs[2].sizes) +
                     " (expected [" + std::to_string(out[1]) + "])");
  }
  if (residuals == 1 && desc.inputs.back().sizes != out) {
    return error(desc, Error::InvalidArgument,
                 "residual has shape " + runtime::shape_to_string(desc.inputs.back().sizes) +
                     " (expected the output's " + runtime::shape_to_string(out) + ")");
  }

  dnnl::primitive_attr attr = base_attr();
  dnnl::post_ops ops;
  KILN_RETURN_IF_ERROR(append_post_ops(desc, y_md, true, ops).status());
  attr.set_post_ops(ops);
  const auto kind = dnnl::prop_kind::forward_inference;
  const auto alg = dnnl::algorithm::deconvolution_direct;
  const memory::desc w_any = any(w_onnx.dims());
  auto deconv_desc =
      has_bias ? dnnl::deconvolution_forward::desc(kind, alg, x_md, w_any, b_md, y_md, geo.strides,
                                                   geo.dilations, geo.pad_begin, geo.pad_end)
               : dnnl::deconvolution_forward::desc(kind, alg, x_md, w_any, y_md, geo.strides,
                                                   geo.dilations, geo.pad_begin, geo.pad_end);
  dnnl::deconvolution_forward::primitive_desc pd(deconv_desc, attr, cpu_engine());
  op->primitive_ = dnnl::deconvolution_forward(pd);
  op->describe_ = describe_pd(pd) + " src:" + format_of(pd.src_desc()) +
                  " wei:" + format_of(pd.weights_desc()) + " dst:" + format_of(pd.dst_desc());
  op->hold_scratchpad(pd);

  KILN_ASSIGN_OR_RETURN(op->weights_,
                        pack_constant(desc, 1, w_onnx, weights->data(), pd.weights_desc()));
  op->args_[DNNL_ARG_WEIGHTS] = op->weights_;

  if (pd.src_desc() != x_plain) {
    op->src_stage_ = make_stage(x_plain, pd.src_desc(), true);
    op->args_[DNNL_ARG_SRC] = op->src_stage_->internal;
  } else {
    op->args_[DNNL_ARG_SRC] = wrap(x_plain, nullptr);
  }
  if (pd.dst_desc() != y_plain) {
    op->dst_stage_ = make_stage(y_plain, pd.dst_desc(), false);
    op->args_[DNNL_ARG_DST] = op->dst_stage_->internal;
    if (residuals == 1) op->residual_stage_ = make_stage(y_plain, pd.dst_desc(), true);
  } else {
    op->args_[DNNL_ARG_DST] = wrap(y_plain, nullptr);
  }
  if (residuals == 1) op->residual_index_ = static_cast<int>(desc.inputs.size()) - 1;
  if (has_bias) {
    const runtime::Tensor* bias = input_constant(desc, 2);
    if (bias != nullptr) {
      op->bias_ = memory(b_md, cpu_engine());
      std::memcpy(op->bias_.get_data_handle(), bias->data(), bias->nbytes());
    } else {
      op->bias_ = wrap(b_md, nullptr);
      op->bias_index_ = 2;
    }
    op->args_[DNNL_ARG_BIAS] = op->bias_;
  }
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_deconv(const OpDesc& desc) { return DeconvOp::create(desc); }

}  // namespace kiln::engine::cpu::dnnl_impl
