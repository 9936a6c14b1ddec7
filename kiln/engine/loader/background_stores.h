#pragma once

#include <functional>

/// Work a load leaves behind: writing a compiled artifact into the cache after a cold load, so
/// the load returns once the model is specialized (see `CompileOptions::store_in_background`).
namespace kiln::engine {

/// Runs `job` on a thread of its own. Every job started finishes before the process exits
/// normally (an `atexit` handler waits for them); a process killed meanwhile leaves at most a
/// temporary file, never a partial cache entry. Thread-safe.
void run_in_background(std::function<void()> job);

/// Waits until every job started before the call has finished (for a caller that reads the
/// cache next, such as a test or a tool). Thread-safe.
void wait_for_background_stores();

}  // namespace kiln::engine
