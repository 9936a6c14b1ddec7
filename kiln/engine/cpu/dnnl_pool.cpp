// MaxPool, AveragePool (2-D, pooling_v2: pads, dilations, count_include_pad, ceil_mode) and
// GlobalAveragePool (a mean reduction), on plain NCHW tensors or in the layout of the input's
// producer (see OpDesc::input_layouts).

#include <kiln/engine/cpu/dnnl_staged.h>
#include <kiln/kernels/nn_conv_ops.h>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

Result<std::unique_ptr<CpuOp>> create_global_average_pool(const OpDesc& desc) {
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  auto shape = kernels::global_pool_shape(x);
  if (!shape.ok()) return error(desc, shape.error(), shape.status().message());
  KILN_RETURN_IF_ERROR(check_planned_output(desc, 0, *shape));
  memory::desc x_md = plain_md(x), y_md = plain_md(*shape);
  // Reads its producer's layout when it has one (e.g. a Conv's blocked output).
  std::optional<memory::desc> hint = input_layout_hint(desc, 0, x_md.dims());
  if (hint && x.size() == 4) {
    // oneDNN's reduction has no JIT kernel for a layout other than plain (its reference one is
    // hundreds of times slower); average pooling over the whole image has one for every layout.
    memory::desc y_any(y_md.dims(), memory::data_type::f32, memory::format_tag::any);
    dnnl::pooling_v2_forward::desc pool_desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::pooling_avg_exclude_padding, *hint,
                                             y_any, {1, 1}, {x[2], x[3]}, {0, 0}, {0, 0}, {0, 0});
    dnnl::pooling_v2_forward::primitive_desc pd(pool_desc, base_attr(), cpu_engine());
    auto op = std::make_unique<StagedOp>(desc, dnnl::pooling_v2_forward(pd), pd, *shape);
    op->bind_input(0, DNNL_ARG_SRC, x_md, pd.src_desc());
    op->bind_output(DNNL_ARG_DST, y_md, pd.dst_desc());
    return std::unique_ptr<CpuOp>(std::move(op));
  }
  memory::desc x_want = hint.value_or(x_md);
  dnnl::reduction::desc reduction_desc(dnnl::algorithm::reduction_mean, x_want, y_md, 0.0f, 0.0f);
  dnnl::reduction::primitive_desc pd(reduction_desc, base_attr(), cpu_engine());
  auto op = std::make_unique<StagedOp>(desc, dnnl::reduction(pd), pd, *shape);
  op->bind_input(0, DNNL_ARG_SRC, x_md, pd.src_desc());
  op->bind_output(DNNL_ARG_DST, y_md, pd.dst_desc());
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_pool(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 1, 1));
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  if (input_constant(desc, 0) != nullptr) {
    return error(desc, Error::NotSupported, "input 0 is a constant (expected it folded)");
  }
  if (desc.op == "GlobalAveragePool") return create_global_average_pool(desc);
  bool max = desc.op == "MaxPool";
  Attrs attrs(desc);
  kernels::PoolOptions options;
  KILN_ASSIGN_OR_RETURN(options.kernel_shape, attrs.get_ints("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(options.strides, attrs.get_ints("strides"));
  KILN_ASSIGN_OR_RETURN(options.dilations, attrs.get_ints("dilations"));
  KILN_ASSIGN_OR_RETURN(options.pads, attrs.get_ints("pads"));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, attrs.get_int("ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(int64_t include_pad, attrs.get_int("count_include_pad", 0));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  KILN_ASSIGN_OR_RETURN(int64_t storage_order, attrs.get_int("storage_order", 0));
  (void)storage_order;  // Only affects the Indices output, which is not supported.
  auto parsed = kernels::parse_auto_pad(desc.op, auto_pad);
  if (!parsed.ok()) return error(desc, parsed.error(), parsed.status().message());
  if (*parsed != kernels::AutoPad::NotSet && *parsed != kernels::AutoPad::Valid) {
    return error(desc, Error::NotSupported,
                 "attribute 'auto_pad' has value " + auto_pad + " (expected NOTSET or VALID)");
  }
  options.auto_pad = *parsed;
  options.ceil_mode = ceil_mode != 0;
  options.count_include_pad = include_pad != 0;
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  auto shape = kernels::pool_shape(x, options);
  if (!shape.ok()) return error(desc, shape.error(), shape.status().message());
  KILN_RETURN_IF_ERROR(check_planned_output(desc, 0, *shape));
  if (x.size() != 4) {
    return error(desc, Error::NotSupported,
                 "input 0 has rank " + std::to_string(x.size()) + " (expected 4: 2-D pooling)");
  }
  memory::dims strides, kernel, dilations, pad_begin, pad_end;
  for (size_t i = 0; i < 2; ++i) {
    int64_t stride = options.strides.empty() ? 1 : options.strides[i];
    int64_t dilation = options.dilations.empty() ? 1 : options.dilations[i];
    int64_t begin =
        options.pads.empty() || options.auto_pad == kernels::AutoPad::Valid ? 0 : options.pads[i];
    int64_t declared_end = options.pads.empty() || options.auto_pad == kernels::AutoPad::Valid
                               ? 0
                               : options.pads[2 + i];
    int64_t extent = (options.kernel_shape[i] - 1) * dilation + 1;
    int64_t end = ((*shape)[2 + i] - 1) * stride + extent - x[2 + i] - begin;
    if (!max && options.count_include_pad && end > declared_end) {
      // ceil_mode's extra padding must not count in the window size, which oneDNN would do.
      return error(desc, Error::NotSupported,
                   "ceil_mode with count_include_pad grows the end padding (not supported)");
    }
    strides.push_back(stride);
    kernel.push_back(options.kernel_shape[i]);
    dilations.push_back(dilation - 1);
    pad_begin.push_back(begin);
    pad_end.push_back(end);
  }
  auto alg = max ? dnnl::algorithm::pooling_max
                 : (options.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                              : dnnl::algorithm::pooling_avg_exclude_padding);
  memory::desc x_md = plain_md(x), y_md = plain_md(*shape);
  // With a producer in a layout of its own, pool in that layout (the result in the matching
  // layout oneDNN picks), so Conv → Pool → Conv chains stay native.
  std::optional<memory::desc> hint = input_layout_hint(desc, 0, x_md.dims());
  memory::desc x_want = hint.value_or(x_md);
  memory::desc y_want =
      hint ? memory::desc(y_md.dims(), memory::data_type::f32, memory::format_tag::any) : y_md;
  dnnl::pooling_v2_forward::desc pool_desc(dnnl::prop_kind::forward_inference, alg, x_want, y_want,
                                           strides, kernel, dilations, pad_begin, pad_end);
  dnnl::pooling_v2_forward::primitive_desc pd(pool_desc, base_attr(), cpu_engine());
  auto op = std::make_unique<StagedOp>(desc, dnnl::pooling_v2_forward(pd), pd, *shape);
  op->bind_input(0, DNNL_ARG_SRC, x_md, pd.src_desc());
  op->bind_output(DNNL_ARG_DST, y_md, pd.dst_desc());
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace kiln::engine::cpu::dnnl_impl
