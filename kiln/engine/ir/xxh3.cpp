#include <kiln/engine/ir/xxh3.h>

// libxxhash's run-time dispatch picks the vector path; with the header alone, the path would be
// the build's baseline (SSE2 for x86-64).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

namespace kiln::engine::ir {

struct Xxh3Stream::State {
  XXH3_state_t xxh;
};

uint64_t xxh3_64(const void* data, size_t size) { return XXH3_64bits(data, size); }

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) {
  XXH3_INITSTATE(&state_->xxh);
  XXH3_64bits_reset(&state_->xxh);
}

Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::update(const void* data, size_t size) {
  if (size > 0) XXH3_64bits_update(&state_->xxh, data, size);
}

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(&state_->xxh); }

}  // namespace kiln::engine::ir
