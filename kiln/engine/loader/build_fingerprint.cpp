// The engine's build fingerprint (model_loader.h), generated from its sources by
// cmake/SourceFingerprint.cmake. This file alone includes it: a change of the sources
// recompiles it and nothing else.
#include <kiln/engine/build_fingerprint.h>
#include <kiln/engine/loader/model_loader.h>

namespace kiln::engine {

std::string_view engine_build_fingerprint() { return KILN_ENGINE_FINGERPRINT; }

}  // namespace kiln::engine
