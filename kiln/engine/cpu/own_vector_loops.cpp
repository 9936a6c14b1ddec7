#include <kiln/engine/cpu/cpu_op.h>

#include <atomic>

namespace kiln::engine::cpu {

namespace {

// -1: the CPU decides; 0 or 1: a test's choice.
std::atomic<int> forced{-1};

}  // namespace

bool own_vector_loops() {
  const int f = forced.load(std::memory_order_relaxed);
  if (f >= 0) return f == 1;
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return true;  // (not measured on other targets)
#endif
}

void set_own_vector_loops_for_testing(std::optional<bool> on) {
  forced.store(on ? (*on ? 1 : 0) : -1, std::memory_order_relaxed);
}

}  // namespace kiln::engine::cpu
