// MatMul (numpy semantics, batch broadcast, optional bias input) and Gemm on oneDNN's matmul
// primitive. Constant weights are reordered once into the layout the primitive prefers.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/kernels/kernels.h>

#include <cstring>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::memory;

/// C of Gemm when it cannot be fused as a bias: beta * C is added by a sum post-op after C is
/// broadcast into dst at run time.
struct GemmC {
  int64_t rows = 0;             ///< 1 or M.
  int64_t cols = 0;             ///< 1 or N.
  std::vector<float> constant;  ///< C's values when constant.
  int index = -1;               ///< The input index when not constant.
};

// B of sizes [..., K, N] stored as its transpose, plain [..., N, K].
memory::desc transposed_md(const std::vector<int64_t>& b) {
  const size_t rank = b.size();
  memory::dims strides(rank);
  strides[rank - 2] = 1;
  strides[rank - 1] = b[rank - 2];
  int64_t stride = b[rank - 2] * b[rank - 1];
  for (size_t i = rank - 2; i-- > 0;) {
    strides[i] = stride;
    stride *= b[i];
  }
  return memory::desc(to_dims(b), memory::data_type::f32, strides);
}

class MatMulOp final : public DnnlOp {
 public:
  Status run(runtime::Span<const runtime::Tensor*> inputs,
             runtime::Span<runtime::Tensor*> outputs) override {
    KILN_RETURN_IF_ERROR(check_run_counts(inputs, outputs));
    point(src_, inputs[0]->data());
    if (!weights_constant_) point(weights_, inputs[1]->data());
    if (bias_index_ >= 0) point(bias_, inputs[static_cast<size_t>(bias_index_)]->data());
    float* dst = outputs[0]->mutable_data_ptr<float>();
    point(dst_, dst);
    for (size_t i = 0; i < residual_inputs_.size(); ++i) {
      point(residuals_[i], inputs[residual_inputs_[i]]->data());
    }
    if (c_) broadcast_c(inputs, dst);
    return execute(primitive_, args_);
  }

  static Result<std::unique_ptr<CpuOp>> create(const OpDesc& desc, bool gemm);

 private:
  void broadcast_c(runtime::Span<const runtime::Tensor*> inputs, float* dst) const {
    const float* c = c_->index >= 0 ? inputs[static_cast<size_t>(c_->index)]->data_ptr<float>()
                                    : c_->constant.data();
    for (int64_t m = 0; m < m_; ++m) {
      const float* row = c + (c_->rows == 1 ? 0 : m * c_->cols);
      float* out = dst + m * n_;
      if (c_->cols == 1) {
        for (int64_t n = 0; n < n_; ++n) out[n] = row[0];
      } else {
        std::memcpy(out, row, static_cast<size_t>(n_) * sizeof(float));
      }
    }
  }

  Status build(const OpDesc& desc, const memory::desc& src_md, const memory::desc& weights_md,
               const memory::desc* bias_md, const memory::desc& dst_md, float alpha,
               std::optional<float> sum_scale);

  dnnl::matmul primitive_;
  memory src_, weights_, bias_, dst_;
  std::vector<memory> residuals_;
  std::vector<size_t> residual_inputs_;
  bool weights_constant_ = false;
  int bias_index_ = -1;  ///< Run-time bias input; -1: none or constant.
  std::optional<GemmC> c_;
  int64_t m_ = 0, n_ = 0;
  memory bias_constant_;
};

