#pragma once

#include <kiln/engine/cache/cache_key.h>
#include <kiln/engine/cache/entry_format.h>
#include <kiln/runtime/core/result.h>
#include <kiln/runtime/core/span.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::engine::cache {

/// Default size budget of a cache directory: 2 GiB.
inline constexpr uint64_t kDefaultCacheBudgetBytes = uint64_t{2} << 30;

struct CacheOptions {
  /// Most bytes the entry files of the directory may take. After each store the least recently
  /// used entries are removed until the total fits; an entry larger than the budget is not
  /// stored at all. Trade-off: a small budget means more recompiles. Takes effect at the next
  /// store. 0: no limit. Default: kDefaultCacheBudgetBytes.
  uint64_t budget_bytes = kDefaultCacheBudgetBytes;
};

/// What this ModelCache object has done since it was built (not the directory's history).
struct CacheStats {
  uint64_t hits = 0;             ///< lookups that returned a valid entry
  uint64_t misses = 0;           ///< lookups that did not (absent, unreadable or corrupt)
  uint64_t stores = 0;           ///< entries written
  uint64_t rebuilds = 0;         ///< stores of a key whose entry was found corrupt before
  uint64_t evictions = 0;        ///< entries removed by the budget or by evict(model)
  uint64_t failed_stores = 0;    ///< stores that wrote nothing (see warnings())
  uint64_t corrupt_entries = 0;  ///< lookups that found and removed a corrupt entry
};

/// One entry of the directory, as list() reports it.
struct CacheEntryInfo {
  std::string key;  ///< CacheKey::hex()
  uint64_t model_hash = 0;
  uint64_t size_bytes = 0;                         ///< the whole entry file
  std::chrono::system_clock::time_point last_use;  ///< its last store or hit
  std::string path;
};

/// A valid entry mapped read-only. The bytes stay valid while any copy of this object (or a
/// holder of `owner()`) lives, even if the entry is evicted or replaced meanwhile. Copyable;
/// thread-safety: immutable after construction.
class MappedEntry {
 public:
  MappedEntry(std::shared_ptr<const void> mapping, EntryView entry, std::string path,
              uint64_t key_hash, uint64_t device, uint64_t inode, bool payload_checked)
      : mapping_(std::move(mapping)),
        entry_(entry),
        path_(std::move(path)),
        key_hash_(key_hash),
        device_(device),
        inode_(inode),
        payload_checked_(payload_checked) {}
  /// The bytes stored, 64-byte aligned.
  runtime::Span<const uint8_t> payload() const { return entry_.payload; }
  uint64_t model_hash() const { return entry_.model_hash; }
  const std::string& path() const { return path_; }
  /// Keeps the mapping alive; share it to tie the payload's lifetime to another object.
  const std::shared_ptr<const void>& owner() const { return mapping_; }
  /// False for an entry looked up with `PayloadCheck::Later` until `check_payload` says so.
  bool payload_checked() const { return payload_checked_; }
  /// Hashes the payload and compares the header's checksum (a pure read: safe from any
  /// thread, while the caller does other work). Errors: InvalidExternalData "payload checksum
  /// mismatch"; then give the entry to `ModelCache::reject`.
  runtime::Status check_payload() const { return cache::check_payload(entry_); }

 private:
  friend class ModelCache;
  std::shared_ptr<const void> mapping_;
  EntryView entry_;
  std::string path_;
  uint64_t key_hash_, device_, inode_;  // which file: `reject` removes only that one
  bool payload_checked_;
};

/// The on-disk cache of compiled models (DESIGN.md §4 "Cache"). Entries live in
/// `<dir>/v1/<model hash>-<key hash>.bin` (hex); their format is in entry_format.h. The
/// directory is the index: an entry's last use is its file's modification time, so any
/// number of processes can share a directory without an index to keep consistent.
///
/// The cache is best-effort: it never fails a load. A directory that cannot be created or
/// written, or a full disk, leaves the entry unstored with a warning (warnings(),
/// `failed_stores`); an unreadable, truncated or corrupt entry is a miss and is removed.
///
/// Thread-safety: every method may be called concurrently, also from other processes using
/// the same directory. Writers go through a temporary file that is synced and renamed, so a
/// reader sees a whole entry or none. Two stores of one key leave one of the two entries.
/// Assumes no one but a ModelCache writes into `<dir>/v1`.
class ModelCache {
 public:
  /// A cache over `dir` (created on the first store). An empty `dir` disables the cache:
  /// every lookup misses and stores do nothing.
  explicit ModelCache(std::string dir, CacheOptions options = {});

