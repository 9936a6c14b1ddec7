#include <kiln/kernels/elementwise.h>

#include <kiln/kernels/broadcast.h>

namespace kiln::kernels::internal {

using runtime::EValue;
using runtime::Span;
using runtime::Status;
using runtime::Tensor;

Status run_binary_kernel(std::string_view op, runtime::KernelContext& context,
                         Span<EValue* const> inputs, Span<EValue* const> outputs,
                         Status (*typed)(const Tensor&, const Tensor&, Tensor&)) {
  KILN_RETURN_IF_ERROR(check_arity(op, inputs, outputs, 2, 2, 1));
  KILN_ASSIGN_OR_RETURN(const Tensor* a, input_tensor(op, inputs, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, input_tensor(op, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(op, "input 0", a->dtype(), kNumericDtypes));
  KILN_RETURN_IF_ERROR(check_same_dtype(op, "input 1", b->dtype(), a->dtype()));
  auto shape = broadcast_shape(a->sizes(), b->sizes());
  if (!shape.ok()) return shape.status().with_context(action(op));
  KILN_ASSIGN_OR_RETURN(EValue * out, output_tensor(op, outputs, 0, a->dtype()));
  KILN_RETURN_IF_ERROR(resize_output(context, op, *out, *shape));
  return typed(*a, *b, out->to_tensor());
}

runtime::Result<BinaryArgs> prepare_binary(const BinaryOp& op, runtime::KernelContext& context,
                                           Span<EValue* const> inputs,
                                           Span<EValue* const> outputs) {
  KILN_RETURN_IF_ERROR(check_arity(op.name, inputs, outputs, 2, 2, 1));
  BinaryArgs args;
  KILN_ASSIGN_OR_RETURN(args.a, input_tensor(op.name, inputs, 0));
  KILN_ASSIGN_OR_RETURN(args.b, input_tensor(op.name, inputs, 1));
  KILN_RETURN_IF_ERROR(check_dtype(op.name, "input 0", args.a->dtype(), op.dtypes));
  KILN_RETURN_IF_ERROR(check_same_dtype(op.name, "input 1", args.b->dtype(), args.a->dtype()));
  auto shape = broadcast_shape(args.a->sizes(), args.b->sizes());
  if (!shape.ok()) return shape.status().with_context(action(op.name));
  KILN_ASSIGN_OR_RETURN(EValue * out,
                        op.bool_output
                            ? output_tensor_of_dtype(op.name, outputs, 0, runtime::ScalarType::Bool)
                            : output_tensor(op.name, outputs, 0, args.a->dtype()));
  KILN_RETURN_IF_ERROR(resize_output(context, op.name, *out, *shape));
  args.out = &out->to_tensor();
  return args;
}

Status run_binary_op_kernel(const BinaryOp& op, runtime::KernelContext& context,
                            Span<EValue* const> inputs, Span<EValue* const> outputs) {
  KILN_ASSIGN_OR_RETURN(BinaryArgs args, prepare_binary(op, context, inputs, outputs));
  return op.typed(*args.a, *args.b, *args.out);
}

}  // namespace kiln::kernels::internal
