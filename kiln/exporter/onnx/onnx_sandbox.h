#pragma once

#include <kiln/runtime/core/result.h>

#include <functional>
#include <string>

namespace kiln::exporter {

/// Runs `work` in a forked child process and returns the bytes it returns (or its error).
/// ONNX's checker, version converter and shape inference trust their input and crash on some
/// malformed models (fuzzing found several in ONNX 1.12); in a child, such a crash becomes an
/// error for the model instead of the end of the exporting process.
///
/// `work` returns the result bytes or an error Status; both cross back through a pipe. The
/// child resets the crash signals to their default actions (so no handler of the parent, such
/// as a sanitizer's, runs in it) and ends with `_exit`. A child that dies of a signal, exits
/// without a result, or runs longer than `timeout_s` seconds (it is then killed) gives
/// InvalidProgram "<what>: ONNX crashed on this model (signal 11, Segmentation fault)" or
/// "... timed out after N s". When a child cannot be started, `work` runs in this process.
/// The child closes every descriptor it inherited but 0-2 and its result pipe.
/// Call it from a single-threaded process, or one whose other threads hold no locks that
/// `work` needs (fork copies only the calling thread): a thread allocating at the fork can
/// leave a sanitizer's allocator locked in the child (glibc's malloc is safe across fork), so
/// `kiln conformance` loads its cases without the specialization cache, whose stores run on a
/// thread of their own, and a child stuck so is killed at the timeout.
runtime::Result<std::string> run_in_child(const std::string& what,
                                          const std::function<runtime::Result<std::string>()>& work,
                                          int timeout_s = 300);

}  // namespace kiln::exporter
