// pack_winograd_weights against oneDNN's own reorder into the Winograd layouts its convolutions
// pick, on seeded random weights: the same bytes, for both tile sizes and for channel counts
// the layouts pad. Every Winograd layout oneDNN picks for them must be one the packing writes.

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/winograd_weights.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {
namespace {

using dnnl::memory;

// The weights layout oneDNN's Winograd convolution picks for an oc x ic 3x3 Conv over a
// hw x hw image (blocked activations), or nullopt where it has no Winograd kernel.
std::optional<memory::desc> winograd_weights_md(int64_t oc, int64_t ic, int64_t hw) {
  auto blocked = [](memory::dims dims) {
    return memory::desc(dims, memory::data_type::f32, memory::format_tag::nChw16c);
  };
  memory::desc w_any({oc, ic, 3, 3}, memory::data_type::f32, memory::format_tag::any);
  try {
    dnnl::convolution_forward::desc conv(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd,
        blocked({1, ic, hw, hw}), w_any, blocked({1, oc, hw, hw}), {1, 1}, {1, 1}, {1, 1});
    dnnl::convolution_forward::primitive_desc pd(conv, cpu_engine());
    if (std::string(pd.impl_info_str()).find("wino") == std::string::npos) return std::nullopt;
    return pd.weights_desc();
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

std::vector<uint8_t> onednn_reorder(const memory::desc& target, std::vector<float>& weights,
                                    int64_t oc, int64_t ic) {
  std::vector<uint8_t> out(target.get_size());
  memory from(memory::desc({oc, ic, 3, 3}, memory::data_type::f32, memory::format_tag::oihw),
              cpu_engine(), weights.data());
  memory to(target, cpu_engine(), out.data());
  dnnl::reorder(from, to).execute(cpu_stream(), from, to);
  cpu_stream().wait();
  return out;
}

TEST(WinogradWeights, PacksTheBytesOfOneDnnsReorder) {
  struct Shape {
    int64_t oc, ic, hw;
  };
  // ResNet's 3x3 layers, output channels that are not a multiple of 16, unequal channels. oneDNN
  // picks a layout by the CPU's cache sizes, so which shapes take which layout differs between
  // CPUs: on a Xeon of 2 MiB L2 a core only the last three take the third layout.
  const std::vector<Shape> shapes = {{64, 64, 56},  {128, 128, 28}, {256, 256, 14}, {40, 32, 20},
                                     {128, 64, 28}, {16, 48, 9},    {24, 16, 8},    {96, 160, 14},
                                     {128, 16, 20}, {256, 16, 28},  {256, 256, 20}};
  std::set<int> formats;
  std::mt19937 rng(4242);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    SCOPED_TRACE("oc " + std::to_string(s.oc) + " ic " + std::to_string(s.ic) + " " +
                 std::to_string(s.hw) + "x" + std::to_string(s.hw));
    auto md = winograd_weights_md(s.oc, s.ic, s.hw);
    if (!md) continue;
    EXPECT_TRUE(packs_winograd(*md)) << "format " << md->data.format_desc.wino_desc.wino_format;
    if (!packs_winograd(*md)) continue;
    formats.insert(md->data.format_desc.wino_desc.wino_format);
    std::vector<float> weights(static_cast<size_t>(s.oc * s.ic * 9));
    for (float& w : weights) w = dist(rng);
    std::vector<uint8_t> expected = onednn_reorder(*md, weights, s.oc, s.ic);
    std::vector<uint8_t> packed(md->get_size(), 0xA5);
    ASSERT_TRUE(pack_winograd_weights(*md, weights.data(), s.oc, s.ic, packed.data()).ok());
    size_t differ = 0;
    for (size_t i = 0; i < expected.size(); i += 4) {
      differ += std::memcmp(&expected[i], &packed[i], 4) != 0;
    }
    EXPECT_EQ(differ, 0u) << "of " << expected.size() / 4 << " floats";
  }
  if (formats.empty()) GTEST_SKIP() << "no Winograd convolution in oneDNN on this CPU";
  EXPECT_EQ(formats,
            (std::set<int>{dnnl_wino_wei_aaOio, dnnl_wino_wei_aaOBiOo, dnnl_wino_wei_OBaaIBOIio}))
      << "expected the three layouts among the shapes";
}

// A layout padding input channels past the weight's (none of oneDNN's picks here does): the
// padding is zero, as if the weight had zero kernels there.
TEST(WinogradWeights, ZeroesInputChannelsTheLayoutPads) {
  auto md = winograd_weights_md(32, 32, 14);
  if (!md || !packs_winograd(*md)) GTEST_SKIP() << "no Winograd convolution here";
  dnnl_memory_desc_t padded = md->data;
  dnnl_wino_desc_t& w = padded.format_desc.wino_desc;
  w.ic += w.ic_block * std::max(w.ic2_block, 1);
  w.size = sizeof(float) * static_cast<size_t>(w.alpha * w.alpha) * static_cast<size_t>(w.oc) *
           static_cast<size_t>(w.ic);
  const memory::desc target(padded);
  ASSERT_TRUE(packs_winograd(target));
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> weights(32 * 32 * 9), widened(static_cast<size_t>(32 * w.ic * 9), 0.0f);
  for (float& x : weights) x = dist(rng);
  for (int64_t o = 0; o < 32; ++o) {
    std::copy_n(weights.begin() + o * 32 * 9, 32 * 9, widened.begin() + o * w.ic * 9);
  }
  std::vector<uint8_t> packed(target.get_size(), 0xA5), expected(target.get_size(), 0x5A);
  ASSERT_TRUE(pack_winograd_weights(target, weights.data(), 32, 32, packed.data()).ok());
  ASSERT_TRUE(pack_winograd_weights(target, widened.data(), 32, w.ic, expected.data()).ok());
  EXPECT_EQ(packed, expected);
}

TEST(WinogradWeights, RejectsLayoutsAndChannelsItDoesNotFit) {
  memory::desc plain({16, 16, 3, 3}, memory::data_type::f32, memory::format_tag::oihw);
  EXPECT_FALSE(packs_winograd(plain));
  std::vector<float> weights(16 * 16 * 9, 1.0f), out(16 * 16 * 9);
  runtime::Status status = pack_winograd_weights(plain, weights.data(), 16, 16, out.data());
  EXPECT_EQ(status.code(), runtime::Error::InvalidArgument);
  EXPECT_NE(status.message().find("aaOBiOo"), std::string::npos) << status.message();
  auto md = winograd_weights_md(32, 32, 14);
  if (!md || !packs_winograd(*md)) GTEST_SKIP() << "no Winograd convolution here";
  std::vector<float> big(64 * 32 * 9, 1.0f), packed(md->get_size() / sizeof(float));
  status = pack_winograd_weights(*md, big.data(), 64, 32, packed.data());
  EXPECT_EQ(status.code(), runtime::Error::InvalidArgument);
  EXPECT_NE(status.message().find("64 x 32"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace kiln::engine::cpu::dnnl_impl
