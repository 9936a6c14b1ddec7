// op_threads: which ops are sized down to one thread. (Whether a capped op's run starts
// OpenMP workers is tested in dnnl_ops_test.cpp, DnnlThreads.)

#include <kiln/engine/cpu/test/op_case.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers

OpDesc described(std::string op, std::vector<std::vector<int64_t>> inputs, int num_threads,
                 std::vector<ir::Attribute> attributes = {}) {
  OpDesc desc;
  desc.op = std::move(op);
  desc.attributes = std::move(attributes);
  for (auto& sizes : inputs) desc.inputs.push_back(TensorDesc{runtime::ScalarType::Float32, sizes});
  desc.num_threads = num_threads;
  return desc;
}

TEST(OpThreads, SmallOpsRunOnOneThreadLargeOnesOnTheThreadsAsked) {
  struct Row {
    OpDesc desc;
    int expected;
  };
  const std::vector<Row> rows = {
      // GPT decode: one token through 128-wide layers and the 1000-way head.
      {described("MatMul", {{1, 1, 128}, {128, 1000}}, 2), 1},
      {described("LayerNormalization", {{1, 1, 128}, {128}, {128}}, 2), 1},
      {described("Concat", {{1, 4, 128, 32}, {1, 4, 1, 32}}, 2, {int_attr("axis", 2)}), 1},
      // GPT prefill's 128x128x384 projection; a big element-wise op.
      {described("MatMul", {{1, 128, 128}, {128, 384}}, 2), 2},
      {described("Relu", {{1, 64, 112, 112}}, 2), 2},
      {described("Relu", {{1, 64, 112, 112}}, 4), 4},
      // Convs: the VAD's 1-D ones and a 10x10 map are small; ResNet's 3x3 at 7x7 is not.
      {described("Conv", {{1, 1, 258}, {128, 1, 3}}, 2), 1},
      {described("Conv", {{1, 32, 10, 10}, {16, 32, 3, 3}}, 2, {ints("pads", {1, 1, 1, 1})}), 1},
      {described("Conv", {{1, 512, 7, 7}, {512, 512, 3, 3}}, 2), 2},
      // Depthwise runs at a quarter of the dense rate: the same FLOPs are more time.
      {described("Conv", {{1, 960, 7, 7}, {960, 1, 3, 3}}, 2, {int_attr("group", 960)}), 2},
      {described("ConvTranspose", {{1, 16, 160, 160}, {16, 1, 2, 2}}, 2, {ints("strides", {2, 2})}),
       2},
      {described("Gemm", {{1, 512}, {1000, 512}}, 2, {int_attr("transB", 1)}), 2},
      {described("Gemm", {{1, 64}, {64, 10}}, 2), 1},
      // Never more than asked; 0 (all cores) is kept for large ops only.
      {described("MatMul", {{1, 128, 128}, {128, 384}}, 1), 1},
      {described("Relu", {{16}}, 0), 1},
      {described("Relu", {{1, 64, 112, 112}}, 0), 0},
      // LSTM and GRU keep their own rule (dnnl_rnn.cpp).
      {described("LSTM", {{10, 1, 8}, {1, 32, 8}, {1, 32, 8}}, 2), 2},
  };
  for (const Row& row : rows) {
    std::string shapes;
    for (const TensorDesc& t : row.desc.inputs) shapes += runtime::shape_to_string(t.sizes);
    SCOPED_TRACE(row.desc.op + " " + shapes + " asked " + std::to_string(row.desc.num_threads));
    EXPECT_EQ(op_threads(row.desc), row.expected);
  }
}

TEST(OpThreads, ResizeCountsTheElementsItWrites) {
  // 64 channels of 40x40 are under the threshold when read, over it with the 80x80 written
  // (from the constant scales).
  OwnedTensor roi = OwnedTensor::of(std::vector<int64_t>{0}, std::vector<float>{});
  OwnedTensor scales = OwnedTensor::of({4}, std::vector<float>{1, 1, 2, 2});
  OpDesc desc = described("Resize", {{1, 16, 20, 20}, {0}, {4}}, 2);
  desc.constants = {nullptr, &roi.tensor(), &scales.tensor()};
  EXPECT_EQ(op_threads(desc), 1);
  desc.inputs[0].sizes = {1, 64, 40, 40};
  EXPECT_EQ(op_threads(desc), 2);
  OwnedTensor small_scales = OwnedTensor::of({4}, std::vector<float>{1, 1, 0.25f, 0.25f});
  desc.constants[2] = &small_scales.tensor();
  EXPECT_EQ(op_threads(desc), 1);
}

}  // namespace
}  // namespace kiln::engine::cpu
