// Softmax, LogSoftmax (one axis), LayerNormalization (the trailing axes from `axis`, as one
// flattened axis) and BatchNormalization (inference) on plain layouts.

#include <kiln/engine/cpu/dnnl_staged.h>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

Result<int64_t> normalize_axis(const OpDesc& desc, int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return error(desc, Error::InvalidArgument,
                 "attribute 'axis' has value " + std::to_string(axis) + " (expected " +
                     std::to_string(-r) + ".." + std::to_string(r - 1) + ")");
  }
  return axis < 0 ? axis + r : axis;
}

int64_t product(const std::vector<int64_t>& sizes, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= sizes[i];
  return p;
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_softmax(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 1, 1));
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  KILN_ASSIGN_OR_RETURN(int64_t attr_axis, Attrs(desc).get_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        normalize_axis(desc, attr_axis, std::max<size_t>(1, x.size())));
  memory::desc md = plain_md(x);
  auto kind = dnnl::prop_kind::forward_inference;
  std::unique_ptr<SimpleOp> op;
  if (desc.op == "LogSoftmax") {
    dnnl::logsoftmax_forward::primitive_desc pd(
        dnnl::logsoftmax_forward::desc(kind, md, static_cast<int>(axis)), base_attr(),
        cpu_engine());
    op = std::make_unique<SimpleOp>(desc, dnnl::logsoftmax_forward(pd), pd, x, md);
  } else {
    dnnl::softmax_forward::primitive_desc pd(
        dnnl::softmax_forward::desc(kind, md, static_cast<int>(axis)), base_attr(), cpu_engine());
    op = std::make_unique<SimpleOp>(desc, dnnl::softmax_forward(pd), pd, x, md);
  }
  op->bind_input(desc, 0, DNNL_ARG_SRC, md);
  return std::unique_ptr<CpuOp>(std::move(op));
}

Result<std::unique_ptr<CpuOp>> create_layer_norm(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3));
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(int64_t attr_axis, attrs.get_int("axis", -1));
  KILN_ASSIGN_OR_RETURN(double epsilon, attrs.get_float("epsilon", 1e-5));
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  if (x.empty())
    return error(desc, Error::InvalidArgument, "input 0 is a scalar (expected rank >= 1)");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(desc, attr_axis, x.size()));
  int64_t rows = product(x, 0, static_cast<size_t>(axis));
  int64_t cols = product(x, static_cast<size_t>(axis), x.size());
  std::vector<int64_t> normalized(x.begin() + axis, x.end());
  bool has_bias = desc.inputs.size() == 3 && input_present(desc, 2);
  for (size_t i = 1; i < (has_bias ? 3u : 2u); ++i) {
    if (desc.inputs[i].sizes != normalized && desc.inputs[i].sizes != std::vector<int64_t>{cols}) {
      return error(desc, Error::NotSupported,
                   "input " + std::to_string(i) + " has shape " +
                       runtime::shape_to_string(desc.inputs[i].sizes) + " (expected " +
                       runtime::shape_to_string(normalized) + "; broadcasting is not supported)");
    }
  }
  memory::desc md = plain_md(std::vector<int64_t>{rows, cols});
  memory::desc param_md = plain_md(std::vector<int64_t>{cols});
  auto flags = dnnl::normalization_flags::use_scale;
  if (has_bias) flags |= dnnl::normalization_flags::use_shift;
  dnnl::layer_normalization_forward::desc ln_desc(dnnl::prop_kind::forward_inference, md,
                                                  static_cast<float>(epsilon), flags);
  dnnl::layer_normalization_forward::primitive_desc pd(ln_desc, base_attr(), cpu_engine());
  auto op = std::make_unique<SimpleOp>(desc, dnnl::layer_normalization_forward(pd), pd, x, md);
  op->bind_input(desc, 0, DNNL_ARG_SRC, md);
  op->bind_input(desc, 1, DNNL_ARG_SCALE, param_md);
  if (has_bias) op->bind_input(desc, 2, DNNL_ARG_SHIFT, param_md);
  return std::unique_ptr<CpuOp>(std::move(op));
}

Result<std::unique_ptr<CpuOp>> create_batch_norm(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 5, 5));
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(double epsilon, attrs.get_float("epsilon", 1e-5));
  KILN_ASSIGN_OR_RETURN(int64_t training, attrs.get_int("training_mode", 0));
  if (training != 0) {
    return error(desc, Error::NotSupported, "attribute 'training_mode' is 1 (expected 0)");
  }
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  if (x.size() < 2) {
    return error(desc, Error::NotSupported,
                 "input 0 has rank " + std::to_string(x.size()) + " (expected >= 2)");
  }
  for (size_t i = 1; i < 5; ++i) {
    if (desc.inputs[i].sizes != std::vector<int64_t>{x[1]}) {
      return error(desc, Error::InvalidArgument,
                   "input " + std::to_string(i) + " has shape " +
                       runtime::shape_to_string(desc.inputs[i].sizes) + " (expected [" +
                       std::to_string(x[1]) + "])");
    }
  }
  // Spatial axes flattened: oneDNN's batch norm takes 2-D to 5-D tensors. With a producer in
  // a layout of its own (a 4-D blocked or nhwc tensor), normalize in that layout instead.
  memory::desc plain = plain_md(x);
  std::optional<memory::desc> hint = input_layout_hint(desc, 0, plain.dims());
  memory::desc md =
      hint ? *hint : plain_md(std::vector<int64_t>{x[0], x[1], product(x, 2, x.size())});
  memory::desc param_md = plain_md(std::vector<int64_t>{x[1]});
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_forward::desc bn_desc(dnnl::prop_kind::forward_inference, md,
                                                  static_cast<float>(epsilon), flags);
  dnnl::batch_normalization_forward::primitive_desc pd(bn_desc, base_attr(), cpu_engine());
  auto op = std::make_unique<StagedOp>(desc, dnnl::batch_normalization_forward(pd), pd, x);
  memory::desc plain_view = hint ? plain : md;
  op->bind_input(0, DNNL_ARG_SRC, plain_view, pd.src_desc());
  op->bind_param(desc, 1, DNNL_ARG_SCALE, param_md);
  op->bind_param(desc, 2, DNNL_ARG_SHIFT, param_md);
  op->bind_param(desc, 3, DNNL_ARG_MEAN, param_md);
  op->bind_param(desc, 4, DNNL_ARG_VARIANCE, param_md);
  op->bind_output(DNNL_ARG_DST, plain_view, pd.dst_desc());
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace kiln::engine::cpu::dnnl_impl
