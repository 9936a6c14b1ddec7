// Element-wise unary ops (eltwise primitive over the flattened tensor) and Add/Mul with numpy
// broadcasting (binary primitive; oneDNN broadcasts only its second source, so a commutative
// op swaps its operands when the first one is the broadcast one).

#include <kiln/engine/cpu/dnnl_staged.h>
#include <kiln/engine/cpu/vector_math.h>
#include <kiln/kernels/broadcast.h>

#include <omp.h>

#include <algorithm>
#include <limits>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using dnnl::algorithm;
using dnnl::memory;

struct Eltwise {
  algorithm alg = algorithm::eltwise_relu;
  float alpha = 0.0f;
  float beta = 0.0f;
};

Result<float> constant_scalar(const OpDesc& desc, size_t index, float absent) {
  if (!input_present(desc, index)) return absent;
  const runtime::Tensor* constant = input_constant(desc, index);
  if (constant == nullptr || constant->numel() != 1) {
    return error(desc, Error::NotSupported,
                 "input " + std::to_string(index) + " is not a constant scalar");
  }
  return constant->data_ptr<float>()[0];
}

Result<Eltwise> eltwise_of(const OpDesc& desc) {
  Attrs attrs(desc);
  const std::string& op = desc.op;
  if (op == "Relu") return Eltwise{algorithm::eltwise_relu};
  if (op == "LeakyRelu") {
    KILN_ASSIGN_OR_RETURN(double alpha, attrs.get_float("alpha", 0.01));
    return Eltwise{algorithm::eltwise_relu, static_cast<float>(alpha)};
  }
  if (op == "Elu") {
    KILN_ASSIGN_OR_RETURN(double alpha, attrs.get_float("alpha", 1.0));
    return Eltwise{algorithm::eltwise_elu, static_cast<float>(alpha)};
  }
  if (op == "Sigmoid") return Eltwise{algorithm::eltwise_logistic};
  if (op == "Tanh") return Eltwise{algorithm::eltwise_tanh};
  if (op == "Exp") return Eltwise{algorithm::eltwise_exp};
  // No Log: oneDNN's eltwise_log is off by ~1.4e-6 at log(1) = 0, outside ONNX's tolerance; the
  // reference kernel runs it.
  if (op == "Abs") return Eltwise{algorithm::eltwise_abs};
  if (op == "Sqrt") return Eltwise{algorithm::eltwise_sqrt};
  if (op == "Neg") return Eltwise{algorithm::eltwise_linear, -1.0f, 0.0f};
  if (op == "HardSwish") return Eltwise{algorithm::eltwise_hardswish};
  if (op == "Softplus") return Eltwise{algorithm::eltwise_soft_relu};
  if (op == "Gelu") {
    KILN_ASSIGN_OR_RETURN(std::string approximate, attrs.get_string("approximate", "none"));
    if (approximate == "none") return Eltwise{algorithm::eltwise_gelu_erf};
    if (approximate == "tanh") return Eltwise{algorithm::eltwise_gelu_tanh};
    return error(
        desc, Error::InvalidArgument,
        "attribute 'approximate' has value '" + approximate + "' (expected 'none' or 'tanh')");
  }
  // Clip: opset 11+ bounds as (constant) inputs 1 and 2, opset 6 as attributes.
  float lowest = std::numeric_limits<float>::lowest();
  float highest = std::numeric_limits<float>::max();
  KILN_ASSIGN_OR_RETURN(double min_attr, attrs.get_float("min", lowest));
  KILN_ASSIGN_OR_RETURN(double max_attr, attrs.get_float("max", highest));
  KILN_ASSIGN_OR_RETURN(float min, constant_scalar(desc, 1, static_cast<float>(min_attr)));
  KILN_ASSIGN_OR_RETURN(float max, constant_scalar(desc, 2, static_cast<float>(max_attr)));
  return Eltwise{algorithm::eltwise_clip, min, max};
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_unary(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 1, desc.op == "Clip" ? 3 : 1));
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  KILN_ASSIGN_OR_RETURN(Eltwise eltwise, eltwise_of(desc));
  const std::vector<int64_t>& x = desc.inputs[0].sizes;
  int64_t numel = 1;
  for (int64_t size : x) numel *= size;
  if (input_constant(desc, 0) != nullptr) {
    return error(desc, Error::NotSupported, "input 0 is a constant (expected it folded)");
  }
  // Over the flattened tensor, or in its producer's layout when it has one of its own.
  memory::desc flat = plain_md(std::vector<int64_t>{numel});
  std::optional<memory::desc> hint =
      x.empty() ? std::nullopt : input_layout_hint(desc, 0, to_dims(x));
  // A padded layout (e.g. one channel blocked by 16) sends oneDNN to its reference eltwise.
  if (hint && hint->get_size() != static_cast<size_t>(numel) * sizeof(float)) hint.reset();
  memory::desc md = hint.value_or(flat);
  memory::desc plain = hint ? plain_md(x) : flat;
  dnnl::eltwise_forward::desc eltwise_desc(dnnl::prop_kind::forward_inference, eltwise.alg, md,
                                           eltwise.alpha, eltwise.beta);
  dnnl::eltwise_forward::primitive_desc pd(eltwise_desc, base_attr(), cpu_engine());
  auto op = std::make_unique<StagedOp>(desc, dnnl::eltwise_forward(pd), pd, x);
  op->bind_input(0, DNNL_ARG_SRC, plain, pd.src_desc());
  op->bind_output(DNNL_ARG_DST, plain, pd.dst_desc());
  return std::unique_ptr<CpuOp>(std::move(op));
}

