#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/status.h>
#include <kiln/runtime/core/tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

/// Signal-processing operators (ONNX opset 17): the window generators HannWindow,
/// HammingWindow and BlackmanWindow, DFT and STFT. Part of the typed API that `kernels.h`
/// includes. Sums are computed in double with the direct (O(n²)) transform: a reference, not a
/// fast FFT. Complex values are pairs in a last dimension of 2 (real, imaginary); a real signal
/// has a last dimension of 1.
namespace kiln::kernels {

enum class WindowKind { Hann, Hamming, Blackman };

/// Fills the 1-D `out` (f32, f64, f16 or bf16) with the window of its length: periodic (N =
/// length) or symmetric (N = length - 1). Hann: sin²(πn/N); Hamming: 25/46 - 21/46 cos(2πn/N);
/// Blackman: 0.42 - 0.5 cos(2πn/N) + 0.08 cos(4πn/N). Errors: InvalidType for other dtypes.
runtime::Status window(WindowKind kind, bool periodic, runtime::Tensor& out);

struct DftOptions {
  int64_t axis = 1;       ///< The signal axis (not the last, complex axis); negative counts back.
  bool inverse = false;   ///< Inverse transform, scaled by 1/length.
  bool onesided = false;  ///< Keep the length / 2 + 1 non-redundant bins (real input only).
  std::optional<int64_t> length;  ///< Transform length: the signal is cut or zero-padded.
};

/// The output sizes of DFT of `input` (f32 or f64, last dim 1 or 2). Errors: InvalidArgument
/// for an axis out of range or on the complex dim, a length < 1, or onesided with complex input.
runtime::Result<std::vector<int64_t>> dft_shape(const runtime::Tensor& input,
                                                const DftOptions& options);
/// ONNX DFT (opset 17) into `out` of `dft_shape` sizes and `input`'s dtype.
runtime::Status dft(const runtime::Tensor& input, const DftOptions& options, runtime::Tensor& out);

/// The output sizes of STFT: [batch, frames, bins, 2] with frames = (length - frame_length) /
/// step + 1 and bins = frame_length / 2 + 1 when onesided, else frame_length.
runtime::Result<std::vector<int64_t>> stft_shape(const runtime::Tensor& signal, int64_t step,
                                                 int64_t frame_length, bool onesided);
/// ONNX STFT: the DFT of each frame of `signal` ([batch, length, 1 or 2], f32 or f64), each
/// multiplied by `window` (length frame_length, or none) first.
runtime::Status stft(const runtime::Tensor& signal, int64_t step, const runtime::Tensor* window,
                     int64_t frame_length, bool onesided, runtime::Tensor& out);

}  // namespace kiln::kernels
