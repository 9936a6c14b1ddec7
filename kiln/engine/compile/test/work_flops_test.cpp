// work_flops(): the multiply-add work of Conv, ConvTranspose, MatMul and Gemm, by hand.
#include <kiln/engine/compile/work_flops.h>

#include <gtest/gtest.h>

namespace kiln::engine::compile {
namespace {

ir::Node node(const std::string& op, std::vector<ir::Attribute> attributes = {}) {
  ir::Node n;
  n.name = op + "_0";
  n.op = op;
  n.attributes = std::move(attributes);
  return n;
}

TEST(WorkFlops, ConvCountsEveryWeightAtEveryOutputPixel) {
  // 64 -> 128 channels, 3x3, 28x28 output: 2 x (128 x 28 x 28) x (64 x 3 x 3).
  EXPECT_DOUBLE_EQ(work_flops(node("Conv"), {{1, 64, 56, 56}, {128, 64, 3, 3}}, {1, 128, 28, 28}),
                   2.0 * 128 * 28 * 28 * 64 * 9);
  // Depthwise (group 32, one input channel each) and a batch of 2.
  EXPECT_DOUBLE_EQ(work_flops(node("Conv"), {{2, 32, 10, 10}, {32, 1, 3, 3}}, {2, 32, 10, 10}),
                   2.0 * 2 * 32 * 100 * 9);
  // 1-D.
  EXPECT_DOUBLE_EQ(work_flops(node("Conv"), {{1, 4, 50}, {8, 4, 5}}, {1, 8, 46}),
                   2.0 * 8 * 46 * 4 * 5);
}

TEST(WorkFlops, ConvTransposeCountsEveryWeightAtEveryInputPixel) {
  // W [C_in 16, C_out/group 8, 2, 2]: each input pixel meets 8 x 2 x 2 weights.
  EXPECT_DOUBLE_EQ(
      work_flops(node("ConvTranspose"), {{1, 16, 20, 20}, {16, 8, 2, 2}}, {1, 8, 40, 40}),
      2.0 * 16 * 400 * 8 * 4);
}

TEST(WorkFlops, MatMulCountsTheBroadcastBatch) {
  EXPECT_DOUBLE_EQ(work_flops(node("MatMul"), {{128, 64}, {64, 256}}, {128, 256}),
                   2.0 * 128 * 64 * 256);
  // [2, 4, 10, 8] x [8, 6]: 8 matrices; [3, 1, 5, 7] x [4, 7, 2]: batch broadcast to 3 x 4.
  EXPECT_DOUBLE_EQ(work_flops(node("MatMul"), {{2, 4, 10, 8}, {8, 6}}, {2, 4, 10, 6}),
                   2.0 * 8 * 10 * 8 * 6);
  EXPECT_DOUBLE_EQ(work_flops(node("MatMul"), {{3, 1, 5, 7}, {4, 7, 2}}, {3, 4, 5, 2}),
                   2.0 * 12 * 5 * 7 * 2);
  // 1-D operands: a vector times a matrix, a dot product.
  EXPECT_DOUBLE_EQ(work_flops(node("MatMul"), {{7}, {7, 3}}, {3}), 2.0 * 7 * 3);
  EXPECT_DOUBLE_EQ(work_flops(node("MatMul"), {{7}, {7}}, {}), 2.0 * 7);
}

TEST(WorkFlops, GemmReadsTransAAndTransB) {
  auto attr = [](const char* name, int64_t v) { return ir::Attribute{name, v}; };
  EXPECT_DOUBLE_EQ(work_flops(node("Gemm"), {{4, 512}, {512, 1000}, {1000}}, {4, 1000}),
                   2.0 * 4 * 512 * 1000);
  EXPECT_DOUBLE_EQ(
      work_flops(node("Gemm", {attr("transB", 1)}), {{4, 512}, {1000, 512}}, {4, 1000}),
      2.0 * 4 * 512 * 1000);
  EXPECT_DOUBLE_EQ(
      work_flops(node("Gemm", {attr("transA", 1)}), {{512, 4}, {512, 1000}}, {4, 1000}),
      2.0 * 4 * 512 * 1000);
}

TEST(WorkFlops, OtherOpsAndUnfittingSizesCountNoWork) {
  EXPECT_FALSE(counts_work("Relu"));
  EXPECT_TRUE(counts_work("Conv"));
  EXPECT_EQ(work_flops(node("Relu"), {{1, 8}, {1, 8}}, {1, 8}), 0.0);
  EXPECT_EQ(work_flops(node("Conv"), {{1, 8, 4, 4}}, {1, 8, 4, 4}), 0.0);          // no W
  EXPECT_EQ(work_flops(node("Conv"), {{1, 8, 4, 4}, {8, 8, 3, 3}}, {}), 0.0);      // no output
  EXPECT_EQ(work_flops(node("Conv"), {{1, 8, 4, 4}, {8, 8}}, {1, 8, 4, 4}), 0.0);  // rank 2 W
  EXPECT_EQ(work_flops(node("Gemm"), {{4, 5, 6}, {6, 7}}, {4, 7}), 0.0);           // rank 3 A
  EXPECT_EQ(work_flops(node("MatMul"), {{}, {4, 4}}, {4}), 0.0);                   // unknown A
}

}  // namespace
}  // namespace kiln::engine::compile
