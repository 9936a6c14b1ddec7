#pragma once

// Helpers shared by the kernels' typed functions and their EValue adapters. Internal to
// kiln/kernels: not installed as API, may change with the kernels.

#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::kernels::internal {

/// "run kernel '<op>'": the action every kernel error message starts with.
std::string action(std::string_view op);

/// InvalidArgument "run kernel '<op>': <problem>".
runtime::Status invalid_argument(std::string_view op, const std::string& problem);

/// Ok when there are `min_inputs`..`max_inputs` inputs and exactly `num_outputs` outputs, and
/// none of them is a null pointer. Errors: InvalidArgument "... got 1 inputs (expected 2)".
runtime::Status check_arity(std::string_view op, runtime::Span<runtime::EValue* const> inputs,
                            runtime::Span<runtime::EValue* const> outputs, size_t min_inputs,
                            size_t max_inputs, size_t num_outputs);

/// True when optional input `index` is missing or None.
bool is_absent(runtime::Span<runtime::EValue* const> inputs, size_t index);

/// Input `index` as a tensor. Errors: InvalidType "input 1 is int (expected tensor)".
/// Precondition: `check_arity` covered `index`.
runtime::Result<const runtime::Tensor*> input_tensor(std::string_view op,
                                                     runtime::Span<runtime::EValue* const> inputs,
                                                     size_t index);

/// Optional input `index` as a tensor, or null when `is_absent`. Errors: as `input_tensor`.
/// Precondition: `check_arity` covered `index` or allowed it to be missing.
runtime::Result<const runtime::Tensor*> optional_input(std::string_view op,
                                                       runtime::Span<runtime::EValue* const> inputs,
                                                       size_t index);

/// Output `index`, checked to hold a tensor of dtype `dtype` (the output dtype of every op
/// here equals its input's). Errors: InvalidType naming the output, its tag or dtype.
runtime::Result<runtime::EValue*> output_tensor(std::string_view op,
                                                runtime::Span<runtime::EValue* const> outputs,
                                                size_t index, runtime::ScalarType dtype);

/// Output `index`, checked to hold a tensor of dtype `dtype` where that dtype is fixed by the
/// op or an attribute (Equal's bool, Cast's `to`, Shape's i64) rather than by input 0.
/// Errors: InvalidType "... output 0 has dtype f32 (expected bool)".
runtime::Result<runtime::EValue*> output_tensor_of_dtype(
    std::string_view op, runtime::Span<runtime::EValue* const> outputs, size_t index,
    runtime::ScalarType dtype);

/// InvalidType "... <subject> has dtype i32 (expected f32, the dtype of input 0)" unless
/// `actual` equals `expected`.
runtime::Status check_same_dtype(std::string_view op, std::string_view subject,
                                 runtime::ScalarType actual, runtime::ScalarType expected);

/// NotSupported "... <subject> has dim order [1, 0] (expected a contiguous row-major tensor)"
/// unless `tensor` is contiguous.
runtime::Status check_contiguous(std::string_view op, std::string_view subject,
                                 const runtime::Tensor& tensor);

/// InvalidArgument "... output 0 has shape [2] (expected [2, 3])" unless `out`'s sizes equal
/// `expected`.
runtime::Status check_output_shape(std::string_view op, const runtime::Tensor& out,
                                   runtime::Span<const int64_t> expected);

/// Checks `out` has `expected` sizes, `dtype` and is contiguous: the typed functions'
/// common precondition on their output.
runtime::Status check_output(std::string_view op, const runtime::Tensor& out,
                             runtime::ScalarType dtype, runtime::Span<const int64_t> expected);

/// Resizes output `index` through the executor, adding the op and output to any error.
runtime::Status resize_output(runtime::KernelContext& context, std::string_view op,
                              runtime::EValue& output, runtime::Span<const int64_t> sizes);

/// Copies `x`'s bytes into `out` (a no-op when they share storage); for Identity, Reshape and
/// Flatten. Checks dtype, contiguity and that the element counts match.
runtime::Status copy_elements(std::string_view op, const runtime::Tensor& x, runtime::Tensor& out);

/// An op with one tensor input and one output of the same shape and dtype.
struct UnaryOp {
  std::string_view name;                            ///< ONNX op type, e.g. "Relu".
  runtime::Span<const runtime::ScalarType> dtypes;  ///< Accepted dtypes; empty accepts any.
  runtime::Status (*typed)(const runtime::Tensor&, runtime::Tensor&);  ///< The typed function.
};

/// The adapter of a `UnaryOp`: checks arity, tags and dtype, resizes output 0 to input 0's
/// shape and calls the typed function.
runtime::Status run_unary_kernel(const UnaryOp& op, runtime::KernelContext& context,
                                 runtime::Span<runtime::EValue* const> inputs,
                                 runtime::Span<runtime::EValue* const> outputs);

}  // namespace kiln::kernels::internal
