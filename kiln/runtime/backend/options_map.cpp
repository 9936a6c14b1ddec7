#include <kiln/runtime/backend/options_map.h>

#include <algorithm>

namespace kiln::runtime {

Status LoadBackendOptionsMap::set_options(std::string_view backend_id,
                                          Span<const BackendOption> options) {
  if (backend_id.empty()) {
    return Status(Error::InvalidArgument,
                  "set options: backend id is empty (expected a backend id like 'KilnBackend')");
  }
  for (size_t i = 0; i < options.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (options[i].key == options[j].key) {
        return Status(Error::InvalidArgument, "set options for backend '" +
                                                  std::string(backend_id) + "': key '" +
                                                  options[i].key + "' is set twice");
      }
    }
  }
  std::vector<BackendOption> copy(options.begin(), options.end());
  for (auto& entry : entries_) {
    if (entry.first == backend_id) {
      entry.second = std::move(copy);
      return Status();
    }
  }
  entries_.emplace_back(std::string(backend_id), std::move(copy));
  return Status();
}

Span<const BackendOption> LoadBackendOptionsMap::get_options(std::string_view backend_id) const {
  for (const auto& entry : entries_) {
    if (entry.first == backend_id) return entry.second;
  }
  return {};
}

bool LoadBackendOptionsMap::has_options(std::string_view backend_id) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const auto& entry) { return entry.first == backend_id; });
}

std::vector<std::string> LoadBackendOptionsMap::backend_ids() const {
  std::vector<std::string> ids;
  for (const auto& entry : entries_) ids.push_back(entry.first);
  return ids;
}

bool LoadBackendOptionsMap::erase(std::string_view backend_id) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const auto& entry) { return entry.first == backend_id; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

}  // namespace kiln::runtime
