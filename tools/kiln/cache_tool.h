#pragma once

#include <kiln/runtime/core/result.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::tools {

/// What `kiln cache ACTION [PROGRAM] [--cache-dir DIR] [--json]` was asked to do.
struct CacheArgs {
  /// "list", "stats", "evict" or "purge".
  std::string action;
  /// The .kiln program whose models `evict` removes; must be empty for the other actions.
  std::string program;
  /// The cache directory; nullopt: `engine::cache::default_cache_dir()`.
  std::optional<std::string> cache_dir;
  /// Print JSON instead of text.
  bool json = false;
};

/// The actions `CacheArgs::action` accepts, in the order help lists them.
inline const std::vector<std::string>& cache_actions() {
  static const std::vector<std::string> actions = {"list", "stats", "evict", "purge"};
  return actions;
}

/// Runs one `kiln cache` action on the directory's entries (through `engine::cache::ModelCache`)
/// and writes its report to `out`:
/// - `list`: one line per entry, most recently used first (key, model hash, size in bytes,
///   last use in UTC ISO-8601), or with `json` an array of {"key", "model_hash", "size_bytes",
///   "last_use", "path"}. A directory that does not exist lists no entries.
/// - `stats`: the entry count, total bytes, the budget (`kDefaultCacheBudgetBytes`) and the
///   entries and bytes per model hash; with `json` {"cache_dir", "entries", "total_bytes",
///   "budget_bytes", "models": [{"model_hash", "entries", "bytes"}]}.
/// - `evict`: removes the entries of every model package the program holds (named data
///   `kiln/package/...`, identified by the package's content hash, which the cache calls the
///   model hash) and reports the count per model; with `json` {"program", "models":
///   [{"package", "model_hash", "removed"}], "removed"}. A program without KilnBackend
///   packages removes nothing and says so (not an error).
/// - `purge`: removes every entry (and leftover temporary files); with `json` {"removed"}.
/// Errors: InvalidArgument for an unknown action, a program given to an action other than
/// evict or missing for evict, an empty `--cache-dir`, or no cache directory configured (the
/// message says which variable made the default empty); the program's load errors (naming
/// the file) and InvalidProgram naming the file and the key of a package that does not verify;
/// AccessFailed when the directory exists but cannot be read.
runtime::Status run_cache_action(const CacheArgs& args, std::ostream& out);

/// A KilnBackend model package stored in a program.
struct ProgramPackage {
  std::string key;          ///< its named-data key, "kiln/package/<hex>"
  uint64_t model_hash = 0;  ///< the package's verified content hash
};

/// The model packages of the program at `path`: every named-data entry whose key starts with
/// "kiln/package/", verified with `PackageView::open`, in program order. Errors: the program's
/// load errors; InvalidProgram naming the file and the key when a package does not verify.
runtime::Result<std::vector<ProgramPackage>> program_packages(const std::string& path);

/// `time` in UTC as ISO-8601 with seconds, e.g. "2024-05-01T12:34:56Z".
std::string utc_iso8601(std::chrono::system_clock::time_point time);

}  // namespace kiln::tools
