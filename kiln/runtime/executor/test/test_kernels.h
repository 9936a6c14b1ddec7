#pragma once

// Kernels registered only by executor tests, so these tests do not depend on kiln/kernels.
#include <kiln/runtime/executor/kernel_registry.h>

namespace kiln::runtime::test {

/// "TestScale": out = in * attribute `scale` (default 2); f32 only; optional second input
/// added when present.
Status test_scale(KernelContext& context, Span<EValue* const> inputs,
                  Span<EValue* const> outputs, const Attributes& attributes);
/// "TestRepeat": out = in repeated `times` (int attribute) along dim 0; f32.
Status test_repeat(KernelContext& context, Span<EValue* const> inputs,
                   Span<EValue* const> outputs, const Attributes& attributes);

/// "TestReverse": out = in's elements in reverse order (same shape); f32. Element by element
/// from the front, so an `out` sharing `in`'s bytes gets a wrong result. Records the data
/// pointer it read (`last_reverse_input`).
Status test_reverse(KernelContext& context, Span<EValue* const> inputs,
                    Span<EValue* const> outputs, const Attributes& attributes);
/// The data pointer of the last input "TestReverse" read.
const void* last_reverse_input();

void register_test_kernels();

}  // namespace kiln::runtime::test
