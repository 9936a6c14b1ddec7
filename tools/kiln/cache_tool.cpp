// `kiln cache`: the reports and actions over a cache directory (ModelCache does the work).

#include <tools/kiln/cache_tool.h>

#include <kiln/engine/cache/cache_key.h>
#include <kiln/engine/cache/default_dir.h>
#include <kiln/engine/cache/model_cache.h>
#include <kiln/engine/package/package.h>
#include <kiln/extension/module/module.h>
#include <kiln/runtime/core/aligned_buffer.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iomanip>
#include <map>
#include <string_view>

namespace kiln::tools {

using engine::cache::CacheEntryInfo;
using engine::cache::ModelCache;
using engine::cache::to_hex;
using json = nlohmann::ordered_json;
using runtime::Error;
using runtime::Result;
using runtime::Status;

namespace {

constexpr std::string_view kPackagePrefix = "kiln/package/";

std::string entries_text(uint64_t count) {
  return std::to_string(count) + (count == 1 ? " entry" : " entries");
}

Result<std::string> resolve_cache_dir(const std::optional<std::string>& flag) {
  if (flag) {
    if (flag->empty()) {
      return Status(Error::InvalidArgument, "option --cache-dir is empty (expected a directory)");
    }
    return *flag;
  }
  std::string dir = engine::cache::default_cache_dir();
  if (!dir.empty()) return dir;
  const std::string why = std::getenv("KILN_CACHE_DIR") != nullptr
                              ? "KILN_CACHE_DIR is set and empty, which turns the cache off"
                              : "none of KILN_CACHE_DIR, XDG_CACHE_HOME and HOME is set";
  return Status(Error::InvalidArgument,
                "no cache directory is configured: " + why + " (pass --cache-dir DIR)");
}

Status list_entries(const std::string& dir, bool as_json, std::ostream& out) {
  ModelCache cache(dir);
  KILN_ASSIGN_OR_RETURN(std::vector<CacheEntryInfo> entries, cache.list());
  if (as_json) {
    json array = json::array();
    for (const auto& e : entries) {
      array.push_back({{"key", e.key},
                       {"model_hash", to_hex(e.model_hash)},
                       {"size_bytes", e.size_bytes},
                       {"last_use", utc_iso8601(e.last_use)},
                       {"path", e.path}});
    }
    out << array.dump(2) << "\n";
    return Status();
  }
  out << "cache " << dir << ": " << entries_text(entries.size()) << "\n";
  if (entries.empty()) return Status();
  out << std::left << std::setw(18) << "KEY" << std::setw(18) << "MODEL" << std::right
      << std::setw(12) << "BYTES"
      << "  LAST USE (UTC)\n";
  for (const auto& e : entries) {
    out << std::left << std::setw(18) << e.key << std::setw(18) << to_hex(e.model_hash)
        << std::right << std::setw(12) << e.size_bytes << "  " << utc_iso8601(e.last_use) << "\n";
  }
  return Status();
}

Status show_stats(const std::string& dir, bool as_json, std::ostream& out) {
  ModelCache cache(dir);
  KILN_ASSIGN_OR_RETURN(std::vector<CacheEntryInfo> entries, cache.list());
  struct ModelTotals {
    uint64_t entries = 0;
    uint64_t bytes = 0;
  };
  std::map<uint64_t, ModelTotals> models;  // ordered by hash, so reports are stable
  uint64_t total_bytes = 0;
  for (const auto& e : entries) {
    models[e.model_hash].entries += 1;
    models[e.model_hash].bytes += e.size_bytes;
    total_bytes += e.size_bytes;
  }
  const uint64_t budget = engine::cache::kDefaultCacheBudgetBytes;
  if (as_json) {
    json doc = {{"cache_dir", dir},
                {"entries", entries.size()},
                {"total_bytes", total_bytes},
                {"budget_bytes", budget},
                {"models", json::array()}};
    for (const auto& [hash, totals] : models) {
      doc["models"].push_back(
          {{"model_hash", to_hex(hash)}, {"entries", totals.entries}, {"bytes", totals.bytes}});
    }
    out << doc.dump(2) << "\n";
    return Status();
  }
  out << "cache    " << dir << "\n"
      << "entries  " << entries.size() << "\n"
      << "bytes    " << total_bytes << " of a " << budget << "-byte budget (" << std::fixed
      << std::setprecision(1) << 100.0 * static_cast<double>(total_bytes) / budget << "% used)\n"
      << "models   " << models.size() << "\n";
  for (const auto& [hash, totals] : models) {
    out << "  " << to_hex(hash) << "  " << entries_text(totals.entries) << ", " << totals.bytes
        << " bytes\n";
  }
  return Status();
}

Status evict_program(const std::string& dir, const std::string& program, bool as_json,
                     std::ostream& out) {
  KILN_ASSIGN_OR_RETURN(std::vector<ProgramPackage> packages, program_packages(program));
  ModelCache cache(dir);
  json models = json::array();
  std::vector<uint64_t> seen;  // two keys may hold the same package
  size_t total = 0;
  for (const auto& package : packages) {
    if (std::find(seen.begin(), seen.end(), package.model_hash) != seen.end()) continue;
    seen.push_back(package.model_hash);
    KILN_ASSIGN_OR_RETURN(size_t removed, cache.evict(package.model_hash));
    total += removed;
    models.push_back({{"package", package.key},
                      {"model_hash", to_hex(package.model_hash)},
                      {"removed", removed}});
  }
  if (as_json) {
    out << json{{"program", program}, {"cache_dir", dir}, {"models", models}, {"removed", total}}
               .dump(2)
        << "\n";
    return Status();
  }
  if (packages.empty()) {
    out << "program " << program << " holds no KilnBackend model package (named data '"
        << kPackagePrefix << "...'): nothing to evict\n";
  }
  for (const auto& model : models) {
    out << "model " << model["model_hash"].get<std::string>() << " ("
        << model["package"].get<std::string>() << "): removed "
        << entries_text(model["removed"].get<uint64_t>()) << "\n";
  }
  out << "removed " << entries_text(total) << " from " << dir << "\n";
  return Status();
}

Status purge_all(const std::string& dir, bool as_json, std::ostream& out) {
  ModelCache cache(dir);
  KILN_ASSIGN_OR_RETURN(size_t removed, cache.purge());
  if (as_json) {
    out << json{{"cache_dir", dir}, {"removed", removed}}.dump(2) << "\n";
  } else {
    out << "removed " << entries_text(removed) << " from " << dir << "\n";
  }
  return Status();
}

}  // namespace

std::string utc_iso8601(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  const size_t n = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, n);
}