  const std::string& dir() const { return dir_; }
  const CacheOptions& options() const { return options_; }
  /// `<dir>/v1`, where the entries are.
  std::string entries_dir() const;

  /// The entry of `key`, mapped; nullopt on a miss. A hit marks the entry most recently used.
  /// Every filesystem problem (no directory, no permission, a corrupt entry) is a miss, so
  /// the Result is never an error today; callers should still propagate one. With
  /// PayloadCheck::Later the payload's checksum is not computed here (everything else is
  /// checked): the caller reads nothing of the payload it must trust before
  /// `MappedEntry::check_payload` passes, and gives a failing entry to `reject`. That lets a
  /// loader hash a large payload on one thread while it builds kernels on another.
  runtime::Result<std::optional<MappedEntry>> lookup(const CacheKey& key,
                                                     PayloadCheck payload_check = PayloadCheck::Now);

  /// For an entry that `lookup` returned unchecked and whose `check_payload` failed with
  /// `problem`: counts the lookup as a miss of a corrupt entry instead of a hit, removes the
  /// file (unless a writer has replaced it since), and warns, as `lookup` does for an entry it
  /// finds corrupt itself.
  void reject(const MappedEntry& entry, const std::string& problem);

  /// Writes `payload` as the entry of `key` (replacing any), then evicts least recently used
  /// entries to fit the budget. `model_hash` must equal `key.model_hash`; it is what evict()
  /// matches. Returns ok when the entry could not be written (see the class comment).
  /// Errors: InvalidArgument when `model_hash` differs from `key.model_hash`.
  runtime::Status store(const CacheKey& key, runtime::Span<const uint8_t> payload,
                        uint64_t model_hash);
  /// Same, for a payload given as consecutive pieces (written in order, never copied into one
  /// buffer: a compiled artifact's header and its packed weights where they lie).
  runtime::Status store(const CacheKey& key,
                        const std::vector<runtime::Span<const uint8_t>>& pieces,
                        uint64_t model_hash);

  /// Writes `file`, a whole entry file (header, key, payload; e.g. from `encode_entry` or
  /// `engine::ModelLoader::compile_artifact`), as the entry of `key` (replacing any), after
  /// checking that it is exactly that: the format version, `key` itself, the model hash and both
  /// checksums. Writing goes the way of `store` (temporary file, sync, rename, budget), and a
  /// directory that cannot be written is likewise a warning, not an error; an empty `dir` stores
  /// nothing. Errors: InvalidArgument when `file` is not a valid entry of `key`, with what is
  /// wrong (e.g. "entry holds a different key", "payload checksum mismatch").
  runtime::Status store_entry(const CacheKey& key, runtime::Span<const uint8_t> file);

  /// Whether the directory has an entry file for `key`. Only its presence is checked (cheap);
  /// `lookup` validates it. Always false for an empty `dir`.
  bool contains(const CacheKey& key) const;

  /// Removes every entry of the model `model_hash`; returns how many were removed.
  /// Errors: AccessFailed when the directory exists but cannot be read.
  runtime::Result<size_t> evict(uint64_t model_hash);

  /// Removes every entry (and leftover temporary files); returns how many entries.
  /// Errors: AccessFailed when the directory exists but cannot be read.
  runtime::Result<size_t> purge();

  /// The entries, most recently used first. The entries' contents are not validated.
  /// Errors: AccessFailed when the directory exists but cannot be read.
  runtime::Result<std::vector<CacheEntryInfo>> list() const;

  CacheStats stats() const;
  /// Why stores failed and which entries were found corrupt, oldest first (the most recent
  /// 64 are kept).
  std::vector<std::string> warnings() const;

 private:
  std::string entry_path(uint64_t model_hash, const std::string& key_hex) const;
  void warn(std::string message);
  void enforce_budget(const std::string& keep_path);
  // Writes the pieces of a whole entry file as the entry of `key_hash` (temporary file, sync,
  // rename), then enforces the budget. A failure is a warning and a `failed_stores`.
  void write_entry(uint64_t key_hash, uint64_t model_hash,
                   const std::vector<runtime::Span<const uint8_t>>& file);
  // Removes the entries of `model_hash` (all when nullopt), and temporary files if asked.
  runtime::Result<size_t> remove_entries(std::optional<uint64_t> model_hash,
                                         bool remove_temporaries);

  std::string dir_;
  CacheOptions options_;
  mutable std::mutex mutex_;  // guards the members below
  CacheStats stats_;
  std::vector<std::string> warnings_;
  std::set<uint64_t> corrupt_keys_;  // key hashes to count as rebuilds when stored again
};

}  // namespace kiln::engine::cache
