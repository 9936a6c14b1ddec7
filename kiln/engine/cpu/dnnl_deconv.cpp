// 2-D ConvTranspose on oneDNN's deconvolution primitive: groups, strides, dilations, pads,
// output_padding, auto_pad, output_shape, bias (constant or not), eltwise post-ops and one
// residual sum. The output shape and pads follow the reference kernel (kernels::
// conv_transpose_shape); ONNX weights [C, M / group, kH, kW] are read through a strided view
// as oneDNN's [G,] OC, IC, KH, KW and packed once. With ActivationLayout::Preferred the
// activations use the layout oneDNN picks, reordered from and to plain NCHW through buffers
// the op holds.

#include <kiln/engine/cpu/dnnl_conv_like.h>
#include <kiln/kernels/nn_conv_ops.h>

#include <algorithm>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

class DeconvOp final : public ConvLikeOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);
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
  KILN_RETURN_IF_ERROR(check_planned_output(desc, 0, *shape));
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
  if (own_vector_loops()) {
    auto narrow = create_narrow_deconv(desc);
    if (narrow.ok() || narrow.error() != Error::NotSupported) return narrow;
    // Patches from a blocked Conv, where no code should be generated: kiln's 1x1 loops (0.8-0.9x
    // the speed of oneDNN's matmul and scatter on the OCR detector's head, whose kernel took
    // 0.5 ms to generate).
    if (desc.small_ops_own_loops && desc.avoid_generated_code) {
      auto loops = create_deconv_loops(desc);
      if (loops.ok() || loops.error() != Error::NotSupported) return loops;
    }
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CpuOp> patches, create_deconv_patches(desc));
  if (patches != nullptr) return patches;
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

  op->stage(x_plain, pd.src_desc(), y_plain, pd.dst_desc(), residuals, desc.inputs.size());
  if (has_bias) op->bind_bias(desc, b_md);
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_deconv(const OpDesc& desc) { return DeconvOp::create(desc); }

}  // namespace kiln::engine::cpu::dnnl_impl
