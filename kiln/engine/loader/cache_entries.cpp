#include <kiln/engine/loader/cache_entries.h>

#include <kiln/engine/cpu/thread_team.h>
#include <kiln/engine/specialization/devices.h>

#include <system_error>
#include <thread>

namespace kiln::engine::loader_detail {

using runtime::Status;

std::vector<StaticFunction> static_functions(const ir::Model& model) {
  std::vector<StaticFunction> out;
  for (const ir::Graph& graph : model.functions) {
    StaticFunction f{graph.name, {}};
    bool is_static = true;
    for (int input : graph.inputs) {
      auto sizes = graph.values[static_cast<size_t>(input)].type.static_sizes();
      is_static = is_static && sizes.has_value();
      if (sizes) f.sizes.push_back(*sizes);
    }
    if (is_static) out.push_back(std::move(f));
  }
  return out;
}

cache::CacheKey make_cache_key(uint64_t model_hash, const std::vector<StaticFunction>& functions,
                               const specialization::SpecializationOptions& options,
                               const compile::CompileOptions& compile) {
  cache::CacheKey key;
  key.model_hash = model_hash;
  for (const StaticFunction& f : functions) {
    key.functions.push_back(f.name);
    key.input_shapes.push_back(f.sizes);
  }
  key.specialization = options.identifier() + (compile.fuse ? "" : ";fuse=0") +
                       (compile.propagate_layouts ? "" : ";layouts=0") +
                       (compile.winograd ? "" : ";winograd=0") +
                       (compile.small_ops_own_loops ? "" : ";small=0") +
                       // Plans differ by thread count (scratch sizes, ops on one thread).
                       ";threads=" + std::to_string(cpu::team_size(compile.num_threads));
  key.engine_version = engine_version();
  key.cpu_features = specialization::cpu_features();
  return key;
}

void layout_payload(const std::vector<artifact::FunctionRecord>& records,
                    const cpu::PackedConstants& packed, artifact::ArtifactPieces& out) {
  std::vector<artifact::PackedRecord> packings;
  for (const cpu::PackedConstants::Entry& e : packed.entries()) {
    packings.push_back(artifact::PackedRecord{e.key, e.bytes});
  }
  artifact::layout_artifact(records, packings, out);
}

std::optional<Adopted> adopt_cached(cache::ModelCache& cache, const cache::CacheKey& key,
                                    cpu::PackedConstants& packed, LoadReport& report,
                                    cache::PayloadCheck payload_check) {
  auto entry = cache.lookup(key, payload_check);
  if (!entry.ok() || !entry->has_value()) return std::nullopt;
  const cache::MappedEntry& mapped = **entry;
  auto view = artifact::read_artifact(mapped.payload());
  if (!view.ok()) {
    report.warnings.push_back("cache entry " + mapped.path() +
                              " not used: " + view.status().message());
    return std::nullopt;
  }
  for (const artifact::PackedRecord& record : view->packed) {
    Status adopted = packed.adopt(record.key, record.bytes, mapped.owner());
    if (!adopted.ok()) {
      report.warnings.push_back("cache entry " + mapped.path() + " not used: " + adopted.message());
      return std::nullopt;
    }
  }
  report.cache_entry = mapped.path();
  std::optional<cache::MappedEntry> unchecked;
  if (!mapped.payload_checked()) unchecked = mapped;
  return Adopted{std::move(view->functions), view->packed.size(), std::move(unchecked)};
}

PayloadChecker::PayloadChecker(const cache::MappedEntry& entry)
    : shared_(std::make_shared<Shared>(entry)) {
  constexpr size_t kThreadedCheckBytes = size_t{4} << 20;
  if (entry.payload().size() < kThreadedCheckBytes) return;
  std::future<Status> result = shared_->helper_result.get_future();
  try {
    std::thread([shared = shared_, creator = cpu::this_cpu()] {
      int unclaimed = 0;
      if (!shared->claimed.compare_exchange_strong(unclaimed, kHelper)) return;
      // Sharing the builder's CPU, the check would only take turns with the build.
      cpu::move_off_creator_cpu(creator);
      shared->helper_result.set_value(shared->entry.check_payload());
    }).detach();
    helper_ = std::move(result);
  } catch (const std::system_error&) {
    // No thread: the caller checks it.
  }
}

Status PayloadChecker::get() {
  int unclaimed = 0;
  if (shared_->claimed.compare_exchange_strong(unclaimed, kCaller)) {
    return shared_->entry.check_payload();
  }
  return helper_.get();
}

}  // namespace kiln::engine::loader_detail
