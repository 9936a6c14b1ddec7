#include <kiln/engine/cpu/cpu_op.h>

#include <kiln/engine/cpu/dnnl_common.h>

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
  if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh" || op == "Gelu" ||
      op == "Exp" || op == "Abs" || op == "Sqrt" || op == "Elu" || op == "HardSwish" ||
      op == "Softplus" || op == "Neg" || op == "Clip") {
    return create_unary;
  }
  return nullptr;
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
  dnnl_impl::ThreadScope threads(used.num_threads);
  try {
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

Status CpuOp::use_native_input(size_t index) {
  return Status(Error::NotSupported,
                "op (" + describe() + ") has no native layout for input " + std::to_string(index));
}

Status CpuOp::use_native_output(size_t index) {
  return Status(Error::NotSupported,
                "op (" + describe() + ") has no native layout for output " + std::to_string(index));
}

}  // namespace kiln::engine::cpu
