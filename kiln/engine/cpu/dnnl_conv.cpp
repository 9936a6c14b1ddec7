// 1-D, 2-D and 3-D Conv on oneDNN's convolution primitive: groups (depthwise too), strides,
// dilations, pads, bias, eltwise post-ops and one residual sum. Weights are packed once at
// creation; with ActivationLayout::Preferred the activations use the layout oneDNN picks
// (blocked nChw16c on AVX-512), staged as `ConvLikeOp` does; with ActivationLayout::Blocked,
// nChw16c and (OpDesc::winograd) Winograd kernels for 3x3 stride-1 Convs.

#include <kiln/engine/cpu/dnnl_conv_like.h>
#include <kiln/kernels/nn_conv_ops.h>

#include <algorithm>
#include <optional>
#include <string>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

class ConvOp final : public ConvLikeOp {
 public:
  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc);
};

}  // namespace

Result<std::vector<int64_t>> conv_geometry(const OpDesc& desc, memory::dims& strides,
                                           memory::dims& dilations, memory::dims& pad_begin,
                                           memory::dims& pad_end, int64_t& group) {
  Attrs attrs(desc);
  kernels::ConvOptions options;
  KILN_ASSIGN_OR_RETURN(options.kernel_shape, attrs.get_ints("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(options.strides, attrs.get_ints("strides"));
  KILN_ASSIGN_OR_RETURN(options.dilations, attrs.get_ints("dilations"));
  KILN_ASSIGN_OR_RETURN(options.pads, attrs.get_ints("pads"));
  KILN_ASSIGN_OR_RETURN(options.group, attrs.get_int("group", 1));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  auto parsed = kernels::parse_auto_pad("Conv", auto_pad);
  if (!parsed.ok()) return error(desc, parsed.error(), parsed.status().message());
  options.auto_pad = *parsed;
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  auto shape = kernels::conv_shape(x, w, options);
  if (!shape.ok()) return error(desc, shape.error(), shape.status().message());
  KILN_RETURN_IF_ERROR(check_planned_output(desc, 0, *shape));
  if (x.size() < 3 || x.size() > 5) {
    return error(desc, Error::NotSupported,
                 "input 0 has rank " + std::to_string(x.size()) +
                     " (expected 3, 4 or 5: a 1-D, 2-D or 3-D conv)");
  }
  group = options.group;
  for (size_t i = 0; i + 2 < x.size(); ++i) {
    int64_t stride = options.strides.empty() ? 1 : options.strides[i];
    int64_t dilation = options.dilations.empty() ? 1 : options.dilations[i];
    int64_t extent = (w[2 + i] - 1) * dilation + 1;
    int64_t begin = options.pads.empty() ? 0 : options.pads[i];
    if (options.auto_pad == kernels::AutoPad::Valid) begin = 0;
    if (options.auto_pad == kernels::AutoPad::SameUpper ||
        options.auto_pad == kernels::AutoPad::SameLower) {
      int64_t total = std::max<int64_t>(0, ((*shape)[2 + i] - 1) * stride + extent - x[2 + i]);
      begin = options.auto_pad == kernels::AutoPad::SameUpper ? total / 2 : total - total / 2;
    }
    // The end pad oneDNN needs to produce exactly the ONNX output size.
    int64_t end = ((*shape)[2 + i] - 1) * stride + extent - x[2 + i] - begin;
    strides.push_back(stride);
    dilations.push_back(dilation - 1);
    pad_begin.push_back(begin);
    pad_end.push_back(end);
  }
  return shape;
}

namespace {

struct Geometry {
  const memory::dims& strides;
  const memory::dims& dilations;
  const memory::dims& pad_begin;
  const memory::dims& pad_end;
};

bool all_equal(const memory::dims& dims, int64_t value) {
  return std::all_of(dims.begin(), dims.end(), [value](int64_t d) { return d == value; });
}

// The primitive of a 2-D Conv in ActivationLayout::Blocked (Winograd when asked and eligible),
// or nullopt when oneDNN has no optimized kernel for it (the caller falls back to Preferred).
template <typename MakePd>
std::optional<dnnl::convolution_forward::primitive_desc> blocked_pd(
    const OpDesc& desc, const memory::desc& x_plain, const memory::desc& y_plain,
    const std::vector<int64_t>& w, const Geometry& geometry, int64_t group, MakePd make_pd) {
  const memory::dims x = x_plain.dims(), y = y_plain.dims();
  constexpr int64_t kBlock = 16;
  if (x.size() != 4) return std::nullopt;
  auto blocked = [](const memory::dims& dims) {
    return memory::desc(dims, memory::data_type::f32, memory::format_tag::nChw16c);
  };
  // An image of a few channels is read plain (oneDNN's first-layer kernels take it so); other
  // channel counts are padded to whole blocks.
  memory::desc x_md = x[1] >= kBlock ? blocked(x) : x_plain;
  memory::desc y_md = blocked(y);
  auto implemented = [](const dnnl::convolution_forward::primitive_desc& pd, const char* name) {
    return std::string(pd.impl_info_str()).find(name) != std::string::npos;
  };
  bool winograd_shape = desc.winograd && group == 1 && w[2] == 3 && w[3] == 3 &&
                        x[1] % kBlock == 0 && all_equal(geometry.strides, 1) &&
                        all_equal(geometry.dilations, 0);
  if (winograd_shape) {
    try {
      auto pd = make_pd(dnnl::algorithm::convolution_winograd, x_md, y_md);
      if (implemented(pd, "wino")) return pd;
    } catch (const dnnl::error&) {
      // No Winograd kernel for these shapes or this CPU: the direct one below.
    }
  }
  try {
    auto pd = make_pd(dnnl::algorithm::convolution_direct, x_md, y_md);
    if (!implemented(pd, "ref")) return pd;
  } catch (const dnnl::error&) {
    // Not in this layout: the caller's Preferred one.
  }
  return std::nullopt;
}

// Whether a Conv given to Winograd (OpDesc::winograd) runs on kiln's Winograd loops: always
// where asked to avoid generated code; else over images of at least 12 x 12 pixels, where they
// ran faster than oneDNN's Winograd kernels on an Intel Xeon (0.57-0.85 x on maps of 20 x 20 to
// 160 x 160 up to 128 channels at 2 threads; ResNet-18's 256 channels at 14 x 14 0.68 x at 1
// thread, 0.94 at 2; `kiln_winograd_bench`), and generate no code for a new shape. On smaller
// images oneDNN's kernels win (a digit classifier's 16 -> 32 over 4 x 4: 7 against 20 us).
bool own_winograd(const OpDesc& desc) {
  constexpr int64_t kOwnWinogradPixels = 12 * 12;
  if (!desc.winograd) return false;
  if (desc.avoid_generated_code) return true;
  const std::vector<int64_t>& x =
      desc.inputs.empty() ? std::vector<int64_t>{} : desc.inputs[0].sizes;
  return x.size() == 4 && x[2] * x[3] >= kOwnWinogradPixels;
}

Result<std::unique_ptr<CpuOp>> ConvOp::create(const OpDesc& desc) {
  // Few output channels: oneDNN's kernels would fill a few of their 16 lanes.
  // (Both on kiln's vector loops, where this CPU runs them at their speed: own_vector_loops.)
  const bool loops = own_vector_loops();
  if (loops) {
    auto narrow = create_narrow_conv(desc);
    if (narrow.ok() || narrow.error() != Error::NotSupported) return narrow;
  }
  // A 1x1 or direct Conv among blocked ones, or the first one over an image: kiln's loops run
  // it about as fast (0.9-1.1 x oneDNN's kernel, `kiln_blocked_conv_bench`) and generate no
  // code at load. So do its Winograd loops, for a Conv given to Winograd (own_winograd).
  if (loops && desc.small_ops_own_loops) {
    if (own_winograd(desc)) {
      auto winograd = create_winograd_conv(
          desc, desc.winograd_one_tile ? WinogradTile::F4x4 : WinogradTile::Auto);
      if (winograd.ok() || winograd.error() != Error::NotSupported) return winograd;
    }
    auto depthwise = create_depthwise_conv(desc);
    if (depthwise.ok() || depthwise.error() != Error::NotSupported) return depthwise;
    auto image = create_image_conv(desc);
    if (image.ok() || image.error() != Error::NotSupported) return image;
    auto blocked = create_blocked_conv(desc);
    if (blocked.ok() || blocked.error() != Error::NotSupported) return blocked;
  }
  auto op = std::make_unique<ConvOp>();
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3));
  int residuals = num_residuals(desc);
  if (residuals > 1) return error(desc, Error::NotSupported, "has more than one residual");
  const runtime::Tensor* weights = input_constant(desc, 1);
  if (weights == nullptr) {
    return error(desc, Error::NotSupported, "input 1 (W) is not constant (expected a weight)");
  }
  memory::dims strides, dilations, pad_begin, pad_end;
  int64_t group = 1;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out,
                        conv_geometry(desc, strides, dilations, pad_begin, pad_end, group));
  op->op_ = desc.op;
  op->num_threads_ = desc.num_threads;
  op->num_inputs_ = desc.inputs.size();
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, out}};

  const std::vector<int64_t>& w = desc.inputs[1].sizes;
  memory::dims w_dims(w.begin(), w.end());  // [O, I, spatial...], grouped: [G, O/G, I, ...]
  if (group != 1) {
    w_dims[0] = w[0] / group;
    w_dims.insert(w_dims.begin(), group);
  }
  memory::desc x_plain = plain_md(desc.inputs[0].sizes);
  memory::desc y_plain = plain_md(out);
  memory::desc w_plain = plain_md(std::vector<int64_t>(w_dims.begin(), w_dims.end()));
  bool preferred = desc.activation_layout != ActivationLayout::Plain;
  auto any = [](const memory::dims& dims) {
    return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
  };
  memory::desc x_md = preferred ? any(x_plain.dims()) : x_plain;
  memory::desc y_md = preferred ? any(y_plain.dims()) : y_plain;
  bool has_bias =
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
  if (group == 1 && out.size() == 3 && dilations[0] == 0 &&
      desc.activation_layout != ActivationLayout::Plain) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CpuOp> patches,
                          create_conv_patches(desc, strides[0], pad_begin[0], out));
    if (patches != nullptr) return patches;
  }

  dnnl::primitive_attr attr = base_attr();
  dnnl::post_ops ops;
  KILN_RETURN_IF_ERROR(append_post_ops(desc, y_md, true, ops).status());
  attr.set_post_ops(ops);
  Geometry geometry{strides, dilations, pad_begin, pad_end};
  auto make_pd = [&](dnnl::algorithm alg, const memory::desc& x, const memory::desc& y) {
    auto kind = dnnl::prop_kind::forward_inference;
    auto conv_desc = has_bias
                         ? dnnl::convolution_forward::desc(kind, alg, x, any(w_dims), b_md, y,
                                                           strides, dilations, pad_begin, pad_end)
                         : dnnl::convolution_forward::desc(kind, alg, x, any(w_dims), y, strides,
                                                           dilations, pad_begin, pad_end);
    return dnnl::convolution_forward::primitive_desc(conv_desc, attr, cpu_engine());
  };
  std::optional<dnnl::convolution_forward::primitive_desc> blocked;
  if (desc.activation_layout == ActivationLayout::Blocked) {
    blocked = blocked_pd(desc, x_plain, y_plain, w, geometry, group, make_pd);
  }
  dnnl::convolution_forward::primitive_desc pd =
      blocked ? std::move(*blocked) : make_pd(dnnl::algorithm::convolution_direct, x_md, y_md);
  op->primitive_ = dnnl::convolution_forward(pd);
  op->describe_ = describe_pd(pd) + " src:" + format_of(pd.src_desc()) +
                  " wei:" + format_of(pd.weights_desc()) + " dst:" + format_of(pd.dst_desc());
  op->hold_scratchpad(pd);

  KILN_ASSIGN_OR_RETURN(op->weights_,
                        pack_constant(desc, 1, w_plain, weights->data(), pd.weights_desc()));
  op->args_[DNNL_ARG_WEIGHTS] = op->weights_;

  op->stage(x_plain, pd.src_desc(), y_plain, pd.dst_desc(), residuals, desc.inputs.size());
  if (has_bias) op->bind_bias(desc, b_md);
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_conv(const OpDesc& desc) { return ConvOp::create(desc); }

}  // namespace kiln::engine::cpu::dnnl_impl
