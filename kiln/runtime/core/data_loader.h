#pragma once

#include <kiln/runtime/core/freeable_buffer.h>
#include <kiln/runtime/core/result.h>

#include <cstddef>
#include <memory>
#include <string>

namespace kiln::runtime {

/// Reads ranges of a program's bytes. Implementations: FileDataLoader (reads into aligned
/// memory), MmapDataLoader (maps the file, zero copy) and BufferDataLoader (caller's memory).
/// Thread-safety: `load` and `size` may be called concurrently.
class DataLoader {
 public:
  virtual ~DataLoader() = default;
  /// The bytes [offset, offset + size). Errors: InvalidArgument when the range is outside the
  /// data, AccessFailed when reading fails. The buffer keeps what it needs alive by itself:
  /// it may outlive the loader.
  virtual Result<FreeableBuffer> load(size_t offset, size_t size) const = 0;
  /// Total bytes available.
  virtual size_t size() const = 0;
  /// A short description for messages, e.g. the file path.
  virtual std::string name() const = 0;

 protected:
  Status check_range(size_t offset, size_t size) const;
};

/// Reads with pread into buffers aligned to `alignment` bytes.
class FileDataLoader final : public DataLoader {
 public:
  /// Opens `path`. Errors: AccessFailed naming the path and the system's reason.
  static Result<std::unique_ptr<FileDataLoader>> open(const std::string& path,
                                                      size_t alignment = 64);
  ~FileDataLoader() override;
  Result<FreeableBuffer> load(size_t offset, size_t size) const override;
  size_t size() const override { return size_; }
  std::string name() const override { return path_; }

 private:
  FileDataLoader(std::string path, int fd, size_t size, size_t alignment)
      : path_(std::move(path)), fd_(fd), size_(size), alignment_(alignment) {}
  std::string path_;
  int fd_;
  size_t size_;
  size_t alignment_;
};

/// Maps the whole file read-only; `load` returns views into the mapping that keep it alive.
class MmapDataLoader final : public DataLoader {
 public:
  /// Maps `path`. Errors: AccessFailed naming the path and the system's reason.
  static Result<std::unique_ptr<MmapDataLoader>> open(const std::string& path);
  Result<FreeableBuffer> load(size_t offset, size_t size) const override;
  size_t size() const override { return size_; }
  std::string name() const override { return path_; }

 private:
  MmapDataLoader(std::string path, std::shared_ptr<const void> mapping, size_t size)
      : path_(std::move(path)), mapping_(std::move(mapping)), size_(size) {}
  std::string path_;
  std::shared_ptr<const void> mapping_;
  size_t size_;
};

/// Serves bytes from memory the caller owns; they must outlive the loader and every buffer
/// it returns (give `owner` to tie their lifetime to the buffers instead).
class BufferDataLoader final : public DataLoader {
 public:
  BufferDataLoader(const void* data, size_t size, std::shared_ptr<const void> owner = nullptr)
      : data_(static_cast<const char*>(data)), size_(size), owner_(std::move(owner)) {}
  Result<FreeableBuffer> load(size_t offset, size_t size) const override;
  size_t size() const override { return size_; }
  std::string name() const override { return "memory buffer"; }

 private:
  const char* data_;
  size_t size_;
  std::shared_ptr<const void> owner_;
};

}  // namespace kiln::runtime
