// Shared by the benchmarks of ops among blocked ones (blocked_conv_bench.cpp, winograd_bench.cpp):
// an op run on values in its own layouts, as inside a model. Include from benchmark sources.
#pragma once

#include <kiln/engine/cpu/cpu_op.h>

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace kiln::engine::cpu::bench {

/// Runs `op` (one input at index 0 and constants after it, one output) in its native input
/// (plain where it has none: an image) and output layouts, on seeded random input of `x_sizes`
/// into an output of `y_sizes`, for the benchmark's iterations; skips the benchmark with the
/// reason when the op has no native output layout or a run fails.
inline void run_natively(benchmark::State& state, CpuOp& op, const std::vector<int64_t>& x_sizes,
                         const std::vector<int64_t>& y_sizes, size_t num_inputs) {
  const auto in_layout = op.native_input_layout(0);
  const auto out_layout = op.native_output_layout(0);
  if (!out_layout || (in_layout && !op.use_native_input(0).ok()) || !op.use_native_output(0).ok() ||
      !op.finish().ok()) {
    state.SkipWithError("no native layout");
    return;
  }
  int64_t x_floats = 1;
  for (int64_t s : x_sizes) x_floats *= s;
  std::mt19937 generator(2);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> x(in_layout ? in_layout->bytes / sizeof(float) : x_floats),
      y(out_layout->bytes / sizeof(float));
  for (float& v : x) v = d(generator);
  runtime::Tensor xt(runtime::ScalarType::Float32, x_sizes, x.data(),
                     runtime::ShapeDynamism::Static, x.size() * sizeof(float));
  runtime::Tensor yt(runtime::ScalarType::Float32, y_sizes, y.data(),
                     runtime::ShapeDynamism::Static, out_layout->bytes);
  std::vector<const runtime::Tensor*> inputs(num_inputs, nullptr);
  inputs[0] = &xt;
  runtime::Tensor* out = &yt;
  for (auto _ : state) {
    if (!op.run(runtime::Span<const runtime::Tensor*>(inputs.data(), inputs.size()),
                runtime::Span<runtime::Tensor*>(&out, 1))
             .ok()) {
      state.SkipWithError("run failed");
      return;
    }
    benchmark::DoNotOptimize(y.data());
  }
}

}  // namespace kiln::engine::cpu::bench
