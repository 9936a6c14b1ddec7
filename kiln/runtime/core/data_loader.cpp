#include <kiln/runtime/core/data_loader.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::runtime {

Status DataLoader::check_range(size_t offset, size_t size) const {
  if (offset > this->size() || size > this->size() - offset) {
    return Status(Error::InvalidArgument,
                  "load bytes from '" + name() + "': range at offset " + std::to_string(offset) +
                      " of " + std::to_string(size) + " bytes ends past the end (expected at most " +
                      std::to_string(this->size()) + " bytes)");
  }
  return Status();
}

namespace {

Result<std::pair<int, size_t>> open_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(Error::AccessFailed,
                  "open file '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int saved = errno;
    ::close(fd);
    return Status(Error::AccessFailed, "open file '" + path + "': " +
                                           (S_ISREG(st.st_mode) ? std::strerror(saved)
                                                                : "not a regular file"));
  }
  return std::make_pair(fd, static_cast<size_t>(st.st_size));
}

}  // namespace

Result<std::unique_ptr<FileDataLoader>> FileDataLoader::open(const std::string& path,
                                                             size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Status(Error::InvalidArgument, "open file '" + path + "': alignment " +
                                              std::to_string(alignment) +
                                              " (expected a power of two)");
  }
  KILN_ASSIGN_OR_RETURN(auto opened, open_file(path));
  return std::unique_ptr<FileDataLoader>(
      new FileDataLoader(path, opened.first, opened.second, alignment));
}

FileDataLoader::~FileDataLoader() { ::close(fd_); }

Result<FreeableBuffer> FileDataLoader::load(size_t offset, size_t size) const {
  KILN_RETURN_IF_ERROR(check_range(offset, size));
  if (size == 0) return FreeableBuffer(nullptr, 0);
  size_t rounded = (size + alignment_ - 1) / alignment_ * alignment_;
  void* memory = std::aligned_alloc(alignment_, rounded);
  if (memory == nullptr) {
    return Status(Error::MemoryAllocationFailed,
                  "load bytes from '" + path_ + "': could not allocate " + std::to_string(size) +
                      " bytes");
  }
  std::shared_ptr<const void> owner(memory, [](const void* p) { std::free(const_cast<void*>(p)); });
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd_, static_cast<char*>(memory) + done, size - done,
                        static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status(Error::AccessFailed, "read file '" + path_ + "' at offset " +
                                             std::to_string(offset + done) + ": " +
                                             (n < 0 ? std::strerror(errno) : "unexpected end"));
    }
    done += static_cast<size_t>(n);
  }
  return FreeableBuffer(memory, size, std::move(owner));
}

Result<std::unique_ptr<MmapDataLoader>> MmapDataLoader::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto opened, open_file(path));
  auto [fd, size] = opened;
  std::shared_ptr<const void> mapping;
  if (size > 0) {
    void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    ::close(fd);
    if (address == MAP_FAILED) {
      return Status(Error::AccessFailed, "map file '" + path + "': " + std::strerror(saved));
    }
    mapping = std::shared_ptr<const void>(
        address, [size = size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  } else {
    ::close(fd);
  }
  return std::unique_ptr<MmapDataLoader>(new MmapDataLoader(path, std::move(mapping), size));
}

Result<FreeableBuffer> MmapDataLoader::load(size_t offset, size_t size) const {
  KILN_RETURN_IF_ERROR(check_range(offset, size));
  if (size == 0) return FreeableBuffer(nullptr, 0);
  return FreeableBuffer(static_cast<const char*>(mapping_.get()) + offset, size, mapping_);
}

Result<FreeableBuffer> BufferDataLoader::load(size_t offset, size_t size) const {
  KILN_RETURN_IF_ERROR(check_range(offset, size));
  return FreeableBuffer(data_ + offset, size, owner_);
}

}  // namespace kiln::runtime
