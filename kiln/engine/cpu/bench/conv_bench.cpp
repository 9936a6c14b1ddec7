// Conv throughput of the oneDNN CpuOp (with layout conversions, on plain NCHW, and native as
// inside a model) against the reference `conv` kernel at one thread, on ResNet-18 3x3 layers, a
// 1x1 projection and a MobileNet depthwise 3x3 (batch 1, f32); MatMul throughput on the GPT
// benchmark model's layers.
// Counters: GFLOP/s and the percentage of one core's FMA peak, measured by BM_FmaPeak in the
// same process (a loop of independent multiply-adds on the widest vectors the CPU has). Run by
// hand, e.g.
//   kiln_cpu_bench --benchmark_min_time=0.2

#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/runtime_matmul.h>
#include <kiln/kernels/nn_conv_ops.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::engine::cpu::ActivationLayout;
using kiln::engine::cpu::CpuOp;
using kiln::engine::cpu::OpDesc;
using kiln::engine::cpu::TensorDesc;
using kiln::runtime::ScalarType;
using kiln::runtime::Tensor;

// Independent chains of multiply-adds on the widest registers of the CPU, in vectors of that
// width (16 floats with AVX-512, 8 with AVX2 and FMA: GCC's AVX2 code keeps 16-float vectors
// in memory): 16 chains in AVX-512's 32 registers, 12 in AVX2's 16 (with the two constants;
// a 13th spills), either enough to keep two FMA units of 4-5 cycles' latency busy. So
// 2 flops x lanes x chains per iteration. Named chains, not an array: GCC at -O2 keeps an
// array of vectors in memory.
#define KILN_CHAINS(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
using V16 = float __attribute__((vector_size(64)));  // NOLINT: GCC/Clang vector types
using V8 = float __attribute__((vector_size(32)));   // NOLINT
using V4 = float __attribute__((vector_size(16)));   // NOLINT

template <class V, int kChains>
[[gnu::always_inline]] inline float fma_chains_of(int64_t iterations, float seed) {
  constexpr int kLanes = sizeof(V) / sizeof(float);
#define KILN_INIT(j) [[maybe_unused]] V c##j = V{} + (seed + (j)*1e-3f);
#define KILN_STEP(j) \
  if constexpr ((j) < kChains) c##j = c##j * m + a;
#define KILN_SUM(j) \
  if constexpr ((j) < kChains) sum += c##j[0] + c##j[kLanes - 1];
  KILN_CHAINS(KILN_INIT)
  const V m = V{} + 0.999999f, a = V{} + 1e-7f;
  for (int64_t i = 0; i < iterations; ++i) {
    KILN_CHAINS(KILN_STEP)
  }
  float sum = 0.0f;
  KILN_CHAINS(KILN_SUM)
  return sum;
#undef KILN_INIT
#undef KILN_STEP
#undef KILN_SUM
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations, float seed) {
  return fma_chains_of<V16, 16>(iterations, seed);
}
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations, float seed) {
  return fma_chains_of<V8, 12>(iterations, seed);
}
#endif

// The lanes of the vectors fma_chains runs on this CPU, and how many chains.
int fma_lanes() {
#if defined(__GNUC__) && defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
#endif
  return 4;
}
int fma_chain_count() { return fma_lanes() == 16 ? 16 : 12; }

float fma_chains(int64_t iterations, float seed) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (fma_lanes() == 16) return fma_chains_avx512(iterations, seed);
  if (fma_lanes() == 8) return fma_chains_avx2(iterations, seed);
#endif
  return fma_chains_of<V4, 12>(iterations, seed);
}

double flops_per_iteration() { return 2.0 * fma_lanes() * fma_chain_count(); }

// One core's FMA peak in GFLOP/s: the best of five runs of 5 GFLOP each.
double peak_gflops() {
  static const double peak = [] {
    constexpr int64_t kIterations = 10'000'000;
    double best = 0.0;
    for (int r = 0; r < 5; ++r) {
      auto start = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(fma_chains(kIterations, static_cast<float>(r)));
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      best = std::max(best, kIterations * flops_per_iteration() / took.count() * 1e-9);
    }
    return best;
  }();
  return peak;
}

