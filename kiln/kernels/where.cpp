#include <kiln/kernels/kernels.h>
#include <kiln/kernels/layout.h>

#include <array>

namespace kiln::kernels {

using runtime::EValue;
using runtime::Result;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

namespace {

constexpr std::string_view kOp = "Where";

Result<std::vector<int64_t>> where_shape(const Tensor& condition, const Tensor& x,
                                         const Tensor& y) {
  std::array<const Tensor*, 3> inputs = {&condition, &x, &y};
  auto shape = broadcast_shapes(inputs);
  if (!shape.ok()) return shape.status().with_context(internal::action(kOp));
  return shape;
}

Status where_kernel(runtime::KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const runtime::Attributes& attributes) {
  KILN_RETURN_IF_ERROR(internal::check_arity(kOp, inputs, outputs, 3, 3, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* condition, internal::input_tensor(kOp, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, internal::input_tensor(kOp, inputs, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* y, internal::input_tensor(kOp, inputs, 2));
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (condition)", condition->dtype(), kBoolDtypes));
  if (y->dtype() != x->dtype()) {
    return check_dtype(kOp, "input 2", y->dtype(), std::array{x->dtype()});
  }
  KILN_ASSIGN_OR_RETURN(auto shape, where_shape(*condition, *x, *y));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        internal::output_tensor_of_dtype(kOp, outputs, 0, x->dtype()));
  KILN_RETURN_IF_ERROR(internal::resize_output(context, kOp, *out, shape));
  return where(*condition, *x, *y, out->to_tensor());
}

const runtime::KernelRegistration kRegisterWhere("Where", where_kernel);

}  // namespace

Status where(const Tensor& condition, const Tensor& x, const Tensor& y, Tensor& out) {
  KILN_RETURN_IF_ERROR(check_dtype(kOp, "input 0 (condition)", condition.dtype(), kBoolDtypes));
  if (y.dtype() != x.dtype()) return check_dtype(kOp, "input 2", y.dtype(), std::array{x.dtype()});
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 0", condition));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 1", x));
  KILN_RETURN_IF_ERROR(internal::check_contiguous(kOp, "input 2", y));
  KILN_ASSIGN_OR_RETURN(auto shape, where_shape(condition, x, y));
  KILN_RETURN_IF_ERROR(internal::check_output(kOp, out, x.dtype(), shape));
  const auto loop = make_broadcast_loop<3>(
      shape, {broadcast_strides(condition.sizes(), shape), broadcast_strides(x.sizes(), shape),
              broadcast_strides(y.sizes(), shape)});
  const bool* cond = condition.data_ptr<bool>();
  return internal::dispatch_bytes(x.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* px = x.data_ptr<U>();
    const U* py = y.data_ptr<U>();
    U* result = out.mutable_data_ptr<U>();
    for_each_broadcast_row(loop, [&](int64_t out_offset, std::array<int64_t, 3> in, int64_t count,
                                     std::array<int64_t, 3> stride) {
      for (int64_t i = 0; i < count; ++i) {
        result[out_offset + i] =
            cond[in[0] + i * stride[0]] ? px[in[1] + i * stride[1]] : py[in[2] + i * stride[2]];
      }
    });
    return Status();
  });
}

}  // namespace kiln::kernels
