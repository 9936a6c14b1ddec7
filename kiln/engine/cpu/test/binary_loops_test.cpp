// Same-shape Add and Mul on kiln's loops (dnnl_eltwise.cpp, StagedOp::run_on_loops) against the
// reference kernels on seeded random data: plain tensors with a tail of less than a vector,
// one and two threads; a producer's nChw16c with each input and the output given natively or
// plain; and what stays on oneDNN's primitive (broadcasts, oneDNN's own tests).

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/test/blocked16.h>
#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::ScalarType;
using runtime::Tensor;

OwnedTensor reference(const std::string& op, const Tensor& a, const Tensor& b) {
  std::vector<int64_t> sizes(a.sizes().begin(), a.sizes().end());
  OwnedTensor out = zeros(sizes);
  EXPECT_TRUE(
      (op == "Add" ? kernels::add(a, b, out.tensor()) : kernels::mul(a, b, out.tensor())).ok());
  return out;
}

Case binary_case(const std::string& op, const std::vector<int64_t>& sizes, int threads,
                 uint32_t& seed) {
  Case c(op, {});
  c.desc.small_ops_own_loops = true;
  c.desc.num_threads = threads;
  c.add(random_tensor(sizes, seed++), false);
  c.add(random_tensor(sizes, seed++), false);
  return c;
}

TEST(BinaryLoops, SameShapesMatchTheReferenceOnPlainTensors) {
  // 1 x 64 x 56 x 56 has work for two threads; 7 x 1001 ends in a partial vector.
  const std::vector<std::vector<int64_t>> shapes = {{1, 64, 56, 56}, {7, 1001}, {3, 1000}};
  uint32_t seed = 6100;
  for (int threads : {1, 2}) {
    for (const std::string op : {"Add", "Mul"}) {
      for (const auto& sizes : shapes) {
        SCOPED_TRACE(op + " " + runtime::shape_to_string(sizes) + ", " + std::to_string(threads) +
                     " thread(s)");
        Case c = binary_case(op, sizes, threads, seed);
        auto created = c.create();
        ASSERT_TRUE(created.ok()) << created.status();
        EXPECT_EQ((*created)->provider(), "kiln") << (*created)->describe();
        expect_near(c.run(**created), reference(op, c.at(0), c.at(1)));
      }
    }
  }
}

// The sum of two Convs' results (a feature pyramid's): each side native or plain.
TEST(BinaryLoops, ReadAndWriteAProducersNChw16cNativelyOrPlain) {
  const std::vector<int64_t> sizes = {2, 24, 5, 7};  // 24 channels: a padded second block
  uint32_t seed = 6300;
  for (const std::string op : {"Add", "Mul"}) {
    for (int native = 0; native < 8; ++native) {
      const bool native_a = (native & 1) != 0, native_b = (native & 2) != 0,
                 native_out = (native & 4) != 0;
      SCOPED_TRACE(op + (native_a ? " native a" : " plain a") +
                   (native_b ? ", native b" : ", plain b") +
                   (native_out ? ", native out" : ", plain out"));
      Case c = binary_case(op, sizes, 1, seed);
      const std::string layout = dnnl_impl::layout_bytes(blocked16_md(sizes));
      c.desc.input_layouts = {layout, layout};
      auto created = c.create();
      ASSERT_TRUE(created.ok()) << created.status();
      CpuOp& binary = **created;
      EXPECT_EQ(binary.provider(), "kiln");
      ASSERT_TRUE(binary.native_input_layout(0).has_value());
      EXPECT_EQ(binary.native_input_layout(0)->id, layout);
      ASSERT_TRUE(binary.native_output_layout(0).has_value());
      EXPECT_EQ(binary.native_output_layout(0)->id, layout);
      if (native_a) {
        ASSERT_TRUE(binary.use_native_input(0).ok());
      }
      if (native_b) {
        ASSERT_TRUE(binary.use_native_input(1).ok());
      }
      if (native_out) {
        ASSERT_TRUE(binary.use_native_output(0).ok());
      }
      ASSERT_TRUE(binary.finish().ok());
      std::vector<float> a_data = to_blocked16(c.at(0)), b_data = to_blocked16(c.at(1));
      const size_t bytes = a_data.size() * sizeof(float);
      Tensor a(ScalarType::Float32, sizes, a_data.data(), runtime::ShapeDynamism::Static, bytes);
      Tensor b(ScalarType::Float32, sizes, b_data.data(), runtime::ShapeDynamism::Static, bytes);
      std::vector<float> y_data(a_data.size(), std::nanf(""));
      Tensor y(ScalarType::Float32, sizes, y_data.data(), runtime::ShapeDynamism::Static, bytes);
      OwnedTensor y_plain = zeros(sizes);
      const Tensor* inputs[] = {native_a ? &a : &c.at(0), native_b ? &b : &c.at(1)};
      Tensor* out = native_out ? &y : &y_plain.tensor();
      ASSERT_TRUE(
          binary.run(runtime::Span<const Tensor*>(inputs, 2), runtime::Span<Tensor*>(&out, 1))
              .ok());
      OwnedTensor expected = reference(op, c.at(0), c.at(1));
      if (!native_out) {
        expect_near(y_plain, expected);
        continue;
      }
      // Every element of the layout, padding lanes included (zero).
      const std::vector<float> want = to_blocked16(expected.tensor());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(y_data[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << "element " << i;
      }
    }
  }
}

TEST(BinaryLoops, BroadcastsAndOneDnnsOwnTestsKeepThePrimitive) {
  uint32_t seed = 6500;
  Case broadcast("Add", {});
  broadcast.desc.small_ops_own_loops = true;
  broadcast.add(random_tensor({4, 64, 32}, seed++), false);
  broadcast.add(random_tensor({32}, seed++), false);
  auto op = broadcast.create();
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->provider(), "onednn");

  Case onednn = binary_case("Mul", {4, 64, 32}, 1, seed);
  onednn.desc.small_ops_own_loops = false;
  op = onednn.create();
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->provider(), "onednn");
  expect_near(onednn.run(**op), reference("Mul", onednn.at(0), onednn.at(1)));
}

}  // namespace
}  // namespace kiln::engine::cpu
