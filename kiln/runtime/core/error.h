#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::runtime {

/// Error codes returned by every kiln API. The numbers are stable across releases and grouped
/// by range, so a number seen in a log can be looked up even without `to_string()`:
/// 0x00–0x0f system, 0x10–0x1f caller input, 0x20–0x2f resources and data, 0x30–0x3f delegates.
enum class Error : uint32_t {
  Ok = 0x00,
  Internal = 0x01,          ///< A kiln invariant failed; a bug in kiln.
  InvalidState = 0x02,      ///< The object is not in a state that allows the call.
  NotSupported = 0x03,      ///< The operation is valid but not supported here.
  NotImplemented = 0x04,    ///< The feature is not built yet.

  InvalidArgument = 0x10,   ///< A value passed by the caller is out of range or malformed.
  InvalidType = 0x11,       ///< A value has the wrong type (dtype, option type, EValue tag).
  OperatorMissing = 0x12,   ///< A program names an operator no kernel is registered for.
  NotFound = 0x13,          ///< A named thing (method, key, backend) does not exist.

  MemoryAllocationFailed = 0x20,  ///< An allocation failed or a buffer is too small.
  AccessFailed = 0x21,            ///< A file or memory region could not be read or mapped.
  InvalidProgram = 0x22,          ///< The program file is malformed or fails verification.
  InvalidExternalData = 0x23,     ///< Named data or a segment is missing or malformed.
  OutOfResources = 0x24,          ///< A resource (disk, threads, handles) is exhausted.

  DelegateInvalidCompatibility = 0x30,  ///< The backend cannot run this delegate blob.
  DelegateMemoryAllocationFailed = 0x31,
  DelegateInvalidHandle = 0x32,
  BackendNotFound = 0x33,               ///< No backend is registered under the id.
};

/// The enumerator's name, e.g. "InvalidArgument". Never null; unknown numbers give "Unknown".
std::string_view to_string(Error error);

}  // namespace kiln::runtime
