// Conv in ActivationLayout::Blocked, with and without Winograd kernels, and Concat of blocked
// values (copied as contiguous pieces) against the reference kernels on seeded random data.
// Every op runs with num_threads = 1.

#include <kiln/engine/cpu/test/op_case.h>
#include <kiln/kernels/kernels.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace kiln::engine::cpu {
namespace {

using namespace test_support;  // NOLINT(google-build-using-namespace): test helpers
using runtime::Tensor;

struct BlockedParams {
  int64_t c, m, hw, k, stride, pad;
};

std::string blocked_name(const BlockedParams& p, bool winograd) {
  return "C" + std::to_string(p.c) + " M" + std::to_string(p.m) + " " + std::to_string(p.hw) + "x" +
         std::to_string(p.hw) + " k" + std::to_string(p.k) + " s" + std::to_string(p.stride) +
         " p" + std::to_string(p.pad) + (winograd ? " winograd" : " direct");
}

// 3x3 stride 1 (Winograd-eligible, 2x3 and 4x3 tiles), strided and 1x1 Convs, an image input
// of 3 channels (read plain) and output channels that are not a multiple of 16 (padded).
TEST(DnnlBlockedConv, MatchesReferenceWithAndWithoutWinograd) {
  const std::vector<BlockedParams> params = {
      {16, 32, 13, 3, 1, 1}, {32, 16, 27, 3, 1, 1}, {64, 64, 14, 3, 1, 1}, {16, 32, 9, 3, 2, 1},
      {32, 40, 7, 1, 1, 0},  {3, 16, 17, 3, 2, 0},  {16, 24, 8, 3, 1, 1}};
  const std::vector<std::vector<PostOp>> post_op_sets = {
      {}, {{PostOpKind::Relu}}, {{PostOpKind::AddResidual}, {PostOpKind::Relu}}};
  uint32_t seed = 900;
  for (const BlockedParams& p : params) {
    for (bool winograd : {true, false}) {
      for (const auto& post_ops : post_op_sets) {
        SCOPED_TRACE(blocked_name(p, winograd) + post_ops_name(post_ops));
        kernels::ConvOptions options;
        options.strides = {p.stride, p.stride};
        options.pads = {p.pad, p.pad, p.pad, p.pad};
        Case c("Conv", {ints("strides", options.strides), ints("pads", options.pads)});
        c.desc.activation_layout = ActivationLayout::Blocked;
        c.desc.winograd = winograd;
        c.add(random_tensor({1, p.c, p.hw, p.hw}, seed++), false);
        c.add(random_tensor({p.m, p.c, p.k, p.k}, seed++, -0.5, 0.5), true);
        c.add(random_tensor({p.m}, seed++), true);
        expect_conv_like_reference(c, options, /*bias=*/true, post_ops, seed);
      }
    }
  }
}

// Where oneDNN has Winograd kernels (AVX-512), an eligible Conv reports one; the direct one
// otherwise, or when not asked.
TEST(DnnlBlockedConv, WinogradIsUsedOnlyWhenAsked) {
  for (bool winograd : {true, false}) {
    Case c("Conv", {ints("pads", {1, 1, 1, 1})});
    c.desc.activation_layout = ActivationLayout::Blocked;
    c.desc.winograd = winograd;
    c.add(random_tensor({1, 64, 28, 28}, 950), false);
    c.add(random_tensor({64, 64, 3, 3}, 951, -0.5, 0.5), true);
    c.run();
    bool wino = c.description.find("wino") != std::string::npos;
    if (!winograd) {
      EXPECT_FALSE(wino) << c.description;
    }
    if (winograd && !wino) std::cout << "no Winograd kernel here: " << c.description << "\n";
  }
}

// Concat along channels of values in a blocked layout (as blocked Convs hand them over): the
// pieces are copied whole when each is a whole number of channel blocks (16 channels with
// AVX-512, 8 with AVX2; else oneDNN's concat runs); either way the result equals the reference
// Concat (batch 1: inputs one after another).
TEST(DnnlBlockedConcat, BlockedPiecesMatchReference) {
  const std::vector<std::vector<int64_t>> channel_sets = {{16, 32}, {64, 64, 16}, {16, 8}};
  uint32_t seed = 970;
  for (const auto& channels : channel_sets) {
    Case c("Concat", {int_attr("axis", 1)});
    std::string name;
    int64_t total = 0;
    for (int64_t ch : channels) {
      name += std::to_string(ch) + " ";
      total += ch;
      c.add(random_tensor({1, ch, 5, 5}, seed++), false);
      // The layout a blocked Conv computes a value of `ch` channels in.
      Case producer("Conv", {ints("pads", {1, 1, 1, 1})});
      producer.desc.activation_layout = ActivationLayout::Blocked;
      producer.add(random_tensor({1, 16, 5, 5}, seed++), false);
      producer.add(random_tensor({ch, 16, 3, 3}, seed++), true);
      auto op = producer.create();
      ASSERT_TRUE(op.ok()) << op.status();
      auto native = (*op)->native_output_layout(0);
      c.desc.input_layouts.push_back(native ? native->id : std::string());
    }
    SCOPED_TRACE(name);
    OwnedTensor expected = zeros({1, total, 5, 5});
    float* e = expected.tensor().mutable_data_ptr<float>();
    for (size_t i = 0; i < channels.size(); ++i) {
      const float* x = c.at(i).data_ptr<float>();
      e = std::copy(x, x + c.at(i).numel(), e);
    }
    expect_near(c.run(), expected);
    if (c.desc.input_layouts[0].empty()) continue;  // No blocked layout on this CPU.
    const int64_t block = c.description.find("16b") != std::string::npos ? 16 : 8;
    bool whole_blocks = true;
    for (int64_t ch : channels) whole_blocks = whole_blocks && ch % block == 0;
    EXPECT_EQ(c.description.find("pieces copied") != std::string::npos, whole_blocks)
        << c.description;
  }
}

// Pieces of one channel block each (a detector's four 16-channel maps): the result is in the
// layout a blocked Conv over it reads, so nothing converts between them, and the pieces are
// still copied whole. (oneDNN, left to pick, spells it with the batch inside the channel
// blocks, a layout of equal bytes but not equal to the Conv's.)
TEST(DnnlBlockedConcat, OneBlockPiecesMakeTheLayoutAConvReads) {
  auto blocked_conv = [](int64_t in_channels, int64_t out_channels, uint32_t seed) {
    Case conv("Conv", {ints("pads", {1, 1, 1, 1})});
    conv.desc.activation_layout = ActivationLayout::Blocked;
    conv.add(random_tensor({1, in_channels, 6, 6}, seed), false);
    conv.add(random_tensor({out_channels, in_channels, 3, 3}, seed + 1), true);
    return conv.create();
  };
  Case c("Concat", {int_attr("axis", 1)});
  for (uint32_t i = 0; i < 4; ++i) {
    c.add(random_tensor({1, 16, 6, 6}, 990 + i), false);
    auto producer = blocked_conv(16, 16, 980 + 2 * i);
    ASSERT_TRUE(producer.ok()) << producer.status();
    auto native = (*producer)->native_output_layout(0);
    c.desc.input_layouts.push_back(native ? native->id : std::string());
  }
  if (c.desc.input_layouts[0].empty()) GTEST_SKIP() << "no blocked layout on this CPU";
  auto concat = c.create();
  ASSERT_TRUE(concat.ok()) << concat.status();
  auto consumer = blocked_conv(64, 16, 999);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  auto made = (*concat)->native_output_layout(0);
  auto read = (*consumer)->native_input_layout(0);
  ASSERT_TRUE(made.has_value());
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(made->id, read->id);
  EXPECT_NE((*concat)->describe().find("pieces copied"), std::string::npos)
      << (*concat)->describe();
}

}  // namespace
}  // namespace kiln::engine::cpu