void BM_FmaPeak(benchmark::State& state) {
  constexpr int64_t kIterations = 1'000'000;
  for (auto _ : state) benchmark::DoNotOptimize(fma_chains(kIterations, 1.0f));
  state.counters["GFLOP/s"] = benchmark::Counter(kIterations * flops_per_iteration() * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::to_string(fma_chain_count()) + " chains of " + std::to_string(fma_lanes()) +
                 "-float multiply-adds");
}

struct Layer {
  const char* name;
  int64_t c, m, hw, k, group;
};

const Layer kLayers[] = {
    {"3x3 64ch 56x56", 64, 64, 56, 3, 1},     {"3x3 128ch 28x28", 128, 128, 28, 3, 1},
    {"3x3 256ch 14x14", 256, 256, 14, 3, 1},  {"3x3 512ch 7x7", 512, 512, 7, 3, 1},
    {"1x1 64->256 56x56", 64, 256, 56, 1, 1}, {"dw3x3 32ch 112x112", 32, 32, 112, 3, 32},
};

struct Data {
  std::vector<float> x, w, y;
  Tensor xt, wt, yt;
  explicit Data(const Layer& l) {
    std::mt19937 generator(1);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    x.resize(static_cast<size_t>(l.c * l.hw * l.hw));
    w.resize(static_cast<size_t>(l.m * (l.c / l.group) * l.k * l.k));
    y.resize(static_cast<size_t>(l.m * l.hw * l.hw));
    for (float& v : x) v = d(generator);
    for (float& v : w) v = d(generator);
    xt = Tensor(ScalarType::Float32, {1, l.c, l.hw, l.hw}, x.data());
    wt = Tensor(ScalarType::Float32, {l.m, l.c / l.group, l.k, l.k}, w.data());
    yt = Tensor(ScalarType::Float32, {1, l.m, l.hw, l.hw}, y.data());
  }
};

double flops(const Layer& l) {
  return 2.0 * static_cast<double>(l.m * l.hw * l.hw * (l.c / l.group) * l.k * l.k);
}

