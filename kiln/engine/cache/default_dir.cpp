#include <kiln/engine/cache/default_dir.h>

#include <cstdlib>

namespace kiln::engine::cache {

std::string default_cache_dir() {
  // KILN_CACHE_DIR wins even when empty: that is how a user turns persistence off.
  if (const char* dir = std::getenv("KILN_CACHE_DIR")) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/kiln";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/kiln";
  }
  return "";
}

}  // namespace kiln::engine::cache
