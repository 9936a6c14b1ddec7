#pragma once

// A function bound to shapes inside a LoadedModel, and the helpers the loader's files share.
// Internal to the loader.

#include <kiln/engine/artifact/compiled_artifact.h>
#include <kiln/engine/compile/compiled_function.h>
#include <kiln/engine/ir/graph.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::engine {

/// One function bound to one set of input shapes: built at bind, or (bound from a cache hit)
/// on first use, or (a deferred entry: `fallback` set) at the shape's second run, its first
/// having run on the function's generic plan. `ready` lets runs skip the lock once built.
struct BoundFunction {
  BoundFunction(std::string name, std::vector<std::vector<int64_t>> sizes,
                std::optional<artifact::FunctionRecord> expected, bool generic = false,
                std::shared_ptr<BoundFunction> fallback = nullptr)
      : name(std::move(name)),
        sizes(std::move(sizes)),
        expected(std::move(expected)),
        generic(generic),
        fallback(std::move(fallback)) {}

  const std::string name;
  const std::vector<std::vector<int64_t>> sizes;           // empty for a shape-generic plan
  const std::optional<artifact::FunctionRecord> expected;  // the artifact's record, on a hit
  const bool generic;  // one shape-generic plan for every shape (see LoadedModel::bind)
  std::mutex mutex;    // serializes the build
  std::shared_ptr<compile::CompiledFunction> compiled;  // set once, under `mutex`
  std::atomic<compile::CompiledFunction*> ready{nullptr};
  std::atomic<uint64_t> last_used{0};  // LoadedModel::use_clock_ at the last bind or run

  /// A deferred entry's generic plan (see LoadedModel::bind): it runs the shape's first call,
  /// and every call when the function has no per-shape plan left to give (`settled`).
  const std::shared_ptr<BoundFunction> fallback;
  std::atomic<bool> first_run_taken{false};  // a run went to `fallback` as the shape's first
  std::atomic<bool> settled{false};          // runs on `fallback` for good
  bool claimed = false;  // a deferred entry given a per-shape plan (under LoadedModel::mutex_)
};

}  // namespace kiln::engine

namespace kiln::engine::loader_detail {

/// What a cache entry records of a compiled function: its plan's fingerprint (every step's
/// placement and implementation, and the arena size), arena and step count.
artifact::FunctionRecord record_of(const compile::CompiledFunction& compiled,
                                   const std::string& name,
                                   const std::vector<std::vector<int64_t>>& sizes);

/// "[1, 8], [2]": input shapes for messages; "()" for none.
std::string shapes_text(const std::vector<std::vector<int64_t>>& sizes);

/// Whether every input of `graph` has a static shape.
bool has_static_inputs(const ir::Graph& graph);

/// Whether `graph` has a shape-generic plan (`compile::specialize_generic`): symbolic inputs
/// and no op whose reference kernel is far slower than its oneDNN one without a run-time-shape
/// form (LSTM, GRU, RNN; Conv and ConvTranspose too, unless `frequent_reshapes` on a CPU where
/// kiln's loops run, which take 2-D ones of a weight for any shape: `compile::ShapedOp`).
bool has_generic_plan(const ir::Graph& graph, bool frequent_reshapes);

/// Whether `plan`, the shape-generic plan of `graph`, does its work on kiln's run-time loops:
/// every step left on a reference kernel moves or indexes data (Shape, Gather, Reshape,
/// Concat, Slice, Cast, ...) or computes no floating-point values (shape arithmetic on
/// integers). A plan with, say, an Erf or a ReduceMean over activations on the reference
/// kernels runs many times slower than per-shape plans (oneDNN's kernels), so the default
/// options do not switch a function to it (see `LoadedModel::bind`).
bool generic_plan_runs_fast(const compile::CompiledFunction& plan, const ir::Graph& graph);

}  // namespace kiln::engine::loader_detail
