// Option parsing of `run` and `profile`, in the bash launcher's order and words.
#include "launcher/run_options.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace spillway::launcher {
namespace {

// The options that take a value, and where it goes.
std::map<std::string, std::string RunOptions::*, std::less<>> ValueOptions() {
  return {{"--summary", &RunOptions::summary},
          {"--mode", &RunOptions::mode},
          {"--log", &RunOptions::log},
          {"--log-file", &RunOptions::log_file},
          {"--device-memory", &RunOptions::device_memory},
          {"--host-memory", &RunOptions::host_memory},
          {"--policy", &RunOptions::policy},
          {"--eviction", &RunOptions::eviction},
          {"--ballast-headroom", &RunOptions::headroom}};
}

// The flags, and what they set.
std::map<std::string, bool RunOptions::*, std::less<>> Flags() {
  return {{"--ballast", &RunOptions::ballast},
          {"--framework-allocator", &RunOptions::keep_arenas},
          {"-q", &RunOptions::quiet},
          {"--quiet", &RunOptions::quiet},
          {"--simgpu", &RunOptions::simgpu}};
}

std::string NeedsValue(const std::string& option) {
  return absl::StrCat("option ", option, " needs a value");
}

// The value-list check: "" when VALUE is empty or in the list.
std::string CheckChoice(const std::string& command_name, const std::string& option,
                        const std::string& value, const std::vector<std::string>& allowed,
                        const char* expected) {
  if (value.empty()) return "";
  for (const std::string& one : allowed) {
    if (value == one) return "";
  }
  return absl::StrCat(command_name, ": bad ", option, " '", value, "' (expected ", expected, ")");
}

}  // namespace

RunParse ParseRunOptions(const std::vector<std::string>& args, const std::string& command_name) {
  RunParse parse;
  RunOptions& options = parse.options;
  const auto values = ValueOptions();
  const auto flags = Flags();
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      return parse;
    }
    if (arg == "--version") {
      options.version = true;
      return parse;
    }
    if (arg == "--") {
      ++i;
      break;
    }
    if (const auto flag = flags.find(arg); flag != flags.end()) {
      options.*(flag->second) = true;
      continue;
    }
    if (const auto value = values.find(arg); value != values.end()) {
      if (i + 1 >= args.size()) {
        parse.error = NeedsValue(arg);
        return parse;
      }
      options.*(value->second) = args[++i];
      continue;
    }
    if (const size_t equals = arg.find('='); equals != std::string::npos) {
      if (const auto value = values.find(std::string_view(arg).substr(0, equals));
          value != values.end()) {
        options.*(value->second) = arg.substr(equals + 1);
        continue;
      }
    }
    if (absl::StartsWith(arg, "-")) {
      parse.error = absl::StrCat(command_name, ": unknown option '", arg, "'");
      return parse;
    }
    break;
  }
  options.job.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (options.job.empty()) {
    parse.error = absl::StrCat(command_name, ": missing command to run");
    return parse;
  }
  for (std::string error :
       {CheckChoice(command_name, "--mode", options.mode, {"run", "record", "off"},
                    "run, record or off"),
        CheckChoice(command_name, "--log", options.log, {"error", "warn", "info", "debug"},
                    "error, warn, info or debug"),
        CheckChoice(command_name, "--eviction", options.eviction, {"learned", "lru", "none"},
                    "learned, lru or none")}) {
    if (!error.empty()) {
      parse.error = std::move(error);
      return parse;
    }
  }
  return parse;
}

ProfileParse ParseProfileOptions(const std::vector<std::string>& args) {
  ProfileParse parse;
  // The run options that take a value: their value is passed on with them.
  const auto values = ValueOptions();
  size_t i = 0;
  std::vector<std::string> passed;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parse.help = true;
      return parse;
    }
    if (arg == "--progress") {
      parse.progress = true;
    } else if (arg == "-o" || arg == "--output") {
      if (i + 1 >= args.size()) {
        parse.error = NeedsValue(arg);
        return parse;
      }
      parse.output = args[++i];
    } else if (absl::StartsWith(arg, "--output=")) {
      parse.output = arg.substr(9);
    } else if (arg == "--mode" || absl::StartsWith(arg, "--mode=")) {
      parse.error = "profile: --mode is always record here";
      return parse;
    } else if (arg == "--") {
      passed.push_back(arg);
      ++i;
      break;
    } else if (absl::StartsWith(arg, "-")) {
      passed.push_back(arg);
      // (--ballast-headroom's value is not taken here, as in the bash launcher: it reaches the
      // run options all the same, as the job's first word ends this loop.)
      if (arg != "--ballast-headroom" && values.contains(arg)) {
        if (i + 1 >= args.size()) {
          parse.error = NeedsValue(arg);
          return parse;
        }
        passed.push_back(args[++i]);
      }
    } else {
      break;
    }
  }
  if (i >= args.size()) {
    parse.error = "profile: missing command to run";
    return parse;
  }
  parse.run_args = {"--mode", "record"};
  parse.run_args.insert(parse.run_args.end(), passed.begin(), passed.end());
  parse.run_args.insert(parse.run_args.end(), args.begin() + static_cast<std::ptrdiff_t>(i),
                        args.end());
  return parse;
}

}  // namespace spillway::launcher
