// Pooling time of kiln's loops (pool_loops.cpp) against oneDNN's primitive, one thread, on the
// pools of the bench's models: an 8x8 digit classifier's (plain and nChw16c), ResNet-18's stem
// and SqueezeNet's (ceil_mode, nChw16c or nhwc as their Convs compute). Each layout is read and
// written natively, as between Convs inside a model: oneDNN's primitive (0), the default choice
// (1) and kiln's loops for pools of any size (2, OpDesc::avoid_generated_code: on an Intel
// Xeon 0.64-0.69 x oneDNN's time on 55 x 55 to 160 x 160 nChw16c maps, 1.7-2 x on ResNet-18's
// nhwc stem, 1.1-1.3 x on 28 x 28 nChw16c). Run by hand, e.g.
//   kiln_pool_bench --benchmark_min_time=0.2

#include <kiln/engine/cpu/cpu_op.h>
#include <kiln/engine/cpu/dnnl_common.h>

#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

namespace {

using kiln::engine::cpu::CpuOp;
using kiln::engine::cpu::OpDesc;
using kiln::engine::cpu::TensorDesc;
using kiln::runtime::ScalarType;
using kiln::runtime::Tensor;
using Tag = dnnl::memory::format_tag;

struct Pool {
  const char* name;
  std::vector<int64_t> x;
  int64_t k, stride, pad, ceil;
  Tag layout;  // undef: plain
};

const Pool kPools[] = {
    {"digits 10x16x8x8 2x2 plain", {10, 16, 8, 8}, 2, 2, 0, 0, Tag::undef},
    {"digits 10x32x4x4 2x2 nChw16c", {10, 32, 4, 4}, 2, 2, 0, 0, Tag::aBcd16b},
    {"resnet 64x112x112 3x3s2 nChw16c", {1, 64, 112, 112}, 3, 2, 1, 0, Tag::aBcd16b},
    {"resnet 64x112x112 3x3s2 nhwc", {1, 64, 112, 112}, 3, 2, 1, 0, Tag::acdb},
    {"squeezenet 128x55x55 3x3s2 ceil nChw16c", {1, 128, 55, 55}, 3, 2, 0, 1, Tag::aBcd16b},
    {"squeezenet 256x27x27 3x3s2 ceil nhwc", {1, 256, 27, 27}, 3, 2, 0, 1, Tag::acdb},
    {"plain 64x56x56 3x3s2", {1, 64, 56, 56}, 3, 2, 1, 0, Tag::undef},
    {"plain 16x12x12 2x2s2", {1, 16, 12, 12}, 2, 2, 0, 0, Tag::undef},
    {"64x14x14 3x3s2 nChw16c", {1, 64, 14, 14}, 3, 2, 1, 0, Tag::aBcd16b},
    {"64x14x14 3x3s2 nhwc", {1, 64, 14, 14}, 3, 2, 1, 0, Tag::acdb},
    {"64x28x28 3x3s2 nChw16c", {1, 64, 28, 28}, 3, 2, 1, 0, Tag::aBcd16b},
    {"64x28x28 3x3s2 nhwc", {1, 64, 28, 28}, 3, 2, 1, 0, Tag::acdb},
    {"128x28x28 2x2s2 nChw16c", {1, 128, 28, 28}, 2, 2, 0, 0, Tag::aBcd16b},
    {"ocr_det 16x160x160 3x3s2 nChw16c", {1, 16, 160, 160}, 3, 2, 1, 0, Tag::aBcd16b},
};

void BM_Pool(benchmark::State& state) {
  const Pool& p = kPools[state.range(0)];
  const bool loops = state.range(1) >= 1;
  OpDesc desc;
  desc.op = "MaxPool";
  desc.attributes = {{"kernel_shape", std::vector<int64_t>{p.k, p.k}},
                     {"strides", std::vector<int64_t>{p.stride, p.stride}},
                     {"pads", std::vector<int64_t>{p.pad, p.pad, p.pad, p.pad}},
                     {"ceil_mode", p.ceil}};
  desc.inputs = {TensorDesc{ScalarType::Float32, p.x}};
  desc.num_threads = 1;
  desc.small_ops_own_loops = loops;
  desc.avoid_generated_code = state.range(1) == 2;  // kiln's loops for pools of any size
  if (loops && p.layout == Tag::undef) desc.op = "MaxPool";
  const dnnl::memory::desc md(kiln::engine::cpu::dnnl_impl::to_dims(p.x),
                              dnnl::memory::data_type::f32,
                              p.layout == Tag::undef ? Tag::abcd : p.layout);
  if (p.layout != Tag::undef) desc.input_layouts = {kiln::engine::cpu::dnnl_impl::layout_bytes(md)};
  auto op = CpuOp::create(desc);
  if (!op.ok()) {
    state.SkipWithError(op.status().message().c_str());
    return;
  }
  if (p.layout != Tag::undef) {
    if (!(*op)->use_native_input(0).ok() || !(*op)->use_native_output(0).ok()) {
      state.SkipWithError("no native layout");
      return;
    }
  }
  if (!(*op)->finish().ok()) return;
  const std::vector<int64_t>& y_sizes = (*op)->outputs()[0].sizes;
  std::vector<float> x(md.get_size() / sizeof(float) + 16 * 1024), y(x.size());
  std::mt19937 generator(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : x) v = d(generator);
  Tensor xt(ScalarType::Float32, p.x, x.data());
  Tensor yt(ScalarType::Float32, y_sizes, y.data());
  const Tensor* in = &xt;
  Tensor* out = &yt;
  for (auto _ : state) {
    if (!(*op)
             ->run(kiln::runtime::Span<const Tensor*>(&in, 1),
                   kiln::runtime::Span<Tensor*>(&out, 1))
             .ok()) {
      state.SkipWithError("run failed");
      return;
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(p.name) + ": " + (*op)->describe());
}

void pools(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < static_cast<int64_t>(std::size(kPools)); ++i) {
    b->Args({i, 0});
    b->Args({i, 1});
    b->Args({i, 2});
  }
}

}  // namespace

BENCHMARK(BM_Pool)->Apply(pools)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
