// Convs among blocked Convs: kiln's loops (blocked_conv.cpp) against oneDNN's direct kernel,
// nChw16c in and out natively as inside a model, on the pointwise layers of MobileNet-V2 and
// SqueezeNet, 3x3 layers of OCR detection, ResNet-18 and SqueezeNet, and first layers over RGB
// images (image_conv.cpp: the image read plain) and MobileNet-V2's depthwise layers
// (depthwise_conv.cpp) (batch 1, f32): run time
// (GFLOP/s) at the threads given, and the time to create each op (oneDNN generates its kernel's
// code then; with its primitive cache cleared before each creation). Run by hand, e.g.
//   kiln_blocked_conv_bench --benchmark_min_time=0.2

#include <kiln/engine/cpu/bench/native_op_bench.h>
#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/dnnl_common.h>

#include <benchmark/benchmark.h>

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
  int64_t k = 1, stride = 1;  // a k x k Conv (pads (k - 1) / 2) of this stride
  int64_t group = 1;          // c: depthwise (depthwise_conv.cpp)
};

const Layer kLayers[] = {
    // (kiln's loops refuse outputs over 2 MB: forced, 332-354 against oneDNN's 237-269 us at
    // 1 thread, whichever order they visit output blocks and pixel tiles in.)
    {"mobilenet 16->96 112x112", 16, 96, 112},
    {"mobilenet 24->144 56x56", 24, 144, 56},
    {"mobilenet 144->24 56x56", 144, 24, 56},
    {"mobilenet 32->192 28x28", 32, 192, 28},
    {"mobilenet 384->64 14x14", 384, 64, 14},
    {"mobilenet 576->96 14x14", 576, 96, 14},
    {"mobilenet 960->160 7x7", 960, 160, 7},
    {"mobilenet 320->1280 7x7", 320, 1280, 7},
    {"squeezenet 64->16 55x55", 64, 16, 55},
    {"squeezenet 16->64 55x55", 16, 64, 55},
    {"squeezenet 256->48 13x13", 256, 48, 13},
    {"squeezenet 512->1000 13x13", 512, 1000, 13},
    {"ocr_det 16->16 160x160 3x3", 16, 16, 160, 3},
    {"ocr_det 64->16 80x80 3x3", 64, 16, 80, 3},
    {"ocr_det 32->32 80x80 3x3", 32, 32, 80, 3},
    {"ocr_det 32->64 80x80 3x3 s2", 32, 64, 80, 3, 2},
    {"ocr_det 64->64 40x40 3x3", 64, 64, 40, 3},
    {"ocr_det 128->128 10x10 3x3", 128, 128, 10, 3},
    {"resnet 64->64 56x56 3x3", 64, 64, 56, 3},
    {"resnet 128->128 28x28 3x3", 128, 128, 28, 3},
    {"resnet 256->256 14x14 3x3", 256, 256, 14, 3},
    {"resnet 512->512 7x7 3x3", 512, 512, 7, 3},
    {"squeezenet 16->64 55x55 3x3", 16, 64, 55, 3},
    {"ocr_det image 3->16 320x320 3x3 s2", 3, 16, 320, 3, 2},
    {"mobilenet image 3->32 224x224 3x3 s2", 3, 32, 224, 3, 2},
    {"resnet image 3->64 224x224 7x7 s2", 3, 64, 224, 7, 2},
    {"image 3->16 128x128 3x3", 3, 16, 128, 3},
    {"image 1->32 64x64 5x5", 1, 32, 64, 5},
    {"mobilenet dw 32ch 112x112", 32, 32, 112, 3, 1, 32},
    {"mobilenet dw 96ch 112x112 s2", 96, 96, 112, 3, 2, 96},
    {"mobilenet dw 144ch 56x56", 144, 144, 56, 3, 1, 144},
    {"mobilenet dw 192ch 28x28", 192, 192, 28, 3, 1, 192},
    {"mobilenet dw 384ch 14x14", 384, 384, 14, 3, 1, 384},
    {"mobilenet dw 576ch 14x14 s2", 576, 576, 14, 3, 2, 576},
    {"mobilenet dw 960ch 7x7", 960, 960, 7, 3, 1, 960},
};

void BM_BlockedConv(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  const bool loops = state.range(1) == 1;
  const int threads = static_cast<int>(state.range(2));
  std::mt19937 generator(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const int64_t per_group = l.c / l.group;
  std::vector<float> w(static_cast<size_t>(l.o * per_group * l.k * l.k)),
      b(static_cast<size_t>(l.o));
  for (float& v : w) v = d(generator);
  for (float& v : b) v = d(generator);
  Tensor wt(ScalarType::Float32, {l.o, per_group, l.k, l.k}, w.data());
  const int64_t pad = (l.k - 1) / 2, out_hw = (l.hw + 2 * pad - l.k) / l.stride + 1;
  Tensor bt(ScalarType::Float32, {l.o}, b.data());
  OpDesc desc;
  desc.op = "Conv";
  desc.inputs = {TensorDesc{ScalarType::Float32, {1, l.c, l.hw, l.hw}},
                 TensorDesc{ScalarType::Float32, {l.o, per_group, l.k, l.k}},
                 TensorDesc{ScalarType::Float32, {l.o}}};
  desc.constants = {nullptr, &wt, &bt};
  desc.attributes = {
      kiln::engine::ir::Attribute{"strides", std::vector<int64_t>{l.stride, l.stride}},
      kiln::engine::ir::Attribute{"pads", std::vector<int64_t>{pad, pad, pad, pad}},
      kiln::engine::ir::Attribute{"group", l.group}};
  desc.post_ops = {PostOp{PostOpKind::Clip, 0.0f, 6.0f}};
  desc.num_threads = threads;
  desc.activation_layout = ActivationLayout::Blocked;
  desc.small_ops_own_loops = loops;  // off: kernel selection's oneDNN kernel
  // (Depthwise loops on narrow maps too, which kernel selection gives them only then.)
  desc.avoid_generated_code = loops && l.group != 1;
  dnnl::set_primitive_cache_capacity(0);  // a creation as in a fresh process
  const auto start = std::chrono::steady_clock::now();
  auto op = !loops         ? CpuOp::create(desc)
            : l.group != 1 ? kiln::engine::cpu::dnnl_impl::create_depthwise_conv(desc)
            : l.c < 16     ? kiln::engine::cpu::dnnl_impl::create_image_conv(desc)
                           : kiln::engine::cpu::dnnl_impl::create_blocked_conv(desc);
  const double create_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  dnnl::set_primitive_cache_capacity(1024);
  if (!op.ok()) {
    state.SkipWithError(op.status().message().c_str());
    return;
  }
  kiln::engine::cpu::bench::run_natively(state, **op, {1, l.c, l.hw, l.hw},
                                         {1, l.o, out_hw, out_hw}, 3);
  if (state.error_occurred()) return;
  const double flops = 2.0 * static_cast<double>(per_group * l.o * l.k * l.k * out_hw * out_hw);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["create_ms"] = create_ms;
  state.SetLabel(std::string(l.name) + ": " + (*op)->describe().substr(0, 40));
}

void layers(benchmark::internal::Benchmark* b) {
  for (int64_t threads : {1, 2}) {
    for (int64_t i = 0; i < static_cast<int64_t>(std::size(kLayers)); ++i) {
      b->Args({i, 0, threads});
      b->Args({i, 1, threads});
    }
  }
}

}  // namespace

BENCHMARK(BM_BlockedConv)->Apply(layers)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_MAIN();
