// Kernel selection and kiln's own vector loops: where own_vector_loops() is false (a CPU
// without AVX-512), the ops the loops would take go to oneDNN (or, for the row normalizations,
// to the reference kernel; for MatMuls, to kiln's AVX2 MatMul), with the same results; where it
// is true, to the loops. The test binary forces it true (own_loops_on.cpp); these cases set it
// each way.

#include <kiln/engine/cpu/avx2_gemm.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers

// Restores the binary's forced choice however a test ends.
struct ForcedLoops {
  explicit ForcedLoops(std::optional<bool> on) { set_avx512_for_testing(on); }
  ~ForcedLoops() { set_avx512_for_testing(true); }
};

struct Choice {
  std::string what;
  std::function<Case(uint32_t)> make;
  bool reference_when_off = false;    // little work: the reference kernel's, not oneDNN's
  bool avx2_matmul_when_off = false;  // kiln's AVX2 MatMul, where the CPU has AVX2 and FMA
};

std::vector<Choice> choices() {
  return {
      {"a 1x1 Conv among blocked Convs",
       [](uint32_t seed) {
         Case c("Conv", {});
         c.desc.small_ops_own_loops = true;
         c.desc.activation_layout = ActivationLayout::Blocked;
         c.add(random_tensor({1, 64, 14, 14}, seed), false);
         c.add(random_tensor({96, 64, 1, 1}, seed + 1, -0.3, 0.3), true);
         c.desc.post_ops = {{PostOpKind::Relu}};
         return c;
       }},
      {"a Conv of two output channels",
       [](uint32_t seed) {
         Case c("Conv", {ints("pads", {1, 1, 1, 1})});
         c.add(random_tensor({1, 32, 40, 40}, seed), false);
         c.add(random_tensor({2, 32, 3, 3}, seed + 1, -0.3, 0.3), true);
         return c;
       }},
      {"a small MatMul",
       [](uint32_t seed) {
         Case c("MatMul", {});
         c.desc.small_ops_own_loops = true;
         c.add(random_tensor({4, 32}, seed), false);
         c.add(random_tensor({32, 24}, seed + 1), true);
         return c;
       },
       false, true},
      {"an Add of two tensors of one shape",
       [](uint32_t seed) {
         Case c("Add", {});
         c.desc.small_ops_own_loops = true;
         c.add(random_tensor({4, 64, 32}, seed), false);
         c.add(random_tensor({4, 64, 32}, seed + 1), false);
         return c;
       }},
      {"a small MaxPool",
       [](uint32_t seed) {
         Case c("MaxPool", {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})});
         c.desc.small_ops_own_loops = true;
         c.add(random_tensor({1, 16, 8, 8}, seed), false);
         return c;
       },
       true},
  };
}

TEST(OwnVectorLoops, OffLeavesTheLoopsOpsToOneDnnWithTheSameResults) {
  uint32_t seed = 9100;
  for (const Choice& choice : choices()) {
    SCOPED_TRACE(choice.what);
    Case on_case = choice.make(seed);
    Case off_case = choice.make(seed);
    seed += 10;
    OwnedTensor on = zeros({0}), off = zeros({0});
    {
      ForcedLoops forced(true);
      auto op = on_case.create();
      ASSERT_TRUE(op.ok()) << op.status();
      EXPECT_EQ((*op)->provider(), "kiln") << (*op)->describe();
      on = on_case.run(**op);
    }
    {
      ForcedLoops forced(false);
      auto op = off_case.create();
      if (choice.reference_when_off) {
        ASSERT_FALSE(op.ok()) << (*op)->describe();
        EXPECT_EQ(op.error(), runtime::Error::NotSupported) << op.status();
        continue;
      }
      ASSERT_TRUE(op.ok()) << op.status();
      if (choice.avx2_matmul_when_off && dnnl_impl::cpu_has_avx2_fma()) {
        EXPECT_NE((*op)->describe().find("kiln AVX2 MatMul"), std::string::npos)
            << (*op)->describe();
      } else {
        EXPECT_EQ((*op)->provider(), "onednn") << (*op)->describe();
      }
      off = off_case.run(**op);
    }
    expect_near(off, on);
  }
}

TEST(OwnVectorLoops, OffLeavesRowNormalizationsToTheReferenceKernel) {
  Case c("RMSNormalization", {int_attr("axis", -1)});
  c.add(random_tensor({2, 8, 64}, 9200), false);
  c.add(random_tensor({64}, 9201), true);
  {
    ForcedLoops forced(true);
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ((*op)->provider(), "kiln");
  }
  ForcedLoops forced(false);
  auto op = c.create();
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error(), runtime::Error::NotSupported);
  EXPECT_NE(op.status().message().find("AVX-512"), std::string::npos) << op.status();
}

// The CPU decides as oneDNN may use it: ONEDNN_MAX_CPU_ISA below AVX-512 (the *_as_avx2 runs of
// these tests) makes the choices of an AVX2 CPU.
TEST(OwnVectorLoops, TheCpuDecidesUnlessATestForcesIt) {
  ForcedLoops forced(std::nullopt);
  EXPECT_EQ(own_vector_loops(), cpu_has_avx512());
  EXPECT_EQ(gelu_post_op_fast(), cpu_has_avx512());
#if defined(__GNUC__) && defined(__x86_64__)
  // oneDNN reads the name in any case.
  std::string limit = std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA") : "";
  for (char& ch : limit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const bool below_avx2 = limit == "SSE41" || limit == "AVX";
  const bool below_avx512 = below_avx2 || limit == "AVX2" || limit == "AVX2_VNNI";
  EXPECT_EQ(cpu_has_avx512(), __builtin_cpu_supports("avx512f") != 0 && !below_avx512);
  EXPECT_EQ(avx2_own_gemm(), !cpu_has_avx512() && dnnl_impl::cpu_has_avx2_fma() && !below_avx2);
#else
  EXPECT_TRUE(own_vector_loops());
#endif
  set_avx512_for_testing(false);
  EXPECT_FALSE(own_vector_loops());
  set_avx512_for_testing(true);
  EXPECT_TRUE(own_vector_loops());
}

}  // namespace
}  // namespace kiln::engine::cpu
