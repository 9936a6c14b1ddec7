#include <kiln/runtime/executor/test/test_kernels.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>

namespace kiln::runtime::test {

Status test_scale(KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const Attributes& attributes) {
  if (inputs.empty() || outputs.size() != 1 || !inputs[0]->is_tensor()) {
    return Status(Error::InvalidArgument, "TestScale: bad arity");
  }
  const Tensor& in = inputs[0]->to_tensor();
  if (in.dtype() != ScalarType::Float32) return Status(Error::InvalidType, "TestScale: not f32");
  KILN_ASSIGN_OR_RETURN(double scale, attributes.get_double("scale", 2.0));
  const Tensor* addend = nullptr;
  if (inputs.size() > 1 && !inputs[1]->is_none()) {
    addend = &inputs[1]->to_tensor();
    if (addend->dtype() != ScalarType::Float32) {
      return Status(Error::InvalidType, "TestScale: addend not f32");
    }
    if (addend->numel() != in.numel()) {
      return Status(Error::InvalidArgument, "TestScale: addend has " +
                                                std::to_string(addend->numel()) + " elements");
    }
  }
  KILN_RETURN_IF_ERROR(context.resize(*outputs[0], in.sizes()));
  Tensor& out = outputs[0]->to_tensor();
  if (out.dtype() != ScalarType::Float32) return Status(Error::InvalidType, "TestScale: out");
  for (int64_t i = 0; i < in.numel(); ++i) {
    float v = in.data_ptr<float>()[i] * static_cast<float>(scale);
    if (addend != nullptr) v += addend->data_ptr<float>()[i];
    out.mutable_data_ptr<float>()[i] = v;
  }
  return Status();
}

Status test_repeat(KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const Attributes& attributes) {
  if (inputs.size() != 1 || outputs.size() != 1) {
    return Status(Error::InvalidArgument, "TestRepeat: bad arity");
  }
  const Tensor& in = inputs[0]->to_tensor();
  KILN_ASSIGN_OR_RETURN(int64_t times, attributes.get_int("times", 1));
  if (in.dim() < 1 || times < 0) return Status(Error::InvalidArgument, "TestRepeat: bad shape");
  if (in.dtype() != ScalarType::Float32) return Status(Error::InvalidType, "TestRepeat: not f32");
  std::vector<int64_t> sizes(in.sizes().begin(), in.sizes().end());
  if (times > 0 && sizes[0] > std::numeric_limits<int64_t>::max() / times) {
    return Status(Error::InvalidArgument, "TestRepeat: repeated size overflows");
  }
  sizes[0] *= times;
  KILN_RETURN_IF_ERROR(context.resize(*outputs[0], sizes));
  Tensor& out = outputs[0]->to_tensor();
  if (out.dtype() != ScalarType::Float32) return Status(Error::InvalidType, "TestRepeat: out");
  for (int64_t t = 0; t < times; ++t) {
    std::memcpy(out.mutable_data_ptr<float>() + t * in.numel(), in.data(), in.nbytes());
  }
  return Status();
}

namespace {
std::atomic<const void*> reverse_input{nullptr};
}  // namespace

Status test_reverse(KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const Attributes&) {
  if (inputs.size() != 1 || outputs.size() != 1) {
    return Status(Error::InvalidArgument, "TestReverse: bad arity");
  }
  const Tensor& in = inputs[0]->to_tensor();
  if (in.dtype() != ScalarType::Float32) return Status(Error::InvalidType, "TestReverse: not f32");
  reverse_input.store(in.data());
  KILN_RETURN_IF_ERROR(context.resize(*outputs[0], in.sizes()));
  Tensor& out = outputs[0]->to_tensor();
  const float* from = in.data_ptr<float>();
  float* to = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < in.numel(); ++i) to[i] = from[in.numel() - 1 - i];
  return Status();
}

const void* last_reverse_input() { return reverse_input.load(); }

void register_test_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    (void)register_kernel("TestScale", test_scale);
    (void)register_kernel("TestRepeat", test_repeat);
    (void)register_kernel("TestReverse", test_reverse);
  });
}

}  // namespace kiln::runtime::test
