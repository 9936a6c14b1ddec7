// Activation arenas shared by plans that run one at a time (arena_pool.h).
#include <kiln/engine/compile/arena_pool.h>

#include <kiln/engine/compile/compiled_function.h>

#include <utility>

namespace kiln::engine::compile {

ArenaPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), index_(other.index_), base_(other.base_) {}

ArenaPool::Lease& ArenaPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr) pool_->give_back(index_);
    pool_ = std::exchange(other.pool_, nullptr);
    index_ = other.index_;
    base_ = other.base_;
  }
  return *this;
}

ArenaPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->give_back(index_);
}

ArenaPool::~ArenaPool() {
  for (const Arena& arena : arenas_)
    detail::count_activation_bytes(-static_cast<int64_t>(arena.size));
}

runtime::Result<ArenaPool::Lease> ArenaPool::take(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The smallest free arena that holds `bytes`; else the largest free one, to grow.
  size_t best = arenas_.size(), largest = arenas_.size();
  for (size_t i = 0; i < arenas_.size(); ++i) {
    const Arena& a = arenas_[i];
    if (a.taken) continue;
    if (a.size >= bytes && (best == arenas_.size() || a.size < arenas_[best].size)) best = i;
    if (largest == arenas_.size() || a.size > arenas_[largest].size) largest = i;
  }
  if (best == arenas_.size()) {
    if (largest == arenas_.size()) {
      arenas_.emplace_back();
      largest = arenas_.size() - 1;
    }
    Arena& grown = arenas_[largest];
    // Let the smaller arena go first: the system may hand its pages back for the larger.
    detail::count_activation_bytes(-static_cast<int64_t>(grown.size));
    grown.data = runtime::AlignedBuffer();
    grown.size = 0;
    KILN_ASSIGN_OR_RETURN(grown.data, runtime::allocate_bulk(static_cast<size_t>(bytes)));
    runtime::prefault_for_write(grown.data.get(), static_cast<size_t>(bytes));  // run writes it
    grown.size = bytes;
    detail::count_activation_bytes(static_cast<int64_t>(bytes));
    best = largest;
  }
  arenas_[best].taken = true;
  Lease lease;
  lease.pool_ = this;
  lease.index_ = best;
  lease.base_ = arenas_[best].data.get();
  return lease;
}

void ArenaPool::give_back(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  arenas_[index].taken = false;
}

size_t ArenaPool::num_arenas() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const Arena& a : arenas_) n += a.size > 0 ? 1 : 0;
  return n;
}

uint64_t ArenaPool::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t total = 0;
  for (const Arena& a : arenas_) total += a.size;
  return total;
}

}  // namespace kiln::engine::compile
