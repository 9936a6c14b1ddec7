#include <kiln/engine/cache/model_cache.h>

#include <kiln/engine/cache/entry_format.h>
#include <kiln/engine/ir/xxh3.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <system_error>

namespace kiln::engine::cache {
namespace {

using runtime::Error;
using runtime::Result;
using runtime::Span;
using runtime::Status;

constexpr char kVersionDir[] = "v1";
constexpr char kEntrySuffix[] = ".bin";
constexpr char kTemporaryPrefix[] = ".tmp-";
constexpr size_t kMaxWarnings = 64;
// A temporary file this old belongs to a writer that died; eviction removes it.
constexpr int64_t kStaleTemporaryNs = int64_t{3600} * 1000000000;

std::string errno_text(int error) { return std::generic_category().message(error); }

int64_t to_ns(const timespec& time) {
  return static_cast<int64_t>(time.tv_sec) * 1000000000 + time.tv_nsec;
}

// Last-use times come from here rather than the kernel's file clock, whose coarse ticks
// give equal times to uses milliseconds apart; within a process they strictly increase.
int64_t next_use_time_ns() {
  static std::atomic<int64_t> last{0};
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t previous = last.load();
  for (;;) {
    const int64_t time = std::max(to_ns(now), previous + 1);
    if (last.compare_exchange_weak(previous, time)) return time;
  }
}

// Best effort: an entry whose time cannot be set only ages early.
void mark_used(int fd) {
  const int64_t ns = next_use_time_ns();
  const timespec time{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  const timespec times[2] = {time, time};
  (void)futimens(fd, times);
}

bool parse_hex(std::string_view text, uint64_t* value) {
  if (text.size() != 16) return false;
  uint64_t result = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    result = result << 4 | static_cast<uint64_t>(digit);
  }
  *value = result;
  return true;
}

struct DirEntry {
  CacheEntryInfo info;
  int64_t last_use_ns = 0;
  bool temporary = false;
};

// "<model hex>-<key hex>.bin": true and the two hashes when `name` is an entry's name.
bool parse_entry_name(std::string_view name, uint64_t* model_hash, uint64_t* key_hash) {
  const std::string_view suffix = kEntrySuffix;
  if (name.size() != 33 + suffix.size() || name[16] != '-' || !name.ends_with(suffix)) {
    return false;
  }
  return parse_hex(name.substr(0, 16), model_hash) && parse_hex(name.substr(17, 16), key_hash);
}

// The entries and temporary files of `dir`; a missing directory has none.
Result<std::vector<DirEntry>> scan(const std::string& dir) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) {
    const int error = errno;
    if (error == ENOENT) return std::vector<DirEntry>{};
    return Status(Error::AccessFailed, "read cache directory '" + dir + "': " + errno_text(error));
  }
  std::vector<DirEntry> entries;
  while (const dirent* item = readdir(handle)) {
    const std::string_view name = item->d_name;
    DirEntry entry;
    uint64_t key_hash = 0;
    if (parse_entry_name(name, &entry.info.model_hash, &key_hash)) {
      entry.info.key = to_hex(key_hash);
    } else if (name.starts_with(kTemporaryPrefix)) {
      entry.temporary = true;
    } else {
      continue;
    }
    entry.info.path = dir + "/" + std::string(name);
    struct stat st;
    if (lstat(entry.info.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    entry.info.size_bytes = static_cast<uint64_t>(st.st_size);
    entry.last_use_ns = to_ns(st.st_mtim);
    entry.info.last_use = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(entry.last_use_ns)));
    entries.push_back(std::move(entry));
  }
  closedir(handle);
  return entries;
}

// Removes `path` only if it is still the file `fd_stat` describes: a writer may have renamed
// a fresh entry over the corrupt one since it was opened.
void remove_if_same_file(const std::string& path, const struct stat& fd_stat) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && st.st_ino == fd_stat.st_ino && st.st_dev == fd_stat.st_dev) {
    unlink(path.c_str());
  }
}

// 0, or the errno of the failed write.
int write_all(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t written = write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return 0;
}

