#include <kiln/engine/cpu/cpu_op.h>

#include <kiln/engine/cpu/dnnl_common.h>

#include <set>
#include <string>

namespace kiln::engine::cpu {

using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

using Factory = Result<std::unique_ptr<CpuOp>> (*)(const OpDesc&);

Factory find_factory(const std::string& op) {
  using namespace dnnl_impl;
  if (op == "MatMul") return create_matmul;
  if (op == "Gemm") return create_gemm;
  if (op == "Conv") return create_conv;
  if (op == "Concat") return create_concat;
  if (op == "ConvTranspose") return create_deconv;
  if (op == "Resize" || op == "Upsample") return create_resize;
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") return create_pool;
  if (op == "Softmax" || op == "LogSoftmax") return create_softmax;
  if (op == "LayerNormalization") return create_layer_norm;
  if (op == "BatchNormalization") return create_batch_norm;
  if (op == "Add" || op == "Mul") return create_binary;
  if (op == "LSTM" || op == "GRU") return create_rnn;
  if (op == "Where") return create_where;
  if (op == "Transpose") return create_transpose;
  if (op == "Split") return create_split;
  if (op == "RMSNormalization" || op == "InstanceNormalization" || op == "GroupNormalization") {
    return create_row_norm;
  }
  if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh" || op == "Gelu" ||
      op == "Exp" || op == "Abs" || op == "Sqrt" || op == "Elu" || op == "HardSwish" ||
      op == "Softplus" || op == "Neg" || op == "Clip") {
    return create_unary;
  }
  return nullptr;
}

// Element-wise, pooling, normalization and Softmax ops of under 0.5 us of work (about 5,000
// elements read and written): creating their oneDNN primitive (0.1-1 ms of code generation)
// costs more than a thousand runs of the reference kernel.
bool leaves_tiny_work_to_reference(const OpDesc& desc) {
  static const std::set<std::string> kOps = {"Add",
                                             "Mul",
                                             "Softmax",
                                             "LogSoftmax",
                                             "MaxPool",
                                             "AveragePool",
                                             "GlobalAveragePool",
                                             "LayerNormalization",
                                             "BatchNormalization",
                                             "Relu",
                                             "LeakyRelu",
                                             "Sigmoid",
                                             "Tanh",
                                             "Gelu",
                                             "Exp",
                                             "Abs",
                                             "Sqrt",
                                             "Elu",
                                             "HardSwish",
                                             "Softplus",
                                             "Neg",
                                             "Clip"};
  constexpr double kTinyUs = 0.5;
  if (kOps.count(desc.op) == 0) return false;
  const double us = estimated_us(desc);
  return us >= 0.0 && us < kTinyUs;
}

/// `CpuOp::create` for `desc` as capped to `used`.
Result<std::unique_ptr<CpuOp>> create_for(Factory factory, const OpDesc& desc, const OpDesc& used) {
  dnnl_impl::ThreadScope threads(used.num_threads);
  try {
    // B given transposed: only oneDNN's MatMul reads it so (any strides).
    if (desc.b_transposed) return factory(used);
    const bool own_loops_op = desc.op == "Conv" || desc.op == "MatMul" || desc.op == "Gemm";
    const bool pool_op = desc.op == "MaxPool" || desc.op == "AveragePool";
    const bool rows_op =
        desc.op == "LayerNormalization" || desc.op == "Softmax" || desc.op == "LogSoftmax";
    const bool own_loops = desc.small_ops_own_loops && own_vector_loops();
    if (own_loops && pool_op) {
      // Small pools in a producer's layout, and those of little work in any, on kiln's loops:
      // faster than oneDNN's primitive at those sizes, and than the reference at any.
      auto loops = dnnl_impl::create_pool_loops(used, leaves_tiny_work_to_reference(desc));
      if (loops.ok() || loops.error() != Error::NotSupported) return loops;
    }
    // Decoders' 1-4 rows too: oneDNN's AVX2 GEMV streamed GPT-large decode's fc2 weights
    // (2048 x 512) at 0.35 ms a row, where these loops take 0.23 (fc1's equal bytes: 0.2).
    if (desc.small_ops_own_loops && (desc.op == "MatMul" || desc.op == "Gemm") && avx2_own_gemm()) {
      auto blocked = dnnl_impl::create_avx2_matmul(used);
      if (blocked.ok() || blocked.error() != Error::NotSupported) return blocked;
    }
    if (own_loops && own_loops_op) {
      auto small = desc.op == "Conv" ? dnnl_impl::create_small_conv(used)
                                     : dnnl_impl::create_small_matmul(used);
      if (small.ok() || small.error() != Error::NotSupported) return small;
      // Larger MatMuls by a constant B: kiln's AVX-512 tiles run them as fast as oneDNN's
      // blocked kernels (bench/RESULTS.md's layer table) and generate no code at creation.
      if (desc.op != "Conv" && avx512_own_runtime_gemm()) {
        auto tiles = dnnl_impl::create_avx512_matmul(used);
        if (tiles.ok() || tiles.error() != Error::NotSupported) return tiles;
      }
    } else if (own_loops && rows_op) {
      // kiln's row loops, without code generation: faster than the reference kernel for a
      // decoder's rows (GPT decode's layer normalizations and softmaxes), and than oneDNN's
      // primitives for attention's at two threads (GPT-large's softmax: 0.050 against 0.174 ms;
      // 0.082 against 0.096 at one thread).
      auto rows = dnnl_impl::create_row_norm(used);
      if (rows.ok() || rows.error() != Error::NotSupported) return rows;
      if (leaves_tiny_work_to_reference(desc)) {
        return Status(Error::NotSupported,
                      "create op '" + desc.op + "': " + rows.status().message());
      }
    } else if (desc.small_ops_own_loops && leaves_tiny_work_to_reference(desc)) {
      return Status(Error::NotSupported,
                    "create op '" + desc.op +
                        "': little work (under 0.5 us), which the reference kernel does without "
                        "oneDNN's code generation at creation");
    }
    return factory(used);
  } catch (const dnnl::error& e) {
    // oneDNN's C++ API reports unsupported descriptors by throwing; keep it inside.
    return Status(e.status == dnnl_unimplemented ? Error::NotSupported : Error::Internal,
                  "create op '" + desc.op + "' (oneDNN): " + e.what());
  } catch (const std::bad_alloc&) {
    return Status(Error::MemoryAllocationFailed,
                  "create op '" + desc.op + "' (oneDNN): out of memory");
  }
}

}  // namespace

Result<std::unique_ptr<CpuOp>> CpuOp::create(const OpDesc& desc) {
  Factory factory = find_factory(desc.op);
  if (factory == nullptr) {
    return Status(Error::NotSupported,
                  "create op '" + desc.op + "': no CPU implementation of this op");
  }
  // Small ops are built for (and run on) one thread: oneDNN may size a primitive's work split
  // by the threads available when it is created.
  const int num_threads = op_threads(desc);
  std::optional<OpDesc> capped;
  if (num_threads != desc.num_threads) {
    capped = desc;
    capped->num_threads = num_threads;
  }
  const OpDesc& used = capped ? *capped : desc;
  auto op = create_for(factory, desc, used);
  if (op.ok()) (*op)->run_threads_ = used.num_threads;
  return op;
}

Status CpuOp::use_native_input(size_t index) {
  return Status(Error::NotSupported,
                "op (" + describe() + ") has no native layout for input " + std::to_string(index));
}

Status CpuOp::use_native_output(size_t index) {
  return Status(Error::NotSupported,
                "op (" + describe() + ") has no native layout for output " + std::to_string(index));
}

}  // namespace kiln::engine::cpu
