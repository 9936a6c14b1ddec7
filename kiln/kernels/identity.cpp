#include <kiln/kernels/adapter.h>
#include <kiln/kernels/kernels.h>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Identity";

Status identity_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                       Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  return internal::run_unary_kernel({kOp, {}, identity}, context, inputs, outputs);
}

const runtime::KernelRegistration kRegisterIdentity("Identity", identity_kernel);

}  // namespace

Status identity(const Tensor& x, Tensor& out) {
  KILN_RETURN_IF_ERROR(internal::check_output_shape(kOp, out, x.sizes()));
  return internal::copy_elements(kOp, x, out);
}

}  // namespace kiln::kernels