Status MatMulOp::build(const OpDesc& desc, const memory::desc& src_md,
                       const memory::desc& weights_md, const memory::desc* bias_md,
                       const memory::desc& dst_md, float alpha, std::optional<float> sum_scale) {
  op_ = desc.op;
  num_threads_ = desc.num_threads;
  num_inputs_ = desc.inputs.size();
  dnnl::primitive_attr attr = base_attr();
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  dnnl::post_ops ops;
  if (sum_scale) ops.append_sum(*sum_scale);
  KILN_ASSIGN_OR_RETURN(std::vector<int> binary, append_post_ops(desc, dst_md, false, ops));
  attr.set_post_ops(ops);

  const runtime::Tensor* constant_weights = input_constant(desc, 1);
  weights_constant_ = constant_weights != nullptr;
  memory::desc weights_any(weights_md.dims(), memory::data_type::f32, memory::format_tag::any);
  auto op_desc =
      bias_md != nullptr
          ? dnnl::matmul::desc(src_md, weights_constant_ ? weights_any : weights_md, *bias_md,
                               dst_md)
          : dnnl::matmul::desc(src_md, weights_constant_ ? weights_any : weights_md, dst_md);
  dnnl::matmul::primitive_desc pd(op_desc, attr, cpu_engine());
  primitive_ = dnnl::matmul(pd);
  describe_ = describe_pd(pd) + " wei:" + format_of(pd.weights_desc());
  hold_scratchpad(pd);

  src_ = wrap(src_md, nullptr);
  dst_ = wrap(dst_md, nullptr);
  if (weights_constant_) {
    KILN_ASSIGN_OR_RETURN(
        weights_, pack_constant(desc, 1, weights_md, constant_weights->data(), pd.weights_desc()));
  } else {
    weights_ = wrap(weights_md, nullptr);
  }
  args_[DNNL_ARG_SRC] = src_;
  args_[DNNL_ARG_WEIGHTS] = weights_;
  args_[DNNL_ARG_DST] = dst_;
  if (bias_md != nullptr) {
    bias_ = bias_index_ >= 0 ? wrap(*bias_md, nullptr) : bias_constant_;
    args_[DNNL_ARG_BIAS] = bias_;
  }
  size_t first_residual = desc.inputs.size() - binary.size();
  for (size_t i = 0; i < binary.size(); ++i) {
    const TensorDesc& residual = desc.inputs[first_residual + i];
    if (residual.sizes != outputs_[0].sizes) {
      return error(desc, Error::InvalidArgument,
                   "residual input " + std::to_string(first_residual + i) + " has shape " +
                       runtime::shape_to_string(residual.sizes) + " (expected the output's " +
                       runtime::shape_to_string(outputs_[0].sizes) + ")");
    }
    residuals_.push_back(wrap(dst_md, nullptr));
    residual_inputs_.push_back(first_residual + i);
    args_[DNNL_ARG_ATTR_MULTIPLE_POST_OP(binary[i]) | DNNL_ARG_SRC_1] = residuals_.back();
  }
  return Status();
}

/// Pads `sizes` with leading ones to `rank`.
std::vector<int64_t> pad_rank(std::vector<int64_t> sizes, size_t rank) {
  sizes.insert(sizes.begin(), rank - sizes.size(), 1);
  return sizes;
}

