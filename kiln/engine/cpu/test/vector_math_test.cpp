// kiln's vector math (vector_math.h) against the C library on a fine grid: erf_of, which the
// GELU epilogue of kiln's GEMMs computes, and exp_of, with their edge values.

#include <kiln/engine/cpu/vector_math.h>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::engine::cpu::vec {
namespace {

template <class F>
float at(F f, float x) {
  float in[kLanes], out[kLanes];
  for (float& v : in) v = x;
  store(out, f(load(in)));
  return out[0];
}

TEST(VectorMath, ErfIsWithinFiveTenMillionthsOfTheLibrarysAndKeepsItsEdges) {
  double worst = 0.0, near_zero = 0.0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    const double exact = std::erf(static_cast<double>(x));
    const double error = std::fabs(at(erf_of, x) - exact);
    worst = std::max(worst, error);
    if (std::fabs(x) < 0.1f && x != 0.0f) near_zero = std::max(near_zero, error / std::fabs(exact));
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_LT(near_zero, 1e-6);  // relative, where erf(x) is about 1.13 x
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(at(erf_of, inf), 1.0f);
  EXPECT_EQ(at(erf_of, -inf), -1.0f);
  EXPECT_EQ(at(erf_of, 0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(at(erf_of, std::numeric_limits<float>::quiet_NaN())));
}

TEST(VectorMath, ExpIsWithinItsRelativeBoundAndZeroBelowTheNormals) {
  double worst = 0.0;
  for (int i = -8600; i <= 8800; ++i) {
    const float x = static_cast<float>(i) * 1e-2f;
    const double exact = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(at(exp_of, x) - exact) / exact);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(at(exp_of, -100.0f), 0.0f);
  EXPECT_EQ(at(exp_of, -std::numeric_limits<float>::infinity()), 0.0f);
}

}  // namespace
}  // namespace kiln::engine::cpu::vec
