#include <kiln/engine/cache/default_dir.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::engine::cache {
namespace {

// Saves KILN_CACHE_DIR, XDG_CACHE_HOME and HOME, and restores them after each test.
class DefaultCacheDirTest : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};

  void SetUp() override {
    for (size_t i = 0; i < 3; ++i) {
      const char* value = std::getenv(kNames[i]);
      saved_[i] = value ? std::optional<std::string>(value) : std::nullopt;
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < 3; ++i) set(kNames[i], saved_[i]);
  }

  static void set(const char* name, const std::optional<std::string>& value) {
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  // Sets the three variables at once (nullopt: unset).
  static void env(std::optional<std::string> kiln, std::optional<std::string> xdg,
                  std::optional<std::string> home) {
    set("KILN_CACHE_DIR", kiln);
    set("XDG_CACHE_HOME", xdg);
    set("HOME", home);
  }

  std::optional<std::string> saved_[3];
};

TEST_F(DefaultCacheDirTest, KilnCacheDirWinsOverEverything) {
  env("/k/cache", "/xdg", "/home/u");
  EXPECT_EQ(default_cache_dir(), "/k/cache");
}

TEST_F(DefaultCacheDirTest, EmptyKilnCacheDirMeansNoPersistence) {
  env("", "/xdg", "/home/u");
  EXPECT_EQ(default_cache_dir(), "");
}

TEST_F(DefaultCacheDirTest, XdgCacheHomeWhenKilnCacheDirUnset) {
  env(std::nullopt, "/xdg", "/home/u");
  EXPECT_EQ(default_cache_dir(), "/xdg/kiln");
}

TEST_F(DefaultCacheDirTest, EmptyXdgCacheHomeFallsBackToHome) {
  env(std::nullopt, "", "/home/u");
  EXPECT_EQ(default_cache_dir(), "/home/u/.cache/kiln");
}

TEST_F(DefaultCacheDirTest, HomeWhenNeitherIsSet) {
  env(std::nullopt, std::nullopt, "/home/u");
  EXPECT_EQ(default_cache_dir(), "/home/u/.cache/kiln");
}

TEST_F(DefaultCacheDirTest, NothingSetMeansNoPersistence) {
  env(std::nullopt, std::nullopt, std::nullopt);
  EXPECT_EQ(default_cache_dir(), "");
  env(std::nullopt, "", "");
  EXPECT_EQ(default_cache_dir(), "");
}

}  // namespace
}  // namespace kiln::engine::cache