Result<std::unique_ptr<CpuOp>> MatMulOp::create(const OpDesc& desc, bool gemm) {
  auto op = std::make_unique<MatMulOp>();
  size_t residuals = static_cast<size_t>(num_residuals(desc));
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 3));
  const std::vector<int64_t>& a = desc.inputs[0].sizes;
  const std::vector<int64_t>& b = desc.inputs[1].sizes;
  bool has_third = desc.inputs.size() - residuals == 3 && input_present(desc, 2);
  const runtime::Tensor* third_constant = has_third ? input_constant(desc, 2) : nullptr;

  if (desc.b_transposed && (gemm || b.size() < 2 || input_constant(desc, 1) != nullptr)) {
    return error(desc, Error::NotSupported,
                 "B read transposed (expected a MatMul by a computed B of rank 2 or more)");
  }
  if (!gemm) {
    auto shape = kernels::matmul_shape(a, b);
    if (!shape.ok()) return error(desc, shape.error(), shape.status().message());
    std::vector<int64_t> a2 = a.size() == 1 ? std::vector<int64_t>{1, a[0]} : a;
    std::vector<int64_t> b2 = b.size() == 1 ? std::vector<int64_t>{b[0], 1} : b;
    size_t rank = std::max(a2.size(), b2.size());
    a2 = pad_rank(a2, rank);
    b2 = pad_rank(b2, rank);
    std::vector<int64_t> d2(rank);
    for (size_t i = 0; i + 2 < rank; ++i) d2[i] = std::max(a2[i], b2[i]);
    d2[rank - 2] = a2[rank - 2];
    d2[rank - 1] = b2[rank - 1];
    // Constant weights without batch dims ([..., M, K] x [K, N]): one 2-D product of all rows,
    // [rows, K] x [K, N]. oneDNN then packs the weights into its blocked 2-D layouts; for a
    // batch of ones it keeps them plain and runs a single row (a decode step) 3 to 4 x slower.
    bool batched_weights = false;
    for (size_t i = 0; i + 2 < rank; ++i) batched_weights |= b2[i] != 1;
    if (rank > 2 && !batched_weights && input_constant(desc, 1) != nullptr) {
      int64_t rows = 1;
      for (size_t i = 0; i + 1 < rank; ++i) rows *= d2[i];
      a2 = {rows, a2[rank - 1]};
      b2 = {b2[rank - 2], b2[rank - 1]};
      d2 = {rows, d2[rank - 1]};
      rank = 2;
    }
    op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, *shape}};
    std::optional<memory::desc> bias_md;
    if (has_third) {
      const std::vector<int64_t>& bias = desc.inputs[2].sizes;
      if (bias.size() != 1 || bias[0] != d2[rank - 1]) {
        return error(desc, Error::InvalidArgument,
                     "bias (input 2) has shape " + runtime::shape_to_string(bias) + " (expected [" +
                         std::to_string(d2[rank - 1]) + "])");
      }
      bias_md = plain_md(pad_rank(bias, rank));
      if (third_constant != nullptr) {
        op->bias_constant_ = memory(*bias_md, cpu_engine());
        std::memcpy(op->bias_constant_.get_data_handle(), third_constant->data(),
                    third_constant->nbytes());
      } else {
        op->bias_index_ = 2;
      }
    }
    KILN_RETURN_IF_ERROR(op->build(desc, plain_md(a2),
                                   desc.b_transposed ? transposed_md(b2) : plain_md(b2),
                                   bias_md ? &*bias_md : nullptr, plain_md(d2), 1.0f, {}));
    return std::unique_ptr<CpuOp>(std::move(op));
  }

  Attrs attrs(desc);
  KILN_ASSIGN_OR_RETURN(double alpha, attrs.get_float("alpha", 1.0));
  KILN_ASSIGN_OR_RETURN(double beta, attrs.get_float("beta", 1.0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, attrs.get_int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, attrs.get_int("transB", 0));
  std::vector<int64_t> c_sizes = has_third ? desc.inputs[2].sizes : std::vector<int64_t>{};
  auto shape = kernels::gemm_shape(a, b, has_third ? &c_sizes : nullptr,
                                   kernels::GemmOptions{alpha, beta, trans_a != 0, trans_b != 0});
  if (!shape.ok()) return error(desc, shape.error(), shape.status().message());
  int64_t m = (*shape)[0], n = (*shape)[1], k = trans_a ? a[0] : a[1];
  op->m_ = m;
  op->n_ = n;
  op->outputs_ = {TensorDesc{runtime::ScalarType::Float32, *shape}};
  memory::desc src_md({m, k}, memory::data_type::f32,
                      trans_a ? memory::dims{1, m} : memory::dims{k, 1});
  memory::desc weights_md({k, n}, memory::data_type::f32,
                          trans_b ? memory::dims{1, k} : memory::dims{n, 1});
  std::optional<memory::desc> bias_md;
  std::optional<float> sum_scale;
  if (has_third && beta != 0.0) {
    std::vector<int64_t> c2 = pad_rank(c_sizes, 2);
    bool row_vector = c2[0] == 1 && c2[1] == n;
    // oneDNN scales the bias by the output scale too: fuse C as bias only when alpha is 1.
    if (row_vector && beta == 1.0 && alpha == 1.0) {
      bias_md = plain_md(std::vector<int64_t>{1, n});
      if (third_constant != nullptr) {
        op->bias_constant_ = memory(*bias_md, cpu_engine());
        std::memcpy(op->bias_constant_.get_data_handle(), third_constant->data(),
                    third_constant->nbytes());
      } else {
        op->bias_index_ = 2;
      }
    } else {
      GemmC c{c2[0], c2[1], {}, -1};
      if (third_constant != nullptr) {
        const float* values = third_constant->data_ptr<float>();
        c.constant.assign(values, values + third_constant->numel());
      } else {
        c.index = 2;
      }
      op->c_ = std::move(c);
      sum_scale = static_cast<float>(beta);
    }
  }
  KILN_RETURN_IF_ERROR(op->build(desc, src_md, weights_md, bias_md ? &*bias_md : nullptr,
                                 plain_md(std::vector<int64_t>{m, n}), static_cast<float>(alpha),
                                 sum_scale));
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_matmul(const OpDesc& desc) {
  return MatMulOp::create(desc, false);
}

Result<std::unique_ptr<CpuOp>> create_gemm(const OpDesc& desc) {
  return MatMulOp::create(desc, true);
}

}  // namespace kiln::engine::cpu::dnnl_impl
