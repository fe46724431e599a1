// Command lines of spillway's tools, parsed by CLI11 (header-only), in the tools' own words: a bad
// argument is one line "TOOL: what is wrong" naming it (unexpected argument 'X', no TRACE given,
// --top needs a number ...) on stderr, exit status 2, followed by the usage or, for tools that
// give one line only, " (see TOOL --help)"; --help prints the tool's usage on stdout, exit status
// 0. Values are checked by the tools themselves, after parsing, with their own messages.
#ifndef SPILLWAY_COMMON_COMMAND_LINE_H_
#define SPILLWAY_COMMON_COMMAND_LINE_H_

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace spillway {

struct CommandLineTool {
  const char* name;   // "spillway-inspect"
  const char* usage;  // the --help text
  // true: the error line ends " (see NAME --help)"; false: the usage follows it.
  bool hint_only = false;
  // What an option given without its value needs ("--top" -> "a number from 1 to 1000"); others
  // need "a value".
  std::map<std::string, std::string> needs = {};
};

// CLI11's error in the tools' words.
inline std::string CommandLineError(const CLI::App& app, const CLI::ParseError& e,
                                    const CommandLineTool& tool) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    const std::vector<std::string> extras = app.remaining();
    if (!extras.empty()) return "unexpected argument '" + extras.front() + "'";
  }
  const size_t suffix = what.rfind(" is required");
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && suffix != std::string::npos &&
      suffix + 12 == what.size() && what[0] != '-') {
    return "no " + what.substr(0, suffix) + " given";  // a positional argument
  }
  const size_t colon = what.find(':');
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && colon != std::string::npos &&
      what.find(" missing") != std::string::npos) {
    const std::string option = what.substr(0, colon);
    const auto it = tool.needs.find(option);
    return option + " needs " + (it != tool.needs.end() ? it->second : "a value");
  }
  return what;
}

// Parses argv into `app` (its options added, each given at most once or TakeLast, as the tools'
// loops took the last; its help flag left as CLI11 sets it: -h, --help).
// Returns the exit status when the tool is done (help or a bad argument), nullopt to go on.
inline std::optional<int> ParseCommandLine(CLI::App& app, const CommandLineTool& tool, int argc,
                                           char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(tool.usage, stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    const std::string what = CommandLineError(app, e, tool);
    if (tool.hint_only) {
      std::fprintf(stderr, "%s: %s (see %s --help)\n", tool.name, what.c_str(), tool.name);
    } else {
      std::fprintf(stderr, "%s: %s\n%s", tool.name, what.c_str(), tool.usage);
    }
    return 2;
  }
  return std::nullopt;
}

}  // namespace spillway

#endif  // SPILLWAY_COMMON_COMMAND_LINE_H_
