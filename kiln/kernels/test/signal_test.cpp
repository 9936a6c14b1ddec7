#include <kiln/kernels/kernels.h>
#include <kiln/kernels/test/tensor_helpers.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

namespace kiln::kernels {
namespace {

using runtime::Error;
using runtime::EValue;
using runtime::ScalarType;
using runtime::Status;
using test_helpers::attrs;
using test_helpers::OwnedTensor;
using test_helpers::run_kernel;
using test_helpers::sizes_of;
using ::testing::HasSubstr;

using Shape = std::vector<int64_t>;
constexpr double kPi = std::numbers::pi;

std::vector<float> run_window(const char* op, int64_t size, int64_t periodic) {
  auto n = OwnedTensor::of<int64_t>({}, {size});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(n.tensor()), result(out.tensor());
  Status status = run_kernel(op, {&in}, {&result}, attrs({{"periodic", periodic}}));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(sizes_of(result), Shape{size});
  return out.values<float>(size);
}

TEST(Window, MatchTheirFormulas) {
  for (int64_t periodic : {0, 1}) {
    const double n_1 = periodic ? 10.0 : 9.0;
    auto hann = run_window("HannWindow", 10, periodic);
    auto hamming = run_window("HammingWindow", 10, periodic);
    auto blackman = run_window("BlackmanWindow", 10, periodic);
    for (int n = 0; n < 10; ++n) {
      double phase = 2 * kPi * n / n_1;
      EXPECT_NEAR(hann[n], std::pow(std::sin(kPi * n / n_1), 2), 1e-6);
      EXPECT_NEAR(hamming[n], 0.54347826 - 0.45652174 * std::cos(phase), 1e-6);
      EXPECT_NEAR(blackman[n], 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2 * phase), 1e-6);
    }
  }
  EXPECT_EQ(run_window("HannWindow", 0, 1).size(), 0u);
}

TEST(Window, RejectsANegativeSizeAndANonFloatType) {
  auto n = OwnedTensor::of<int64_t>({}, {-2});
  auto out = OwnedTensor::resizable(ScalarType::Float32, 1);
  EValue in(n.tensor()), result(out.tensor());
  Status status = run_kernel("HannWindow", {&in}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("size -2 (expected >= 0)"));
  auto good = OwnedTensor::of<int64_t>({}, {4});
  EValue in_good(good.tensor());
  status = run_kernel("HannWindow", {&in_good}, {&result}, attrs({{"output_datatype", 7}}));
  EXPECT_EQ(status.code(), Error::InvalidType);
  EXPECT_THAT(status.message(), HasSubstr("output_datatype"));
}

// The direct DFT of a complex sequence, for comparison.
std::vector<std::complex<double>> naive_dft(const std::vector<std::complex<double>>& x,
                                            int64_t length, bool inverse) {
  std::vector<std::complex<double>> out(static_cast<size_t>(length));
  for (int64_t k = 0; k < length; ++k) {
    for (int64_t n = 0; n < std::min<int64_t>(length, static_cast<int64_t>(x.size())); ++n) {
      out[k] += x[n] * std::polar(1.0, (inverse ? 2 : -2) * kPi * k * n / length);
    }
    if (inverse) out[k] /= static_cast<double>(length);
  }
  return out;
}

TEST(Dft, MatchesTheDirectTransformOnRandomData) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (bool complex_input : {false, true}) {
    for (int64_t length : {8, 5, 12}) {  // equal, cut and zero-padded
      const int64_t batch = 2, n = 8, channels = complex_input ? 2 : 1;
      std::vector<float> data(batch * n * channels);
      for (auto& v : data) v = dist(rng);
      auto x = OwnedTensor::of<float>({batch, n, channels}, data);
      auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
      auto dft_length = OwnedTensor::of<int64_t>({}, {length});
      EValue in(x.tensor()), len(dft_length.tensor()), result(out.tensor());
      Status status = run_kernel("DFT", {&in, &len}, {&result});
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(sizes_of(result), (Shape{batch, length, 2}));
      auto y = out.values<float>(batch * length * 2);
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<std::complex<double>> signal;
        for (int64_t i = 0; i < n; ++i) {
          const float* at = &data[(b * n + i) * channels];
          signal.emplace_back(at[0], complex_input ? at[1] : 0.0);
        }
        auto expected = naive_dft(signal, length, false);
        for (int64_t k = 0; k < length; ++k) {
          EXPECT_NEAR(y[(b * length + k) * 2], expected[k].real(), 1e-5);
          EXPECT_NEAR(y[(b * length + k) * 2 + 1], expected[k].imag(), 1e-5);
        }
      }
    }
  }
}

