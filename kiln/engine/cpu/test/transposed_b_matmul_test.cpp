// oneDNN's MatMul given B transposed (OpDesc::b_transposed: input 1 is B with its last two axes
// swapped, plain) against the reference product of B, over ranks and broadcast batches; and
// what declines it with a clear error (a constant B, Gemm).

#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Error;

TEST(TransposedBMatMul, MatchesTheReferenceOverRanksAndBroadcastBatches) {
  struct Shapes {
    std::vector<int64_t> a, b;  // B's own sizes (the op is given its transpose)
  };
  const std::vector<Shapes> shapes = {{{4, 8}, {8, 5}},
                                      {{8}, {8, 5}},
                                      {{1, 4, 1, 32}, {1, 4, 32, 129}},
                                      {{2, 3, 4, 8}, {1, 3, 8, 5}},
                                      {{2, 4, 8}, {8, 5}}};
  uint32_t seed = 7100;
  for (const Shapes& s : shapes) {
    SCOPED_TRACE(runtime::shape_to_string(s.a) + " x " + runtime::shape_to_string(s.b));
    Case c("MatMul", {});
    c.add(random_tensor(s.a, seed++), false);
    c.add(random_tensor(s.b, seed++), false);
    c.desc.b_transposed = true;
    auto out = kernels::matmul_shape(s.a, s.b);
    ASSERT_TRUE(out.ok());
    OwnedTensor expected = zeros(*out);
    ASSERT_TRUE(kernels::matmul(c.at(0), c.at(1), expected.tensor()).ok());
    auto op = c.create();
    ASSERT_TRUE(op.ok()) << op.status();
    c.inputs[1] = swap_last_two(c.at(1));  // what the op reads
    expect_near(c.run(**op), expected);
  }
}

TEST(TransposedBMatMul, ConstantBAndGemmDeclineIt) {
  uint32_t seed = 7200;
  for (const char* op_type : {"MatMul", "Gemm"}) {
    SCOPED_TRACE(op_type);
    Case c(op_type, {});
    c.add(random_tensor({4, 8}, seed++), false);
    c.add(random_tensor({8, 5}, seed++), std::string(op_type) == "MatMul");
    c.desc.b_transposed = true;
    auto op = c.create();
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.error(), Error::NotSupported);
    EXPECT_NE(op.status().message().find("B read transposed"), std::string::npos)
        << op.status().message();
  }
}

}  // namespace
}  // namespace kiln::engine::cpu
