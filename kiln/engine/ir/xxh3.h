#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kiln::engine::ir {

/// XXH3-64 of `size` bytes: the hash of weights, packages, cache keys and cache entries.
///
/// Runs on the widest vector unit the CPU has (SSE2, AVX2 or AVX-512, chosen once at run
/// time); the value is the same on every CPU. Wide paths matter for weights: at AVX-512 a
/// cache entry of 47 MB hashes in about half the time of the SSE2 path.
uint64_t xxh3_64(const void* data, size_t size);

/// XXH3-64 of bytes given piece by piece: equal to `xxh3_64` of their concatenation.
/// Not thread-safe: one owner updates it.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::engine::ir
