// The delegate's session table: a closed one keeps the shapes it was given; an open one (a
// function of symbolic inputs) keeps the sessions of its most recently used shapes only.
#include <kiln/backends/kiln/dispatch.h>
#include <kiln/backends/kiln/test/kiln_test_programs.h>
#include <kiln/engine/loader/model_loader.h>

#include <gtest/gtest.h>

namespace kiln::backends {
namespace {

namespace ir = engine::ir;

class SessionTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::specialization::SpecializationOptions options;
    options.allowed_kinds = {engine::specialization::ComputeKind::Cpu};
    auto loaded = engine::ModelLoader::load(model_, options);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    loaded_ = *loaded;
  }
  engine::Session session(int64_t batch) {
    auto bound = loaded_->bind("main", {{batch, kiln_test::kIn}});
    EXPECT_TRUE(bound.ok()) << bound.status().to_string();
    return std::move(bound).get();
  }
  static Shapes shapes(int64_t batch) { return {{batch, kiln_test::kIn}}; }

  ir::Model model_ = kiln_test::matmul_add_relu(ir::Dim::symbol("batch"));
  std::shared_ptr<engine::LoadedModel> loaded_;
};

TEST_F(SessionTableTest, AnOpenTableDropsItsLeastRecentlyUsedShapes) {
  SessionTable table(/*closed=*/false, /*open_capacity=*/2);
  table.add(shapes(1), "main", session(1));
  table.add(shapes(2), "main", session(2));
  ASSERT_NE(table.find(shapes(1)), nullptr);  // 2 is now the least recently used
  table.add(shapes(3), "main", session(3));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_NE(table.find(shapes(1)), nullptr);
  EXPECT_EQ(table.find(shapes(2)), nullptr);
  EXPECT_NE(table.find(shapes(3)), nullptr);
  EXPECT_TRUE(table.accepted().empty());
}

TEST_F(SessionTableTest, AClosedTableKeepsEveryShape) {
  SessionTable table(/*closed=*/true, /*open_capacity=*/2);
  for (int64_t batch : {1, 2, 3}) table.add(shapes(batch), "main", session(batch));
  EXPECT_EQ(table.size(), 3u);
  for (int64_t batch : {1, 2, 3}) EXPECT_NE(table.find(shapes(batch)), nullptr);
  EXPECT_EQ(table.accepted().size(), 3u);
}

}  // namespace
}  // namespace kiln::backends
