#include <kiln/engine/ir/dim.h>

#include <gtest/gtest.h>

namespace kiln::engine::ir {
namespace {

TEST(Dim, ConcreteArithmeticFolds) {
  EXPECT_TRUE((Dim(3) + Dim(4)).is_static());
  EXPECT_EQ((Dim(3) * Dim(4)).value(), 12);
  EXPECT_EQ((Dim(-7) / Dim(2)).value(), -4);  // floor division
}

TEST(Dim, SymbolsCombineLinearly) {
  Dim seq = Dim::symbol("seq");
  EXPECT_EQ((seq - Dim(1)).to_string(), "seq - 1");
  EXPECT_EQ((Dim::symbol("past_len") + Dim(1)).to_string(), "past_len + 1");
  EXPECT_EQ(seq + Dim(1) - Dim(1), seq);
  EXPECT_EQ(seq * Dim(2) - seq, seq);
  EXPECT_FALSE((seq - seq + Dim(0)).to_string() != "0");
  EXPECT_EQ((Dim::symbol("W") / Dim(8)).to_string(), "W / 8");
  EXPECT_NE(Dim::symbol(""), Dim::symbol(""));  // anonymous dims are all different
}

TEST(Dim, EvaluatesWithBindings) {
  Dim d = (Dim::symbol("seq") - Dim(1)) * Dim(2) + Dim::symbol("W") / Dim(8);
  auto v = d.evaluate({{"seq", 5}, {"W", 64}});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 16);
  auto missing = d.evaluate({{"seq", 5}});
  EXPECT_EQ(missing.error(), runtime::Error::InvalidArgument);
  EXPECT_NE(missing.status().message().find("'W'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::engine::ir
