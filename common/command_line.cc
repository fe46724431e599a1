// CommandLine (command_line.h): the one file that compiles CLI11, and CLI11's errors in the
// tools' words.
#include "common/command_line.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"

namespace spillway {
namespace {

// `words` with its first "{}" replaced by `arg`.
std::string Worded(const std::string& words, const std::string& arg) {
  const size_t at = words.find("{}");
  return at == std::string::npos ? words : words.substr(0, at) + arg + words.substr(at + 2);
}

// CLI11's error in the tools' words. An argument not taken comes first, as the tools' loops
// stopped at the first one: CLI11 reports a missing value or positional argument before it.
std::string Error(const CLI::App& app, const CLI::ParseError& e, const CommandLineTool& tool) {
  const std::string what = e.what();
  if (const std::vector<std::string> extras = app.remaining(); !extras.empty()) {
    const std::string& arg = extras.front();
    return Worded(arg.size() > 1 && arg[0] == '-' ? tool.unknown_option : tool.extra_argument, arg);
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
  return what.empty() ? "bad command line" : what;
}

}  // namespace

CommandLine::CommandLine(CommandLineTool tool)
    : tool_(std::move(tool)), app_(std::make_unique<CLI::App>()) {}

CommandLine::~CommandLine() = default;

void CommandLine::Positional(const std::string& name, std::string* value, bool required) {
  app_->add_option(name, *value)->required(required);
}

void CommandLine::Option(const std::string& names, std::string* value, bool required) {
  app_->add_option(names, *value)
      ->required(required)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void CommandLine::Flag(const std::string& names, bool* value) { app_->add_flag(names, *value); }

bool CommandLine::Given(const std::string& name) const { return app_->count(name) > 0; }

ParsedArguments CommandLine::Parse(int argc, const char* const* argv) {
  ParsedArguments parsed;
  try {
    app_->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    parsed.help = true;
  } catch (const CLI::ParseError& e) {
    parsed.error = Error(*app_, e, tool_);
  }
  return parsed;
}

std::optional<int> CommandLine::ParseForMain(int argc, const char* const* argv) {
  const ParsedArguments parsed = Parse(argc, argv);
  if (parsed.help) {
    std::fputs(tool_.usage, stdout);
    return 0;
  }
  if (parsed.error.empty()) return std::nullopt;
  if (tool_.hint_only) {
    std::fprintf(stderr, "%s: %s (see %s --help)\n", tool_.name, parsed.error.c_str(), tool_.name);
  } else {
    std::fprintf(stderr, "%s: %s\n%s", tool_.name, parsed.error.c_str(), tool_.usage);
  }
  return 2;
}

}  // namespace spillway
