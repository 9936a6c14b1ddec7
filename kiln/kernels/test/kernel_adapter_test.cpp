// The EValue adapters, reached the way the executor reaches them: through the kernel registry.

#include <kiln/kernels/test/tensor_helpers.h>
#include <kiln/runtime/core/evalue.h>
#include <kiln/runtime/executor/kernel_registry.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Attributes;
using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using test_helpers::OwnedTensor;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;

TEST(KernelRegistry, EveryReferenceOpIsRegistered) {
  for (const char* op : {"Resize", "Upsample", "GridSample", "RoiAlign", "NonMaxSuppression",
                         "Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Relu",
                         "Sigmoid",
                         "Tanh",
                         "Identity",
                         "MatMul",
                         "Gemm",
                         "GatherND",
                         "ScatterElements",
                         "Scatter",
                         "ScatterND",
                         "OneHot",
                         "NonZero",
                         "Compress",
                         "Unique",
                         "ReverseSequence",
                         "DepthToSpace",
                         "SpaceToDepth",
                         "Pad",
                         "Einsum",
                         "HannWindow", "HammingWindow", "BlackmanWindow", "DFT", "STFT",
                         "Softmax",
                         "Reshape",
                         "Flatten",
                         "Abs",
                         "Neg",
                         "Sign",
                         "Exp",
                         "Log",
                         "Sqrt",
                         "Reciprocal",
                         "Floor",
                         "Ceil",
                         "Round",
                         "Sin",
                         "Cos",
                         "Erf",
                         "Softplus",
                         "HardSwish",
                         "Not",
                         "Elu",
                         "Selu",
                         "LeakyRelu",
                         "HardSigmoid",
                         "Gelu",
                         "Pow",
                         "Mod",
                         "PRelu",
                         "Max",
                         "Min",
                         "Mean",
                         "Sum",
                         "Equal",
                         "Greater",
                         "Less",
                         "GreaterOrEqual",
                         "LessOrEqual",
                         "And",
                         "Or",
                         "Xor",
                         "Where",
                         "Clip",
                         "Cast",
                         "Shape",
                         "Size",
                         "ConstantOfShape",
                         "Range",
                         "Concat",
                         "Transpose",
                         "Squeeze",
                         "Unsqueeze",
                         "Expand",
                         "Tile",
                         "Slice",
                         "Gather",
                         "Split",
                         "ReduceSum",
                         "ReduceMean",
                         "ReduceMax",
                         "ReduceMin",
                         "ReduceProd",
                         "ReduceL2",
                         "ArgMax",
                         "ArgMin",
                         "Conv", "ConvInteger", "ConvTranspose", "MaxPool", "AveragePool", "LpPool",
                         "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "MaxUnpool",
                         "ReduceL1",
                         "ReduceSumSquare",
                         "ReduceLogSum",
                         "ReduceLogSumExp",
                         "LogSoftmax",
                         "RNN", "GRU", "LSTM", "MatMulInteger", "QLinearMatMul",
                         "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                         "LayerNormalization", "RMSNormalization", "BatchNormalization", "InstanceNormalization", "LRN", "MeanVarianceNormalization", "Dropout", "Trilu", "CumSum", "TopK", "Hardmax", "EyeLike", "IsNaN", "IsInf", "Shrink", "Softsign", "Celu", "Mish", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "BitShift", "Det",
                         "CastLike", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    EXPECT_NE(runtime::get_kernel(op), nullptr) << op;
  }
}

TEST(AddKernel, ResizesTheOutputToTheBroadcastShape) {
  auto a = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = OwnedTensor::of<float>({3}, {10, 20, 30});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Add", {&in_a, &in_b}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));
  EXPECT_THAT(out.values<float>(6), ElementsAre(11, 22, 33, 14, 25, 36));
}

TEST(AddKernel, DtypeMismatchIsInvalidTypeNamingTheInput) {
  auto a = OwnedTensor::of<float>({2}, {1, 2});
  auto b = OwnedTensor::of<double>({2}, {1, 2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  Status status = run_kernel("Add", {&in_a, &in_b}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(),
              HasSubstr("run kernel 'Add': input 1 has dtype f64 (expected f32, the dtype of "
                        "input 0)"));
}

TEST(AddKernel, OutputOfAnotherDtypeIsInvalidType) {
  auto a = OwnedTensor::of<int32_t>({2}, {1, 2});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue in_a(a.tensor()), result(out.tensor());
  Status status = run_kernel("Add", {&in_a, &in_a}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output 0 has dtype i64 (expected i32"));
}

TEST(AddKernel, WrongArityAndNonTensorInputsAreNamed) {
  auto a = OwnedTensor::of<float>({1}, {1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_a(a.tensor()), number(int64_t{3}), result(out.tensor());

  Status arity = run_kernel("Add", {&in_a}, {&result});
  EXPECT_EQ(arity.code(), Error::InvalidArgument);
  EXPECT_THAT(arity.message(), HasSubstr("run kernel 'Add': got 1 inputs (expected 2)"));

  Status tag = run_kernel("Add", {&in_a, &number}, {&result});
  EXPECT_EQ(tag.code(), Error::InvalidType);
  EXPECT_THAT(tag.message(), HasSubstr("input 1 is int (expected tensor)"));
}

TEST(AddKernel, StaticOutputOfTheWrongShapeFailsToResize) {
  auto a = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::zeros(ScalarType::Float32, {4, 1});
  EValue in_a(a.tensor()), result(out.tensor());
  Status status = run_kernel("Add", {&in_a, &in_a}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Add': resize output 0 to [2, 2]"));
}

TEST(DivKernel, IntegerInputsTruncate) {
  auto a = OwnedTensor::of<int64_t>({2}, {-7, 9});
  auto b = OwnedTensor::of<int64_t>({}, {2});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Div", {&in_a, &in_b}, {&result}).ok());
  EXPECT_THAT(out.values<int64_t>(2), ElementsAre(-3, 4));
}

TEST(ReluKernel, RejectsUnsupportedDtypeBeforeResizing) {
  auto x = OwnedTensor::of<int8_t>({2}, {-1, 1});
  auto out = OwnedTensor::resizable(ScalarType::Int8, 1);
  EValue in_x(x.tensor()), result(out.tensor());
  Status status = run_kernel("Relu", {&in_x}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Relu': input 0 has dtype i8"));
  EXPECT_EQ(sizes_of(result), Shape{0});
}

TEST(MatMulKernel, BatchedWithOneDimensionalOperand) {
  auto a = OwnedTensor::of<float>({2, 1, 2}, {1, 2, 3, 4});
  auto b = OwnedTensor::of<float>({2}, {10, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_a(a.tensor()), in_b(b.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("MatMul", {&in_a, &in_b}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 1}));
  EXPECT_THAT(out.values<float>(2), ElementsAre(12, 34));
}

TEST(GemmKernel, ReadsAttributesAndAcceptsAbsentC) {
  auto a = OwnedTensor::of<float>({2, 1}, {1, 2});  // transposed: A' is [1, 2]
  auto b = OwnedTensor::of<float>({2, 2}, {1, 2, 3, 4});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_a(a.tensor()), in_b(b.tensor()), none, result(out.tensor());
  Attributes attributes({{"transA", EValue(int64_t{1})}, {"alpha", EValue(2.0)}});
  ASSERT_TRUE(run_kernel("Gemm", {&in_a, &in_b, &none}, {&result}, attributes).ok());
  EXPECT_EQ(sizes_of(result), (Shape{1, 2}));
  EXPECT_THAT(out.values<float>(2), ElementsAre(14, 20));
}

TEST(GemmKernel, AttributeOfTheWrongTypeIsNamed) {
  auto a = OwnedTensor::of<float>({1, 1}, {1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_a(a.tensor()), result(out.tensor());
  Attributes attributes({{"alpha", EValue("two")}});
  Status status = run_kernel("Gemm", {&in_a, &in_a}, {&result}, attributes);
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Gemm': read attribute 'alpha'"));
}

TEST(SoftmaxKernel, UsesTheAxisAttribute) {
  auto x = OwnedTensor::of<float>({2, 2}, {0, 0, 1, 1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_x(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Softmax", {&in_x}, {&result}, Attributes({{"axis", EValue(0)}})).ok());
  auto values = out.values<float>(4);
  EXPECT_NEAR(values[0] + values[2], 1.0, 1e-6);
  EXPECT_NEAR(values[0], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
}

TEST(ReshapeKernel, ReadsTheShapeTensorAndAllowZero) {
  auto x = OwnedTensor::of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto shape = OwnedTensor::of<int64_t>({2}, {0, -1});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 2);
  EValue in_x(x.tensor()), in_shape(shape.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Reshape", {&in_x, &in_shape}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 3}));

  Status status = run_kernel("Reshape", {&in_x, &in_shape}, {&result},
                             Attributes({{"allowzero", EValue(int64_t{1})}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("run kernel 'Reshape': input 1 (shape) [0, -1]"));
}

TEST(ReshapeKernel, ShapeMustBeInt64) {
  auto x = OwnedTensor::of<float>({2}, {1, 2});
  auto shape = OwnedTensor::of<int32_t>({1}, {2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in_x(x.tensor()), in_shape(shape.tensor()), result(out.tensor());
  Status status = run_kernel("Reshape", {&in_x, &in_shape}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("input 1 has dtype i32 (expected i64)"));
}

TEST(FlattenKernel, DefaultAxisIsOne) {
  auto x = OwnedTensor::of<int32_t>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto out = OwnedTensor::resizable(ScalarType::Int32, 2);
  EValue in_x(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Flatten", {&in_x}, {&result}).ok());
  EXPECT_EQ(sizes_of(result), (Shape{2, 4}));
  EXPECT_THAT(out.values<int32_t>(8), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
}

TEST(IdentityKernel, CopiesInput) {
  auto x = OwnedTensor::of<int64_t>({3}, {7, 8, 9});
  auto out = OwnedTensor::resizable(ScalarType::Int64, 1);
  EValue in_x(x.tensor()), result(out.tensor());
  ASSERT_TRUE(run_kernel("Identity", {&in_x}, {&result}).ok());
  EXPECT_THAT(out.values<int64_t>(3), ElementsAre(7, 8, 9));
}

}  // namespace
}  // namespace kiln::kernels