void report(benchmark::State& state, const Layer& l) {
  state.SetLabel(l.name);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops(l) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["%peak"] = benchmark::Counter(flops(l) * 1e-9 / peak_gflops() * 100.0,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DnnlConv(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  Data data(l);
  OpDesc desc;
  desc.op = "Conv";
  int64_t pad = l.k / 2;
  desc.attributes = {{"pads", std::vector<int64_t>{pad, pad, pad, pad}}, {"group", l.group}};
  desc.inputs = {TensorDesc{ScalarType::Float32, {1, l.c, l.hw, l.hw}},
                 TensorDesc{ScalarType::Float32, {l.m, l.c / l.group, l.k, l.k}}};
  desc.constants = {nullptr, &data.wt};
  desc.num_threads = 1;
  desc.activation_layout =
      state.range(1) == 1 ? ActivationLayout::Plain : ActivationLayout::Preferred;
  auto op = CpuOp::create(desc);
  if (!op.ok()) {
    state.SkipWithError(op.status().message().c_str());
    return;
  }
  // Mode 2: activations stay in the op's own layout, as between Convs inside a model (layout
  // propagation), so no conversion is timed. Buffers sized for that layout (padding included).
  std::vector<float> native_x, native_y;
  Tensor nx = data.xt, ny = data.yt;
  if (state.range(1) == 2) {
    if (auto in = (*op)->native_input_layout(0)) {
      native_x.assign(in->bytes / sizeof(float) + 16, 0.5f);
      nx = Tensor(ScalarType::Float32, {1, l.c, l.hw, l.hw}, native_x.data());
      if (!(*op)->use_native_input(0).ok()) state.SkipWithError("native input");
    }
    if (auto out = (*op)->native_output_layout(0)) {
      native_y.assign(out->bytes / sizeof(float) + 16, 0.0f);
      ny = Tensor(ScalarType::Float32, {1, l.m, l.hw, l.hw}, native_y.data());
      if (!(*op)->use_native_output(0).ok()) state.SkipWithError("native output");
    }
  }
  const Tensor* inputs[] = {&nx, nullptr};
  Tensor* outputs[] = {&ny};
  for (auto _ : state) {
    if (!(*op)->run(inputs, outputs).ok()) state.SkipWithError("run failed");
  }
  report(state, l);
  static const char* kModes[] = {" preferred+conversions | ", " plain NCHW | ", " native | "};
  state.SetLabel(std::string(l.name) + kModes[state.range(1)] + (*op)->describe());
}

// MatMul layers of the GPT benchmark models (prefill at 128 tokens; gpt: d = 128, vocab 1000;
// gpt_large: d = 512, vocab 8192) with constant weights, at one thread. The second argument:
// 0, kernel selection as the CPU decides; 1, as on a CPU without AVX-512 (kiln's AVX2 MatMul;
// run with ONEDNN_MAX_CPU_ISA=AVX2 for oneDNN's choice there, mode 0); 2, the op of a
// shape-generic plan (`RuntimeMatMul`: rows known at run time only).
struct MatMulLayer {
  const char* name;
  int64_t m, k, n;
};
const MatMulLayer kMatMuls[] = {
    {"qkv 128x128x384", 128, 128, 384},
    {"mlp up 128x128x512", 128, 128, 512},
    {"mlp down 128x512x128", 128, 512, 128},
    {"lm head 128x128x1000", 128, 128, 1000},
    {"large 512x1024x1024", 512, 1024, 1024},
    {"gpt_large qkv 128x512x1536", 128, 512, 1536},
    {"gpt_large fc2 128x2048x512", 128, 2048, 512},
    {"gpt_large head 128x512x8192", 128, 512, 8192},
};

// Rates of layer `l` and its label: the layer's name, then `rest` (" | " and the op).
void matmul_counters(benchmark::State& state, const MatMulLayer& l, const std::string& rest) {
  double flops = 2.0 * static_cast<double>(l.m * l.k * l.n);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["%peak"] = benchmark::Counter(flops * 1e-9 / peak_gflops() * 100.0,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(l.name) + rest);
}

void BM_DnnlMatMul(benchmark::State& state) {
  const MatMulLayer& l = kMatMuls[state.range(0)];
  std::mt19937 generator(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(l.m * l.k)), b(static_cast<size_t>(l.k * l.n)),
      c(static_cast<size_t>(l.m * l.n));
  for (float& v : a) v = d(generator);
  for (float& v : b) v = d(generator);
  Tensor at(ScalarType::Float32, {l.m, l.k}, a.data()),
      bt(ScalarType::Float32, {l.k, l.n}, b.data()), ct(ScalarType::Float32, {l.m, l.n}, c.data());
  OpDesc desc;
  desc.op = "MatMul";
  desc.inputs = {TensorDesc{ScalarType::Float32, {l.m, l.k}},
                 TensorDesc{ScalarType::Float32, {l.k, l.n}}};
  desc.constants = {nullptr, &bt};
  desc.num_threads = 1;
  const bool as_avx2 = state.range(1) == 1;
  if (state.range(1) == 2) {
    auto generic = kiln::engine::cpu::RuntimeMatMul::create(desc);
    if (!generic.ok()) {
      state.SkipWithError(generic.status().message().c_str());
      return;
    }
    for (auto _ : state) {
      if (!(*generic)->run(at, nullptr, ct).ok()) state.SkipWithError("run failed");
    }
    matmul_counters(state, l, " shape-generic | " + (*generic)->describe());
    return;
  }
  if (as_avx2) kiln::engine::cpu::set_avx512_for_testing(false);
  auto op = CpuOp::create(desc);
  kiln::engine::cpu::set_avx512_for_testing(std::nullopt);
  if (!op.ok()) {
    state.SkipWithError(op.status().message().c_str());
    return;
  }
  const Tensor* inputs[] = {&at, nullptr};
  Tensor* outputs[] = {&ct};
  for (auto _ : state) {
    if (!(*op)->run(inputs, outputs).ok()) state.SkipWithError("run failed");
  }
  matmul_counters(state, l, (as_avx2 ? " as AVX2 | " : " | ") + (*op)->describe());
}

// Attention's products inside the GPT benchmark models (prefill at 128 tokens): per head,
// scores = Q [T, dh] x K^T (K stored [T, dh], read transposed) and context = P [T, T] x V
// [T, dh], both operands computed at run time, at one thread. The second argument: 0, the op
// of a per-shape plan (CpuOp: oneDNN's batched matmul); 1, of a shape-generic plan
// (`RuntimeMatMul`: every dim at run time, each head's B packed at the call).
struct AttentionLayer {
  const char* name;
  int64_t heads, m, k, n;
  bool b_transposed;
};
const AttentionLayer kAttention[] = {
    {"gpt scores 4x128x32x128", 4, 128, 32, 128, true},
    {"gpt context 4x128x128x32", 4, 128, 128, 32, false},
    {"gpt_large scores 8x128x64x128", 8, 128, 64, 128, true},
    {"gpt_large context 8x128x128x64", 8, 128, 128, 64, false},
};

void BM_AttentionMatMul(benchmark::State& state) {
  const AttentionLayer& l = kAttention[state.range(0)];
  std::mt19937 generator(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(l.heads * l.m * l.k)),
      b(static_cast<size_t>(l.heads * l.k * l.n)), c(static_cast<size_t>(l.heads * l.m * l.n));
  for (float& v : a) v = d(generator);
  for (float& v : b) v = d(generator);
  const std::vector<int64_t> b_sizes{1, l.heads, l.k, l.n};
  const std::vector<int64_t> b_stored =
      l.b_transposed ? std::vector<int64_t>{1, l.heads, l.n, l.k} : b_sizes;
  Tensor at(ScalarType::Float32, {1, l.heads, l.m, l.k}, a.data()),
      bt(ScalarType::Float32, b_stored, b.data()),
      ct(ScalarType::Float32, {1, l.heads, l.m, l.n}, c.data());
  OpDesc desc;
  desc.op = "MatMul";
  desc.inputs = {TensorDesc{ScalarType::Float32, {1, l.heads, l.m, l.k}},
                 TensorDesc{ScalarType::Float32, b_sizes}};
  desc.b_transposed = l.b_transposed;
  desc.num_threads = 1;
  const double flops = 2.0 * static_cast<double>(l.heads * l.m * l.k * l.n);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (state.range(1) == 1) {
    auto generic = kiln::engine::cpu::RuntimeMatMul::create(desc);
    if (!generic.ok()) {
      state.SkipWithError(generic.status().message().c_str());
      return;
    }
    for (auto _ : state) {
      if (!(*generic)->run(at, &bt, ct).ok()) state.SkipWithError("run failed");
    }
    state.SetLabel(std::string(l.name) + " shape-generic | " + (*generic)->describe());
    return;
  }
  auto op = CpuOp::create(desc);
  if (!op.ok()) {
    state.SkipWithError(op.status().message().c_str());
    return;
  }
  const Tensor* inputs[] = {&at, &bt};
  Tensor* outputs[] = {&ct};
  for (auto _ : state) {
    if (!(*op)->run(inputs, outputs).ok()) state.SkipWithError("run failed");
  }
  state.SetLabel(std::string(l.name) + " | " + (*op)->describe());
}

void BM_ReferenceConv(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  Data data(l);
  kiln::kernels::ConvOptions options;
  int64_t pad = l.k / 2;
  options.pads = {pad, pad, pad, pad};
  options.group = l.group;
  for (auto _ : state) {
    if (!kiln::kernels::conv(data.xt, data.wt, nullptr, options, data.yt).ok()) {
      state.SkipWithError("conv failed");
    }
  }
  report(state, l);
}

void layers(benchmark::internal::Benchmark* b, bool layouts) {
  for (int64_t i = 0; i < static_cast<int64_t>(std::size(kLayers)); ++i) {
    if (layouts) {
      b->Args({i, 0})->Args({i, 1})->Args({i, 2});
    } else {
      b->Arg(i);
    }
  }
  // Wall time: on a shared machine the CPU time of a preempted process is not trustworthy.
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DnnlConv)->Apply([](benchmark::internal::Benchmark* b) { layers(b, true); });
BENCHMARK(BM_ReferenceConv)->Apply([](benchmark::internal::Benchmark* b) { layers(b, false); });
BENCHMARK(BM_DnnlMatMul)
    ->ArgsProduct({benchmark::CreateDenseRange(0, static_cast<int64_t>(std::size(kMatMuls)) - 1, 1),
                   {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionMatMul)
    ->ArgsProduct({benchmark::CreateDenseRange(0, static_cast<int64_t>(std::size(kAttention)) - 1,
                                               1),
                   {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
