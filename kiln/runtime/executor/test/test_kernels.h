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

void register_test_kernels();

}  // namespace kiln::runtime::test