TEST(Dft, InverseUndoesForwardAndOnesidedKeepsHalf) {
  auto x = OwnedTensor::of<double>({1, 4, 1}, {1, 2, 3, 4});
  auto forward = OwnedTensor::resizable(ScalarType::Float64, 3);
  EValue in(x.tensor()), spectrum(forward.tensor());
  ASSERT_TRUE(run_kernel("DFT", {&in}, {&spectrum}).ok());
  auto back = OwnedTensor::resizable(ScalarType::Float64, 3);
  EValue restored(back.tensor());
  ASSERT_TRUE(run_kernel("DFT", {&spectrum}, {&restored}, attrs({{"inverse", 1}})).ok());
  auto values = back.values<double>(8);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(values[i * 2], i + 1, 1e-12);
    EXPECT_NEAR(values[i * 2 + 1], 0, 1e-12);
  }
  auto half = OwnedTensor::resizable(ScalarType::Float64, 3);
  EValue onesided(half.tensor());
  ASSERT_TRUE(run_kernel("DFT", {&in}, {&onesided}, attrs({{"onesided", 1}})).ok());
  EXPECT_EQ(sizes_of(onesided), (Shape{1, 3, 2}));
  EXPECT_NEAR(half.values<double>(6)[0], 10.0, 1e-12);  // the sum
}

TEST(Dft, RejectsTheComplexAxisAndOnesidedComplexInput) {
  auto x = OwnedTensor::of<float>({1, 4, 2}, std::vector<float>(8, 1.0f));
  auto out = OwnedTensor::resizable(ScalarType::Float32, 3);
  EValue in(x.tensor()), result(out.tensor());
  Status status = run_kernel("DFT", {&in}, {&result}, attrs({{"axis", 2}}));
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("axis 2 for input of rank 3"));
  status = run_kernel("DFT", {&in}, {&result}, attrs({{"onesided", 1}}));
  EXPECT_THAT(status.message(), HasSubstr("onesided is 1 for a complex input"));
}

TEST(Stft, EachFrameIsTheDftOfTheWindowedSamples) {
  const int64_t length = 16, frame = 8, step = 4;
  std::vector<float> samples(length);
  for (int64_t i = 0; i < length; ++i) samples[i] = std::sin(0.7f * i) + 0.1f * i;
  auto signal = OwnedTensor::of<float>({1, length, 1}, samples);
  auto step_t = OwnedTensor::of<int64_t>({}, {step});
  auto window = OwnedTensor::resizable(ScalarType::Float32, 1);
  auto window_size = OwnedTensor::of<int64_t>({}, {frame});
  EValue size_in(window_size.tensor()), window_out(window.tensor());
  ASSERT_TRUE(run_kernel("HannWindow", {&size_in}, {&window_out}).ok());
  auto out = OwnedTensor::resizable(ScalarType::Float32, 4);
  EValue in(signal.tensor()), step_in(step_t.tensor()), result(out.tensor()), none;
  Status status = run_kernel("STFT", {&in, &step_in, &window_out, &none}, {&result});
  ASSERT_TRUE(status.ok()) << status;
  const int64_t frames = (length - frame) / step + 1, bins = frame / 2 + 1;
  ASSERT_EQ(sizes_of(result), (Shape{1, frames, bins, 2}));
  auto y = out.values<float>(frames * bins * 2);
  auto w = window.values<float>(frame);
  for (int64_t f = 0; f < frames; ++f) {
    std::vector<std::complex<double>> x;
    for (int64_t n = 0; n < frame; ++n) x.emplace_back(samples[f * step + n] * w[n], 0.0);
    auto expected = naive_dft(x, frame, false);
    for (int64_t k = 0; k < bins; ++k) {
      EXPECT_NEAR(y[(f * bins + k) * 2], expected[k].real(), 1e-4);
      EXPECT_NEAR(y[(f * bins + k) * 2 + 1], expected[k].imag(), 1e-4);
    }
  }
  auto long_frame = OwnedTensor::of<int64_t>({}, {32});
  EValue too_long(long_frame.tensor());
  status = run_kernel("STFT", {&in, &step_in, &none, &too_long}, {&result});
  EXPECT_EQ(status.code(), Error::InvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("frame_length 32 for a signal of length 16"));
}

}  // namespace
}  // namespace kiln::kernels
