// Linked into the tests of kiln's loops and of the plans built of them: kernel selection takes
// the loops on any CPU there, as it does where the CPU has AVX-512, so that those tests check
// the same choices everywhere. own_vector_loops_test.cpp checks what each CPU chooses.

#include <kiln/engine/cpu/cpu_op.h>

namespace {

const bool kForced = (kiln::engine::cpu::set_own_vector_loops_for_testing(true), true);

}  // namespace
