// Command lines of spillway's tools, parsed by CLI11, in the tools' own words: a bad argument is
// one line "TOOL: what is wrong" naming it (unexpected argument 'X', no TRACE given, --top needs
// a number ...) on stderr, exit status 2, followed by the usage or, for tools that give one line
// only, " (see TOOL --help)"; --help prints the tool's usage on stdout, exit status 0. Values are
// strings, checked by the tools themselves after parsing, with their own messages.
// CommandLine::Parse is the same parse for tools that print their errors themselves (other words
// before the line, another exit status, a parser a test calls).
// CLI11 is header-only and costs each file that includes it some 8 s of compiling: it is
// compiled once, in command_line.cc (the spillway_command_line library), and this header does not
// include it.
#ifndef SPILLWAY_COMMON_COMMAND_LINE_H_
#define SPILLWAY_COMMON_COMMAND_LINE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

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

// What CommandLine::Parse found: the help asked for (-h, --help), a bad argument (`error`, in the
// tool's words, without its name), or neither (go on).
struct ParsedArguments {
  bool help = false;
  std::string error;
};

// A tool's command line: its arguments, declared before parsing. An option given more than once
// keeps its last value, as the tools' loops did; an argument not taken is reported first, as the
// loops stopped at it.
class CommandLine {
 public:
  explicit CommandLine(CommandLineTool tool);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // A positional argument, "TRACE" ("no TRACE given" when `required` and missing).
  void Positional(const std::string& name, std::string* value, bool required = false);
  // An option with a value: "--top", or names "-o,--output" ("--output is required" when
  // `required` and missing).
  void Option(const std::string& names, std::string* value, bool required = false);
  // A flag without a value: "--json".
  void Flag(const std::string& names, bool* value);

  // Parses argv (argv[0] is the program); prints nothing.
  ParsedArguments Parse(int argc, const char* const* argv);
  // Parse, then the usage or the error printed as the top of this file says. Returns the exit
  // status when the tool is done (help or a bad argument), nullopt to go on.
  std::optional<int> ParseForMain(int argc, const char* const* argv);
  // After parsing: whether the option or flag `name` ("--top") was given.
  bool Given(const std::string& name) const;

 private:
  CommandLineTool tool_;
  std::unique_ptr<CLI::App> app_;
};

}  // namespace spillway

#endif  // SPILLWAY_COMMON_COMMAND_LINE_H_
