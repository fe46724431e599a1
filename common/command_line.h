// Command lines of spillway's tools, parsed by CLI11 (header-only): each tool keeps its own usage
// text and the project's error form: one line "TOOL: what is wrong" (naming the argument), then the
// usage, on stderr, exit status 2; --help prints the usage on stdout, exit status 0.
#ifndef SPILLWAY_COMMON_COMMAND_LINE_H_
#define SPILLWAY_COMMON_COMMAND_LINE_H_

#include <cstdio>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"

namespace spillway {

// Parses argv into `app` (its options added, its help flag left as CLI11 sets it: -h, --help).
// Returns the exit status when the tool is done (help or a bad argument), nullopt to go on.
inline std::optional<int> ParseCommandLine(CLI::App& app, const char* tool, const char* usage,
                                           int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(usage, stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\n%s", tool, e.what(), usage);
    return 2;
  }
  return std::nullopt;
}

}  // namespace spillway

#endif  // SPILLWAY_COMMON_COMMAND_LINE_H_
