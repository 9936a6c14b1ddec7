// `kiln cache list|stats|evict OUT.kiln|purge [--cache-dir DIR] [--json]`: the flags; the
// actions are run_cache_action (cache_tool.h).

#include <tools/kiln/cache_tool.h>
#include <tools/kiln/commands.h>

#include <iostream>
#include <memory>

namespace kiln::tools {

Command add_cache_command(CLI::App& root) {
  auto args = std::make_shared<CacheArgs>();
  auto cache_dir = std::make_shared<std::string>();
  CLI::App* app = root.add_subcommand(
      "cache", "List, show stats of, evict or purge compiled specializations in the cache");
  app->add_option("action", args->action, "list, stats, evict (needs PROGRAM) or purge")
      ->required()
      ->check(CLI::IsMember(cache_actions()));
  app->add_option("program", args->program, "The .kiln program whose models evict removes");
  CLI::Option* dir_option = app->add_option(
      "--cache-dir", *cache_dir,
      "The cache directory (default: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else "
      "~/.cache/kiln)");
  app->add_flag("--json", args->json, "Print JSON instead of text");
  return Command{app, [args, cache_dir, dir_option] {
                   if (dir_option->count() > 0) args->cache_dir = *cache_dir;
                   return run_cache_action(*args, std::cout);
                 }};
}

}  // namespace kiln::tools
