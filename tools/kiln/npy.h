#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/scalar_type.h>
#include <kiln/runtime/core/span.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::tools {

/// A NumPy array read from or written to a `.npy` file: dtype, shape and the raw
/// little-endian, row-major (C order) element bytes.
struct NpyArray {
  runtime::ScalarType dtype = runtime::ScalarType::Float32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  /// Number of elements (1 for a 0-d array).
  int64_t numel() const;
};

/// The NumPy `descr` of `dtype`: "<f4", "<f8", "<f2", "|i1", "|u1", "<i2", "<i4", "<i8",
/// "|b1". Errors: NotSupported for dtypes NumPy has no standard code for (bf16).
runtime::Result<std::string> npy_descr(runtime::ScalarType dtype);

/// Parses the bytes of a `.npy` file (format versions 1.0, 2.0 and 3.0). Accepts the dtypes of
/// `npy_descr` (with "<", "|" or "=" byte order; "|" or "<" for one-byte types), C order (or
/// Fortran order for arrays of rank ≤ 1, which is the same layout), and data of exactly the
/// size the header gives. `name` (usually the path) is used in messages.
/// Errors: InvalidArgument naming `name` and the problem: bad magic, unknown version, a header
/// that is truncated or not a dict, a missing key, an unsupported or big-endian dtype, Fortran
/// order, a negative dimension, or a data size other than the shape's.
runtime::Result<NpyArray> parse_npy(const uint8_t* bytes, size_t size, std::string_view name);

/// Reads and parses the file at `path`. Errors: AccessFailed naming the path and the system's
/// reason; errors of `parse_npy`.
runtime::Result<NpyArray> read_npy(const std::string& path);

/// The bytes of a version 1.0 `.npy` file (2.0 when the header needs more than 65535 bytes)
/// holding `data` with `dtype` and `shape`. Errors: NotSupported for bf16; InvalidArgument when
/// `data.size()` is not the shape's byte count.
runtime::Result<std::vector<uint8_t>> encode_npy(runtime::ScalarType dtype,
                                                 runtime::Span<const int64_t> shape,
                                                 runtime::Span<const uint8_t> data);

/// Encodes (see `encode_npy`) and writes to `path`, replacing an existing file.
/// Errors: those of `encode_npy`; AccessFailed naming the path and the system's reason.
runtime::Status write_npy(const std::string& path, runtime::ScalarType dtype,
                          runtime::Span<const int64_t> shape, runtime::Span<const uint8_t> data);

}  // namespace kiln::tools
