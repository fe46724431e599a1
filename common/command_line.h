// Command lines of spillway's tools, parsed by CLI11 (header-only), in the tools' own words: a bad
// argument is one line "TOOL: what is wrong" naming it (unexpected argument 'X', no TRACE given,
// --top needs a number ...) on stderr, exit status 2, followed by the usage or, for tools that
// give one line only, " (see TOOL --help)"; --help prints the tool's usage on stdout, exit status
// 0. Values are checked by the tools themselves, after parsing, with their own messages.
// ParseArguments is the same parse for tools that print their errors themselves (other words
// before the line, another exit status, a parser a test calls).
// CLI11 costs each file that includes this a few seconds to compile: include it in the .cc that
// reads the command line (a small one of its own where the tool's main file is large), never in
// a header.
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
  // The words for an argument the tool does not take, "{}" standing for it: an unknown option
  // (one that starts with '-') and an argument past the positional ones.
  const char* unknown_option = "unexpected argument '{}'";
  const char* extra_argument = "unexpected argument '{}'";
};

// `words` with its first "{}" replaced by `arg`.
inline std::string CommandLineWords(const std::string& words, const std::string& arg) {
  const size_t at = words.find("{}");
  return at == std::string::npos ? words : words.substr(0, at) + arg + words.substr(at + 2);
}

// CLI11's error in the tools' words. An argument not taken comes first, as the tools' loops
// stopped at the first one: CLI11 reports a missing value or positional argument before it.
inline std::string CommandLineError(const CLI::App& app, const CLI::ParseError& e,
                                    const CommandLineTool& tool) {
  const std::string what = e.what();
  if (const std::vector<std::string> extras = app.remaining(); !extras.empty()) {
    const std::string& arg = extras.front();
    return CommandLineWords(
        arg.size() > 1 && arg[0] == '-' ? tool.unknown_option : tool.extra_argument, arg);
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

// What ParseArguments found: the help asked for, a bad argument (`error`, in the tool's words,
// without its name), or neither (go on).
struct ParsedArguments {
  bool help = false;
  std::string error;
};

// Parses argv into `app` (its options added, each given at most once or TakeLast, as the tools'
// loops took the last; its help flag left as CLI11 sets it: -h, --help). Prints nothing.
inline ParsedArguments ParseArguments(CLI::App& app, const CommandLineTool& tool, int argc,
                                      const char* const* argv) {
  ParsedArguments parsed;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    parsed.help = true;
  } catch (const CLI::ParseError& e) {
    parsed.error = CommandLineError(app, e, tool);
    if (parsed.error.empty()) parsed.error = "bad command line";
  }
  return parsed;
}

// ParseArguments, and the usage or the error printed as the contract at the top says.
// Returns the exit status when the tool is done (help or a bad argument), nullopt to go on.
inline std::optional<int> ParseCommandLine(CLI::App& app, const CommandLineTool& tool, int argc,
                                           const char* const* argv) {
  const ParsedArguments parsed = ParseArguments(app, tool, argc, argv);
  if (parsed.help) {
    std::fputs(tool.usage, stdout);
    return 0;
  }
  if (parsed.error.empty()) return std::nullopt;
  if (tool.hint_only) {
    std::fprintf(stderr, "%s: %s (see %s --help)\n", tool.name, parsed.error.c_str(), tool.name);
  } else {
    std::fprintf(stderr, "%s: %s\n%s", tool.name, parsed.error.c_str(), tool.usage);
  }
  return 2;
}

}  // namespace spillway

#endif  // SPILLWAY_COMMON_COMMAND_LINE_H_
