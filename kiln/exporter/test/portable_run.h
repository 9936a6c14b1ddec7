#pragma once

// Running imported models on the reference kernels, for the importer's rewrite tests.
#include <kiln/exporter/export.h>
#include <kiln/exporter/onnx/onnx_importer.h>
#include <kiln/exporter/writer/program_writer.h>
#include <kiln/runtime/core/data_loader.h>
#include <kiln/runtime/executor/method.h>
#include <kiln/runtime/executor/program.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kiln::exporter::test {

/// Output 0 of function `forward` of `model`, lowered to a portable program, for the f32 input 0
/// `x` of `sizes`; empty (with a test failure) when it does not run.
inline std::vector<float> run_portable(const engine::ir::Model& model,
                                       const std::vector<int64_t>& sizes, std::vector<float> x) {
  ProgramSpec spec;
  runtime::Status lowered = lower_to_portable(model, "forward", "forward", {}, spec);
  EXPECT_TRUE(lowered.ok()) << lowered;
  auto bytes = write_program(spec);
  EXPECT_TRUE(bytes.ok());
  if (!lowered.ok() || !bytes.ok()) return {};
  auto program = runtime::Program::load(
      std::make_shared<runtime::BufferDataLoader>(bytes->data(), bytes->size()));
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  auto method = (*program)->load_method("forward");
  EXPECT_TRUE(method.ok()) << method.status();
  if (!method.ok()) return {};
  runtime::Tensor input(runtime::ScalarType::Float32, sizes, x.data());
  EXPECT_TRUE((*method)->set_input(0, runtime::EValue(input)).ok());
  runtime::Status ran = (*method)->execute();
  EXPECT_TRUE(ran.ok()) << ran;
  if (!ran.ok()) return {};
  const runtime::Tensor& y = (*method)->get_output(0).to_tensor();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

/// `n` values drawn uniformly from [lo, hi) with `seed`.
inline std::vector<float> seeded(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

inline size_t numel(const std::vector<int64_t>& sizes) {
  size_t n = 1;
  for (int64_t s : sizes) n *= static_cast<size_t>(s);
  return n;
}

/// Imports the ONNX model `bytes` with and without the rewrites, runs both on one seeded input
/// of `sizes` and checks their outputs agree within `tolerance` (relative, at least absolute);
/// returns the rewritten model.
inline engine::ir::Model expect_same_results(const std::string& bytes,
                                             const std::vector<int64_t>& sizes,
                                             double tolerance = 1e-5) {
  auto rewritten = import_onnx(bytes, "m.onnx");
  ImportOptions plain;
  plain.rewrite_patterns = false;
  auto original = import_onnx(bytes, "m.onnx", plain);
  EXPECT_TRUE(rewritten.ok()) << rewritten.status();
  EXPECT_TRUE(original.ok()) << original.status();
  if (!rewritten.ok() || !original.ok()) return {};
  std::vector<float> x = seeded(numel(sizes), 7, -2.0f, 3.0f);
  std::vector<float> a = run_portable(*rewritten, sizes, x), b = run_portable(*original, sizes, x);
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_NEAR(a[i], b[i], tolerance * (1.0 + std::fabs(b[i]))) << "element " << i;
  }
  return std::move(rewritten).get();
}

/// The ops of the model's first function, in order.
inline std::vector<std::string> op_names(const engine::ir::Model& model) {
  std::vector<std::string> out;
  for (const auto& node : model.functions[0].nodes) out.push_back(node.op);
  return out;
}

}  // namespace kiln::exporter::test
