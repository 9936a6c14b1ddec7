#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/cpu_op.h>

#include <atomic>

// Kernel selection's choices that depend on the CPU's vector instructions (cpu_op.h).

namespace kiln::engine::cpu {

namespace {

// -1: the CPU decides; 0 or 1: a test's choice.
std::atomic<int> forced{-1};

bool has_avx512() {
  const int f = forced.load(std::memory_order_relaxed);
  if (f >= 0) return f == 1;
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return true;  // (not measured on other targets)
#endif
}

}  // namespace

bool own_vector_loops() { return has_avx512(); }

bool gelu_post_op_fast() { return has_avx512(); }

bool avx2_own_gemm() { return !has_avx512() && dnnl_impl::cpu_has_avx2_fma(); }

void set_avx512_for_testing(std::optional<bool> has) {
  forced.store(has ? (*has ? 1 : 0) : -1, std::memory_order_relaxed);
}

}  // namespace kiln::engine::cpu