Result<std::vector<ProgramPackage>> program_packages(const std::string& path) {
  extension::Module module(path);
  KILN_RETURN_IF_ERROR(module.load());
  const auto& named_data = module.program()->named_data();
  std::vector<ProgramPackage> packages;
  for (const std::string& key : named_data.keys()) {
    if (!key.starts_with(kPackagePrefix)) continue;
    const std::string where = "read model package '" + key + "' of program '" + path + "'";
    auto data = named_data.get_data(key);
    if (!data.ok()) return data.status().with_context(where);
    const auto* bytes = static_cast<const uint8_t*>(data->data());
    const size_t size = data->size();
    // PackageView reads the flatbuffer in place, which needs 8-byte alignment.
    runtime::AlignedBuffer copy;
    if (reinterpret_cast<uintptr_t>(bytes) % 8 != 0) {
      KILN_ASSIGN_OR_RETURN(copy, runtime::allocate_aligned(size));
      std::memcpy(copy.get(), bytes, size);
      bytes = copy.get();
    }
    auto view = engine::package::PackageView::open(runtime::Span<const uint8_t>(bytes, size));
    if (!view.ok()) return Status(Error::InvalidProgram, where + ": " + view.status().message());
    packages.push_back({key, view->content_hash()});
  }
  return packages;
}

Status run_cache_action(const CacheArgs& args, std::ostream& out) {
  const auto& actions = cache_actions();
  if (std::find(actions.begin(), actions.end(), args.action) == actions.end()) {
    return Status(Error::InvalidArgument, "unknown cache action '" + args.action +
                                              "' (expected list, stats, evict or purge)");
  }
  if (args.action == "evict" && args.program.empty()) {
    return Status(Error::InvalidArgument,
                  "cache action 'evict' needs a program (kiln cache evict OUT.kiln)");
  }
  if (args.action != "evict" && !args.program.empty()) {
    return Status(Error::InvalidArgument, "cache action '" + args.action +
                                              "' takes no program, got '" + args.program +
                                              "' (only evict does)");
  }
  KILN_ASSIGN_OR_RETURN(std::string dir, resolve_cache_dir(args.cache_dir));
  if (args.action == "list") return list_entries(dir, args.json, out);
  if (args.action == "stats") return show_stats(dir, args.json, out);
  if (args.action == "evict") return evict_program(dir, args.program, args.json, out);
  return purge_all(dir, args.json, out);
}

}  // namespace kiln::tools
