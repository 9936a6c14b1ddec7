#pragma once
// What engine_formats_fuzzer and make_engine_seeds share: the input's first byte picks the
// format the rest is read as, and the cache key every fuzzed entry is checked against.

#include <kiln/engine/cache/cache_key.h>

#include <cstdint>

namespace kiln::fuzz {

/// The format of an input's bytes after its first (that byte modulo kNumFormats).
enum class EngineFormat : uint8_t { Package = 0, Artifact = 1, Entry = 2 };
inline constexpr uint8_t kNumFormats = 3;

/// What a package's format byte says beyond its format (in the byte's quotient by kNumFormats):
/// bit 0, load expecting frequent reshapes (shape-generic plans); bit 1, load and run on two
/// threads instead of one (the ops' parallel partitions).
struct PackageFlags {
  bool reshapes = false;
  bool two_threads = false;
};

inline PackageFlags package_flags(uint8_t format_byte) {
  const int flags = format_byte / kNumFormats;
  return {(flags & 1) != 0, (flags & 2) != 0};
}

/// The format byte of `format` with `flags`.
inline uint8_t format_byte(EngineFormat format, PackageFlags flags = {}) {
  return static_cast<uint8_t>(static_cast<int>(format) +
                              kNumFormats *
                                  ((flags.reshapes ? 1 : 0) + (flags.two_threads ? 2 : 0)));
}

/// The key the fuzzer validates cache entries against (and the seeds' entries hold).
inline engine::cache::CacheKey fuzz_cache_key() {
  engine::cache::CacheKey key;
  key.model_hash = 0x6b696c6e;
  key.functions = {"main"};
  key.input_shapes = {{{1, 4}}};
  key.specialization = "units=cpu;reshapes=0;threads=1";
  key.engine_version = "fuzz";
  key.cpu_features = "fuzz";
  return key;
}

}  // namespace kiln::fuzz
