#pragma once

#include <kiln/exporter/writer/program_spec.h>
#include <kiln/runtime/core/result.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::exporter {

/// Serializes `spec` into .kiln bytes: the FileHeader, the program flatbuffer and the segments,
/// each aligned to `spec.segment_alignment`. Errors: InvalidArgument naming the method and the
/// index that is out of range (the writer never produces a file the loader would reject).
runtime::Result<std::vector<uint8_t>> write_program(const ProgramSpec& spec);

/// Writes the program to `path` through a temporary file in the same folder, synced and
/// renamed into place, so a reader never sees a half-written program. Errors: as
/// `write_program`, or AccessFailed naming the path and the system's reason.
runtime::Status write_program_file(const ProgramSpec& spec, const std::string& path);

/// Writes `bytes` to `path` the same way (temporary file, fsync, rename).
runtime::Status write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace kiln::exporter
