#pragma once

#include <kiln/runtime/core/aligned_buffer.h>
#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kiln::engine::compile {

/// Activation arenas shared by plans that run one at a time (`CompileOptions::arena_pool`):
/// the per-shape plans of a loaded model's functions of symbolic inputs.
///
/// A run takes a free arena (the smallest that holds its plan; else the largest free one,
/// grown; else a new one, when every arena is taken by a run on another thread), places its
/// values there and gives the arena back when it returns. So a thread calling a detector on
/// images of many sizes keeps one arena, as large as the largest plan's, instead of one per
/// shape kept (16 per function), and a new shape writes pages earlier runs have touched.
/// Threads running at once each hold an arena of their own. Thread-safe.
class ArenaPool {
 public:
  /// An arena taken for one run: given back when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    uint8_t* base() const { return base_; }

   private:
    friend class ArenaPool;
    ArenaPool* pool_ = nullptr;
    size_t index_ = 0;
    uint8_t* base_ = nullptr;
  };

  ArenaPool() = default;
  ArenaPool(const ArenaPool&) = delete;
  ArenaPool& operator=(const ArenaPool&) = delete;
  ~ArenaPool();

  /// An arena of at least `bytes` (64-byte aligned, not zeroed), held until the lease goes.
  /// Errors: MemoryAllocationFailed naming the bytes when the system has none.
  runtime::Result<Lease> take(uint64_t bytes);

  /// Arenas allocated (taken or free).
  size_t num_arenas() const;
  /// Bytes of those arenas.
  uint64_t bytes() const;

 private:
  void give_back(size_t index);

  struct Arena {
    runtime::AlignedBuffer data;
    uint64_t size = 0;
    bool taken = false;
  };
  mutable std::mutex mutex_;
  std::vector<Arena> arenas_;
};

}  // namespace kiln::engine::compile
