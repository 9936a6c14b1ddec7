// 3x3 stride-1 Convs among blocked Convs: kiln's direct loops (0), oneDNN's Winograd kernel (1),
// kiln's Winograd loops' choice (2, winograd_conv.cpp) and its F(3x3, 3x3) (3) and F(4x4, 3x3)
// (4) loops (OpDesc::winograd), nChw16c in and out natively
// as inside a model (f32, Relu), over output channels and image sizes around the rule that
// keeps a Conv to one block of output channels over a large image direct (winograd_fit,
// engine/compile/layout_propagation.cpp): the run time (GFLOP/s of the direct algorithm's work) at
// the threads given, and the time to create each op (oneDNN's primitive cache cleared before). Run
// by hand, e.g.
//   kiln_winograd_bench --benchmark_min_time=0.2 --benchmark_enable_random_interleaving=true
//                       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

#include <kiln/engine/cpu/bench/native_op_bench.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/dnnl_common.h>

#include <benchmark/benchmark.h>
#include <dnnl.hpp>

#include <chrono>
#include <random>
#include <string>
#include <vector>

namespace {

using kiln::engine::cpu::ActivationLayout;
using kiln::engine::cpu::CpuOp;
using kiln::engine::cpu::OpDesc;
using kiln::engine::cpu::PostOp;
using kiln::engine::cpu::PostOpKind;
using kiln::engine::cpu::TensorDesc;
using kiln::runtime::ScalarType;
using kiln::runtime::Tensor;

struct Layer {
  const char* name;
  int64_t c, o, hw;
  int64_t n = 1;  // images
};

const Layer kLayers[] = {
    {"ocr stem 16->16 160x160", 16, 16, 160},
    {"ocr head 64->16 80x80", 64, 16, 80},
    {"64->16 40x40", 64, 16, 40},
    {"16->32 80x80", 16, 32, 80},
    {"32->32 80x80", 32, 32, 80},
    {"32->48 80x80", 32, 48, 80},
    {"64->64 40x40", 64, 64, 40},
    {"resnet 64->64 56x56", 64, 64, 56},
    {"128->16 20x20", 128, 16, 20},
    {"ocr 128->128 40x40", 128, 128, 40},
    {"ocr 256->256 20x20", 256, 256, 20},
    {"resnet 128->128 28x28", 128, 128, 28},
    {"resnet 256->256 14x14", 256, 256, 14},
    {"ocr 64->64 80x80", 64, 64, 80},
    {"32->64 32x32", 32, 64, 32},
    {"128->128 16x16", 128, 128, 16},
    {"ocr smooth 64->16 20x20", 64, 16, 20},
    {"ocr smooth 64->16 10x10", 64, 16, 10},
    {"ocr 96->96 20x20", 96, 96, 20},
    {"ocr 128->128 10x10", 128, 128, 10},
    {"32->32 40x40", 32, 32, 40},
    {"digits 16->32 4x4 x10", 16, 32, 4, 10},
    {"16->32 8x8 x10", 16, 32, 8, 10},
    {"64->64 14x14", 64, 64, 14},
};

void BM_Winograd(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  const int64_t mode = state.range(1);
  std::mt19937 generator(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(l.o * l.c * 9)), b(static_cast<size_t>(l.o));
  for (float& v : w) v = d(generator);
  for (float& v : b) v = d(generator);
  Tensor wt(ScalarType::Float32, {l.o, l.c, 3, 3}, w.data());
  Tensor bt(ScalarType::Float32, {l.o}, b.data());
  OpDesc desc;
  desc.op = "Conv";
  desc.attributes = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  desc.inputs = {TensorDesc{ScalarType::Float32, {l.n, l.c, l.hw, l.hw}},
                 TensorDesc{ScalarType::Float32, {l.o, l.c, 3, 3}},
                 TensorDesc{ScalarType::Float32, {l.o}}};
  desc.constants = {nullptr, &wt, &bt};
  desc.post_ops = {PostOp{PostOpKind::Relu}};
  desc.num_threads = static_cast<int>(state.range(2));
  desc.activation_layout = ActivationLayout::Blocked;
  desc.winograd = mode != 0;
  desc.small_ops_own_loops = mode != 1;  // (else kiln's Winograd loops take large images)
  desc.avoid_generated_code = mode >= 2;
  dnnl::set_primitive_cache_capacity(0);  // a creation as in a fresh process
  const auto start = std::chrono::steady_clock::now();
  using kiln::engine::cpu::dnnl_impl::WinogradTile;
  auto op = mode <= 2 ? CpuOp::create(desc)
                      : kiln::engine::cpu::dnnl_impl::create_winograd_conv(
                            desc, mode == 3 ? WinogradTile::F3x3 : WinogradTile::F4x4);
  const double create_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  dnnl::set_primitive_cache_capacity(1024);
  if (!op.ok()) {
    state.SkipWithError(op.status().message().c_str());
    return;
  }
  kiln::engine::cpu::bench::run_natively(state, **op, {l.n, l.c, l.hw, l.hw},
                                         {l.n, l.o, l.hw, l.hw}, 3);
  if (state.error_occurred()) return;
  const double flops = 2.0 * static_cast<double>(l.n * l.c * l.o * 9 * l.hw * l.hw);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["create_ms"] = create_ms;
  state.SetLabel(std::string(l.name) + ": " + (*op)->describe().substr(0, 40));
}

void layers(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2}) {
    for (int64_t i = 0; i < static_cast<int64_t>(std::size(kLayers)); ++i) {
      for (int64_t mode : {0, 1, 2, 3, 4}) b->Args({i, mode, threads});
    }
  }
}

}  // namespace

BENCHMARK(BM_Winograd)->Apply(layers)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_MAIN();
