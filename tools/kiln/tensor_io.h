#pragma once

#include <kiln/extension/module/tensor_ptr.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/tensor.h>
#include <kiln/runtime/executor/method_meta.h>
#include <tools/kiln/npy.h>

#include <cstdint>
#include <random>
#include <string>

namespace kiln::tools {

/// A tensor owning a copy of `array`'s data, with its dtype and shape. Errors: those of
/// `make_tensor_ptr` (allocation).
runtime::Result<extension::TensorPtr> tensor_from_npy(const NpyArray& array);

/// A tensor for method input `meta` filled from `rng`: floats uniform in [-1, 1), integers
/// uniform in [0, 10), bools 0 or 1. Its shape is the planned shape (the upper bounds for a
/// bounded input); a dimension planned as 0 or less (unknown) becomes 1. The same `rng` state
/// gives the same data. Errors: NotSupported for a non-tensor input; allocation errors.
runtime::Result<extension::TensorPtr> random_tensor(const runtime::TensorMeta& meta,
                                                    std::mt19937_64& rng);

/// The dtype, shape and bytes of a contiguous tensor, ready for `write_npy`. Errors:
/// NotSupported for a tensor whose dim order is not row-major.
runtime::Result<NpyArray> npy_from_tensor(const runtime::Tensor& tensor);

/// Up to `max_values` leading elements of `tensor` as "[0.1, 0.2, ...]", followed by
/// "... (N more)" when some are left out. Floats print with 6 significant digits.
std::string format_values(const runtime::Tensor& tensor, size_t max_values);

/// A one-line description of `value`: for a tensor "f32 [1, 4] = [...]", else the value.
std::string format_evalue(const runtime::EValue& value, size_t max_values);

}  // namespace kiln::tools
