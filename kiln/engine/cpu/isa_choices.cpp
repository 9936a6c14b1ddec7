#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/cpu_op.h>

#include <oneapi/dnnl/dnnl.h>

#include <atomic>

// Kernel selection's choices that depend on the CPU's vector instructions (cpu_op.h).

namespace kiln::engine::cpu {

namespace {

// -1: the CPU decides; 0 or 1: a test's choice.
std::atomic<int> forced{-1};

// Whether oneDNN may use `isa` here: the CPU has it and ONEDNN_MAX_CPU_ISA (or
// dnnl_set_max_cpu_isa) does not hold oneDNN below it. kiln's own loops follow the same limit,
// so that a limited run plans as it would on a CPU of that ISA.
bool dnnl_allows(dnnl_cpu_isa_t isa) {
  static const unsigned effective = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned bits = static_cast<unsigned>(isa);
  return (effective & bits) == bits;
}

bool has_avx512() {
  const int f = forced.load(std::memory_order_relaxed);
  return f >= 0 ? f == 1 : cpu_has_avx512();
}

}  // namespace

bool cpu_has_avx512() {
#if defined(__GNUC__) && defined(__x86_64__)
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && dnnl_allows(dnnl_cpu_isa_avx512_core);
  return avx512;
#else
  return true;  // (not measured on other targets)
#endif
}

bool own_vector_loops() { return has_avx512(); }

bool gelu_post_op_fast() { return has_avx512(); }

bool streaming_b_blocked() { return has_avx512(); }

bool avx512_own_runtime_gemm() { return has_avx512() && dnnl_impl::cpu_has_avx512f(); }

bool avx2_own_gemm() {
  return !has_avx512() && dnnl_impl::cpu_has_avx2_fma() && dnnl_allows(dnnl_cpu_isa_avx2);
}

void set_avx512_for_testing(std::optional<bool> has) {
  forced.store(has ? (*has ? 1 : 0) : -1, std::memory_order_relaxed);
}

}  // namespace kiln::engine::cpu