namespace {

// y = a + b (or a * b) over [begin, end).
KILN_VECTOR_CLONES void binary_range(const float* a, const float* b, float* y, int64_t begin,
                                     int64_t end, bool multiply) {
  int64_t i = begin;
  for (; i + vec::kLanes <= end; i += vec::kLanes) {
    const vec::Floats va = vec::load(a + i), vb = vec::load(b + i);
    vec::store(y + i, multiply ? va * vb : va + vb);
  }
  for (; i < end; ++i) y[i] = multiply ? a[i] * b[i] : a[i] + b[i];
}

// Over `count` floats, split in whole vectors over the threads when there is work for them
// (ops of little work are built for one: op_threads).
template <bool kMultiply>
void binary_loops(const float* a, const float* b, float* y, int64_t count, int threads) {
  const int parts = std::max(1, threads > 0 ? threads : omp_get_max_threads());
  if (parts == 1) {
    binary_range(a, b, y, 0, count, kMultiply);
    return;
  }
  const int64_t vectors = (count + vec::kLanes - 1) / vec::kLanes;
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int t = 0; t < parts; ++t) {
    binary_range(a, b, y, std::min(count, vectors * t / parts * vec::kLanes),
                 std::min(count, vectors * (t + 1) / parts * vec::kLanes), kMultiply);
  }
}

}  // namespace

Result<std::unique_ptr<CpuOp>> create_binary(const OpDesc& desc) {
  KILN_RETURN_IF_ERROR(check_inputs(desc, 2, 2));
  if (!desc.post_ops.empty()) return error(desc, Error::NotSupported, "has post-ops");
  auto shape = kernels::broadcast_shape(desc.inputs[0].sizes, desc.inputs[1].sizes);
  if (!shape.ok()) return error(desc, shape.error(), shape.status().message());
  size_t rank = std::max<size_t>(1, shape->size());
  auto padded = [&](const std::vector<int64_t>& sizes) {
    std::vector<int64_t> out(rank - sizes.size(), 1);
    out.insert(out.end(), sizes.begin(), sizes.end());
    return out;
  };
  std::vector<int64_t> dst = padded(*shape);
  size_t first = 0;
  if (padded(desc.inputs[0].sizes) != dst) {
    if (padded(desc.inputs[1].sizes) != dst) {
      return error(desc, Error::NotSupported,
                   "both inputs broadcast (" + runtime::shape_to_string(desc.inputs[0].sizes) +
                       " and " + runtime::shape_to_string(desc.inputs[1].sizes) +
                       "); expected one of them to have the output's shape");
    }
    first = 1;  // Add and Mul commute.
  }
  memory::desc src0_md = plain_md(padded(desc.inputs[first].sizes));
  memory::desc src1_md = plain_md(padded(desc.inputs[1 - first].sizes));
  memory::desc dst_md = plain_md(dst);
  const bool same = src0_md == src1_md && input_constant(desc, 0) == nullptr &&
                    input_constant(desc, 1) == nullptr && desc.inputs[0].sizes == dst;
  if (same) {
    // Same shapes: work in a producer's layout when either input has one (the other converts
    // into it unless it arrives in it too), e.g. the sum of two Conv results.
    auto hint = input_layout_hint(desc, 0, src0_md.dims());
    if (!hint) hint = input_layout_hint(desc, 1, src0_md.dims());
    const memory::desc md = hint.value_or(dst_md);
    if (hint || desc.small_ops_own_loops) {
      auto alg = desc.op == "Add" ? algorithm::binary_add : algorithm::binary_mul;
      dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, md, md, md), base_attr(),
                                      cpu_engine());
      // kiln's loops go over the three tensors' bytes in their shared layout (a blocked one's
      // padding is zero, and so are its sum and product); the primitive would generate code
      // at creation (0.2-0.6 ms) for work bound by memory. oneDNN's only for its tests, and
      // on CPUs without AVX-512 (own_vector_loops).
      const bool loops = desc.small_ops_own_loops && own_vector_loops();
      auto op = std::make_unique<StagedOp>(desc, loops ? dnnl::primitive() : dnnl::binary(pd), pd,
                                           *shape);
      op->bind_input(0, DNNL_ARG_SRC_0, src0_md, pd.src0_desc());
      op->bind_input(1, DNNL_ARG_SRC_1, src1_md, pd.src1_desc());
      op->bind_output(DNNL_ARG_DST, dst_md, pd.dst_desc());
      if (loops) {
        op->run_on_loops(desc.op == "Add" ? binary_loops<false> : binary_loops<true>, desc.op);
      }
      return std::unique_ptr<CpuOp>(std::move(op));
    }
  }
  auto alg = desc.op == "Add" ? algorithm::binary_add : algorithm::binary_mul;
  dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, src0_md, src1_md, dst_md), base_attr(),
                                  cpu_engine());
  auto op = std::make_unique<SimpleOp>(desc, dnnl::binary(pd), pd, *shape, dst_md);
  op->bind_input(desc, first, DNNL_ARG_SRC_0, src0_md);
  op->bind_input(desc, 1 - first, DNNL_ARG_SRC_1, src1_md);
  return std::unique_ptr<CpuOp>(std::move(op));
}

}  // namespace kiln::engine::cpu::dnnl_impl
