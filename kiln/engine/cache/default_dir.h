#pragma once

#include <string>

namespace kiln::engine::cache {

/// The default cache directory of KilnBackend's `cache_dir` option (DESIGN.md §3), read from
/// the environment at each call:
/// - `$KILN_CACHE_DIR` when set, even when empty (an empty value turns persistence off);
/// - else `$XDG_CACHE_HOME/kiln` when XDG_CACHE_HOME is set and not empty;
/// - else `$HOME/.cache/kiln` when HOME is set and not empty;
/// - else "" (no persistence: a ModelCache over "" stores nothing).
/// Thread-safety: reads the environment with getenv; safe unless another thread changes it.
std::string default_cache_dir();

}  // namespace kiln::engine::cache
