#pragma once

#include <kiln/runtime/core/result.h>
#include <kiln/runtime/executor/method_meta.h>
#include <kiln/runtime/executor/program.h>

#include <nlohmann/json.hpp>

#include <string>

namespace kiln::tools {

/// A JSON document describing `program` (what `kiln inspect --json` prints; keys keep their
/// insertion order):
///   {"program": path, "format_version", "file_size",
///    "methods": [{"name", "inputs": [T...], "outputs": [T...],
///                 "delegates": [{"id", "backend_id", "processed_size", "processed_in",
///                                "compile_specs"? {key: value}, "manifest"?, "functions"?}],
///                 "kernel_calls": [op...], "num_instructions",
///                 "planned_memory": {"arena_sizes", "total_bytes"}}],
///    "segments": [{"index", "offset", "size", "used_by": [text...]}],
///    "named_data": [{"key", "segment", "size"}]}
/// where T is {"name", "kind", and for tensors "dtype", "shape", "dim_names", "shape_text",
/// "dynamism"}. A delegate whose processed bytes are a JSON object (KilnBackend's manifest)
/// gets "manifest" and its "functions" (with "input_shapes" when enumerated); other blobs are
/// opaque. Compile spec values are given as text when printable (else "<N> bytes"). `path` is reported as given and used for the file size. Reads delegate segments
/// through the program's loader. Errors: those of `Program::method_meta`.
runtime::Result<nlohmann::ordered_json> program_summary(const std::string& path,
                                                        const runtime::Program& program);

/// A method input's or output's shape with its symbols: "[1, seq]", "[1, seq<=64]" for a
/// bounded dimension, plain sizes where a dimension has no symbol.
std::string shape_with_symbols(const runtime::TensorMeta& meta);

}  // namespace kiln::tools
