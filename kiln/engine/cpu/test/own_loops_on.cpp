// Linked into the tests of kiln's loops and of the plans built of them: kernel selection and
// fusion choose there as they do where the CPU has AVX-512 (kiln's vector loops, fused GELUs),
// so that those tests check the same plans on any CPU. own_vector_loops_test.cpp and the tests
// that set it otherwise check the other choices.

#include <kiln/engine/cpu/cpu_op.h>

namespace {

const bool kForced = (kiln::engine::cpu::set_avx512_for_testing(true), true);

}  // namespace