std::string temporary_name(const std::string& key_hex) {
  static std::atomic<uint64_t> counter{0};
  return std::string(kTemporaryPrefix) + key_hex + "-" + std::to_string(getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

// Makes a rename durable; failure only weakens durability across a crash, so it is ignored.
void sync_directory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

}  // namespace

ModelCache::ModelCache(std::string dir, CacheOptions options)
    : dir_(std::move(dir)), options_(options) {}

std::string ModelCache::entries_dir() const { return dir_ + "/" + kVersionDir; }

std::string ModelCache::entry_path(uint64_t model_hash, const std::string& key_hex) const {
  return entries_dir() + "/" + to_hex(model_hash) + "-" + key_hex + kEntrySuffix;
}

void ModelCache::warn(std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (warnings_.size() == kMaxWarnings) warnings_.erase(warnings_.begin());
  warnings_.push_back(std::move(message));
}

Result<std::optional<MappedEntry>> ModelCache::lookup(const CacheKey& key,
                                                      PayloadCheck payload_check) {
  auto miss = [this]() -> Result<std::optional<MappedEntry>> {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    return std::optional<MappedEntry>();
  };
  if (dir_.empty()) return miss();
  const std::string encoded_key = key.encoded();
  const uint64_t key_hash = checksum64(encoded_key.data(), encoded_key.size());
  const std::string path = entry_path(key.model_hash, to_hex(key_hash));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return miss();
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return miss();
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data =
      size == 0 ? MAP_FAILED : mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  std::shared_ptr<const void> mapping;
  if (data != MAP_FAILED) {
    mapping = std::shared_ptr<const void>(
        data, [size](const void* p) { munmap(const_cast<void*>(p), size); });
  }
  const Span<const uint8_t> file =
      mapping ? Span<const uint8_t>(static_cast<const uint8_t*>(data), size)
              : Span<const uint8_t>();
  auto entry = validate_entry(file, encoded_key, key_hash, payload_check);
  if (!entry.ok() && size != 0 && !mapping) {
    close(fd);  // could not map a file of plausible size: leave it to a later lookup
    return miss();
  }
  if (!entry.ok() || entry->model_hash != key.model_hash) {
    remove_if_same_file(path, st);
    close(fd);
    const std::string reason =
        entry.ok() ? "cache entry is corrupt: model hash mismatch" : entry.status().message();
    warn("look up cache entry '" + path + "': " + reason + " (removed)");
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    ++stats_.corrupt_entries;
    corrupt_keys_.insert(key_hash);
    return std::optional<MappedEntry>();
  }
  mark_used(fd);
  close(fd);  // the mapping stays valid without the descriptor
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.hits;
  }
  return std::optional<MappedEntry>(MappedEntry(std::move(mapping), *entry, path, key_hash,
                                                static_cast<uint64_t>(st.st_dev),
                                                static_cast<uint64_t>(st.st_ino),
                                                payload_check == PayloadCheck::Now));
}

void ModelCache::reject(const MappedEntry& entry, const std::string& problem) {
  struct stat st {};
  if (stat(entry.path_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_ino) == entry.inode_ &&
      static_cast<uint64_t>(st.st_dev) == entry.device_) {
    unlink(entry.path_.c_str());
  }
  warn("look up cache entry '" + entry.path_ + "': " + problem + " (removed)");
  std::lock_guard<std::mutex> lock(mutex_);
  if (stats_.hits > 0) --stats_.hits;
  ++stats_.misses;
  ++stats_.corrupt_entries;
  corrupt_keys_.insert(entry.key_hash_);
}

Status ModelCache::store(const CacheKey& key, Span<const uint8_t> payload, uint64_t model_hash) {
  return store(key, std::vector<Span<const uint8_t>>{payload}, model_hash);
}

Status ModelCache::store(const CacheKey& key, const std::vector<Span<const uint8_t>>& pieces,
                         uint64_t model_hash) {
  if (model_hash != key.model_hash) {
    return Status(Error::InvalidArgument, "store cache entry: model hash " + to_hex(model_hash) +
                                              " (expected the key's " + to_hex(key.model_hash) +
                                              ")");
  }
  if (dir_.empty()) return Status();
  const std::string encoded_key = key.encoded();
  const uint64_t key_hash = checksum64(encoded_key.data(), encoded_key.size());
  ir::Xxh3Stream checksum;
  uint64_t payload_size = 0;
  for (const auto& piece : pieces) {
    checksum.update(piece.data(), piece.size());
    payload_size += piece.size();
  }
  const std::string prefix =
      encode_entry_prefix(encoded_key, key_hash, model_hash, payload_size, checksum.digest());
  std::vector<Span<const uint8_t>> file;
  file.reserve(pieces.size() + 1);
  file.emplace_back(reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size());
  file.insert(file.end(), pieces.begin(), pieces.end());
  write_entry(key_hash, model_hash, file);
  return Status();
}

Status ModelCache::store_entry(const CacheKey& key, Span<const uint8_t> file) {
  const std::string encoded_key = key.encoded();
  const uint64_t key_hash = checksum64(encoded_key.data(), encoded_key.size());
  auto entry = validate_entry(file, encoded_key, key_hash);
  if (!entry.ok()) {
    return Status(Error::InvalidArgument, "store cache entry '" + to_hex(key_hash) +
                                              "': the bytes given are not its entry: " +
                                              entry.status().message());
  }
  if (entry->model_hash != key.model_hash) {
    return Status(Error::InvalidArgument, "store cache entry '" + to_hex(key_hash) +
                                              "': the bytes given hold model hash " +
                                              to_hex(entry->model_hash) + " (expected the key's " +
                                              to_hex(key.model_hash) + ")");
  }
  if (dir_.empty()) return Status();
  write_entry(key_hash, key.model_hash, {file});
  return Status();
}

