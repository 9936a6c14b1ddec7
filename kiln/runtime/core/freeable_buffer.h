#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace kiln::runtime {

/// A read-only byte range with an optional owner that keeps it alive. `free()` (or the
/// destructor) drops this buffer's share of the owner; the bytes stay valid while any
/// FreeableBuffer or other holder of the same owner lives. A buffer without an owner is a view
/// whose bytes the creator keeps alive. Move-only. Thread-safety: not synchronized.
class FreeableBuffer {
 public:
  FreeableBuffer() = default;
  FreeableBuffer(const void* data, size_t size, std::shared_ptr<const void> owner = nullptr)
      : data_(data), size_(size), owner_(std::move(owner)) {}
  FreeableBuffer(FreeableBuffer&& other) noexcept { *this = std::move(other); }
  FreeableBuffer& operator=(FreeableBuffer&& other) noexcept {
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::move(other.owner_);
    return *this;
  }
  FreeableBuffer(const FreeableBuffer&) = delete;
  FreeableBuffer& operator=(const FreeableBuffer&) = delete;
  ~FreeableBuffer() = default;

  const void* data() const { return data_; }
  size_t size() const { return size_; }
  /// The object keeping the bytes alive (may be null); share it to extend their lifetime.
  const std::shared_ptr<const void>& owner() const { return owner_; }
  void free() {
    data_ = nullptr;
    size_ = 0;
    owner_.reset();
  }

 private:
  const void* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

}  // namespace kiln::runtime