bool ModelCache::contains(const CacheKey& key) const {
  if (dir_.empty()) return false;
  struct stat st;
  return stat(entry_path(key.model_hash, key.hex()).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void ModelCache::write_entry(uint64_t key_hash, uint64_t model_hash,
                             const std::vector<Span<const uint8_t>>& file) {
  const std::string key_hex = to_hex(key_hash);
  const std::string dir = entries_dir();
  auto fail = [&](const std::string& problem) {
    warn("store cache entry '" + key_hex + "' in '" + dir + "': " + problem +
         " (entry not stored)");
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.failed_stores;
  };
  uint64_t entry_size = 0;
  for (const auto& piece : file) entry_size += piece.size();
  if (options_.budget_bytes != 0 && entry_size > options_.budget_bytes) {
    return fail("entry has " + std::to_string(entry_size) + " bytes (budget " +
                std::to_string(options_.budget_bytes) + ")");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail("cannot create the directory: " + ec.message());

  const std::string temporary = dir + "/" + temporary_name(key_hex);
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail("cannot create a temporary file: " + errno_text(errno));
  int error = 0;
  for (const auto& piece : file) {
    if (error == 0) error = write_all(fd, piece.data(), piece.size());
  }
  if (error == 0) {
    mark_used(fd);
    if (fsync(fd) != 0) error = errno;
  }
  if (close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    unlink(temporary.c_str());
    return fail("cannot write " + std::to_string(entry_size) + " bytes: " + errno_text(error));
  }
  const std::string path = entry_path(model_hash, key_hex);
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    error = errno;
    unlink(temporary.c_str());
    return fail("cannot rename the temporary file: " + errno_text(error));
  }
  sync_directory(dir);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.stores;
    if (corrupt_keys_.erase(key_hash) != 0) ++stats_.rebuilds;
  }
  enforce_budget(path);
}

void ModelCache::enforce_budget(const std::string& keep_path) {
  if (options_.budget_bytes == 0) return;
  auto entries = scan(entries_dir());
  if (!entries.ok()) return;  // the store succeeded; the next one tries again
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t total = 0;
  std::vector<const DirEntry*> live;
  for (const DirEntry& entry : *entries) {
    if (entry.temporary) {
      if (to_ns(now) - entry.last_use_ns > kStaleTemporaryNs) unlink(entry.info.path.c_str());
      continue;
    }
    total += entry.info.size_bytes;
    live.push_back(&entry);
  }
  if (total <= options_.budget_bytes) return;
  std::sort(live.begin(), live.end(), [](const DirEntry* a, const DirEntry* b) {
    return a->last_use_ns != b->last_use_ns ? a->last_use_ns < b->last_use_ns
                                            : a->info.path < b->info.path;
  });
  uint64_t evicted = 0;
  for (const DirEntry* entry : live) {
    if (total <= options_.budget_bytes) break;
    if (entry->info.path == keep_path) continue;
    if (unlink(entry->info.path.c_str()) == 0) {
      ++evicted;
    } else if (errno != ENOENT) {
      continue;  // still there: it still counts
    }
    total -= entry->info.size_bytes;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.evictions += evicted;
}

Result<size_t> ModelCache::remove_entries(std::optional<uint64_t> model_hash,
                                          bool remove_temporaries) {
  if (dir_.empty()) return size_t{0};
  KILN_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, scan(entries_dir()));
  size_t removed = 0;
  for (const DirEntry& entry : entries) {
    if (entry.temporary) {
      if (remove_temporaries) unlink(entry.info.path.c_str());
      continue;
    }
    if (model_hash && entry.info.model_hash != *model_hash) continue;
    if (unlink(entry.info.path.c_str()) == 0) ++removed;
  }
  return removed;
}

Result<size_t> ModelCache::evict(uint64_t model_hash) {
  KILN_ASSIGN_OR_RETURN(size_t removed, remove_entries(model_hash, false));
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.evictions += removed;
  return removed;
}

Result<size_t> ModelCache::purge() { return remove_entries(std::nullopt, true); }

Result<std::vector<CacheEntryInfo>> ModelCache::list() const {
  if (dir_.empty()) return std::vector<CacheEntryInfo>{};
  KILN_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, scan(entries_dir()));
  std::erase_if(entries, [](const DirEntry& entry) { return entry.temporary; });
  std::sort(entries.begin(), entries.end(), [](const DirEntry& a, const DirEntry& b) {
    return a.last_use_ns != b.last_use_ns ? a.last_use_ns > b.last_use_ns
                                          : a.info.path < b.info.path;
  });
  std::vector<CacheEntryInfo> infos;
  infos.reserve(entries.size());
  for (DirEntry& entry : entries) infos.push_back(std::move(entry.info));
  return infos;
}

CacheStats ModelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<std::string> ModelCache::warnings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return warnings_;
}

}  // namespace kiln::engine::cache
