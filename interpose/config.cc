// Parsing of the shim's environment variables.
#include "interpose/config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "common/env.h"
#include "common/size.h"

namespace spillway::interpose {

std::optional<Mode> ParseMode(std::string_view text) {
  if (text == "run") return Mode::kRun;
  if (text == "record") return Mode::kRecord;
  if (text == "off") return Mode::kOff;
  return std::nullopt;
}

std::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kRun:
      return "run";
    case Mode::kRecord:
      return "record";
    case Mode::kOff:
      return "off";
  }
  return "off";
}

std::optional<LogLevel> ParseLogLevel(std::string_view text) {
  if (text == "error") return LogLevel::kError;
  if (text == "warn" || text == "warning") return LogLevel::kWarn;
  if (text == "info") return LogLevel::kInfo;
  if (text == "debug") return LogLevel::kDebug;
  return std::nullopt;
}

Config MakeConfig(std::optional<std::string_view> mode, std::optional<std::string_view> log,
                  std::optional<std::string_view> log_file,
                  std::optional<std::string_view> summary) {
  Config config;
  if (mode.has_value() && !mode->empty()) {
    if (const std::optional<Mode> parsed = ParseMode(*mode)) {
      config.mode = *parsed;
    } else {
      config.mode = Mode::kOff;
      config.problems.push_back("SPILLWAY_MODE: unknown value '" + std::string(*mode) +
                                "' (expected run, record or off); falling back to passthrough");
    }
  }
  if (log.has_value() && !log->empty()) {
    if (const std::optional<LogLevel> parsed = ParseLogLevel(*log)) {
      config.log_level = *parsed;
    } else {
      config.problems.push_back("SPILLWAY_LOG: unknown value '" + std::string(*log) +
                                "' (expected error, warn, info or debug); using warn");
    }
  }
  if (log_file.has_value()) config.log_file = std::string(*log_file);
  if (summary.has_value()) config.summary_path = std::string(*summary);
  return config;
}

namespace {

std::optional<uint64_t> ParseSizeSetting(std::string_view name, std::string_view value,
                                         std::vector<std::string>* problems) {
  const absl::StatusOr<uint64_t> parsed = ParseSize(value);
  if (parsed.ok()) return *parsed;
  problems->push_back(std::string(name) + ": cannot use '" + std::string(value) + "' (" +
                      std::string(parsed.status().message()) + "); using the default");
  return std::nullopt;
}

}  // namespace

uint64_t HostMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

void ApplyMemorySettings(std::optional<std::string_view> device_memory,
                         std::optional<std::string_view> host_memory, Config* config) {
  if (device_memory.has_value() && !device_memory->empty()) {
    const std::optional<uint64_t> bytes =
        ParseSizeSetting("SPILLWAY_DEVICE_MEMORY", *device_memory, &config->problems);
    if (bytes.has_value() && *bytes < kMinDeviceMemoryBytes) {
      // A budget under a page is no budget (`1.5` parses as 2 bytes); the launcher refuses the
      // same values.
      config->problems.push_back("SPILLWAY_DEVICE_MEMORY: cannot use '" +
                                 std::string(*device_memory) +
                                 "' (a budget is at least 4 KiB); using the default");
    } else {
      config->device_memory = bytes;
    }
  }
  if (host_memory.has_value() && !host_memory->empty()) {
    config->host_memory =
        ParseSizeSetting("SPILLWAY_HOST_MEMORY", *host_memory, &config->problems).value_or(0);
    // The job is told the device has the budget plus this much: never more than the host holds
    // (a job that sizes itself by it would be killed by the host, or fail, where it runs without
    // spillway).
    const uint64_t ram = HostMemoryBytes();
    if (ram != 0 && config->host_memory > ram) {
      config->problems.push_back("SPILLWAY_HOST_MEMORY: '" + std::string(*host_memory) +
                                 "' is more than this host's " + std::to_string(ram) +
                                 " bytes of memory; using " + std::to_string(ram));
      config->host_memory = ram;
    }
  }
}

std::vector<std::string> ParseModuleList(std::string_view text) {
  std::vector<std::string> modules;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) modules.emplace_back(item);
    start = end + 1;
  }
  return modules;
}

void ApplyBackingSettings(std::optional<std::string_view> device_modules,
                          std::optional<std::string_view> ballast, Config* config) {
  if (device_modules.has_value()) {
    config->device_modules.clear();
    for (std::string& part : ParseModuleList(*device_modules)) {
      // A part with no letter ("0", "1.5") names no library: it would match file names by their
      // version numbers.
      if (std::none_of(part.begin(), part.end(), [](char c) { return std::isalpha(c) != 0; })) {
        config->problems.push_back("SPILLWAY_DEVICE_MODULES: '" + part +
                                   "' names no module (give part of a library's file name, such "
                                   "as libnccl); ignored");
        continue;
      }
      config->device_modules.push_back(std::move(part));
    }
  }
  if (ballast.has_value() && !ballast->empty()) {
    if (*ballast == "1") {
      config->ballast = true;
    } else if (*ballast != "0") {
      config->problems.push_back("SPILLWAY_BALLAST: cannot use '" + std::string(*ballast) +
                                 "' (expected 0 or 1); no ballast");
    }
  }
}

void ApplyBallastHeadroom(std::optional<std::string_view> headroom, Config* config) {
  if (!headroom.has_value() || headroom->empty()) return;
  config->ballast_headroom =
      ParseSizeSetting("SPILLWAY_BALLAST_HEADROOM", *headroom, &config->problems);
}

void ApplyEvictionSetting(std::optional<std::string_view> eviction,
                          std::optional<std::string_view> lookahead, Config* config) {
  if (eviction.has_value() && !eviction->empty()) {
    if (*eviction == "lru" || *eviction == "learned" || *eviction == "none") {
      config->eviction = std::string(*eviction);
    } else {
      config->problems.push_back("SPILLWAY_EVICTION: unknown value '" + std::string(*eviction) +
                                 "' (expected learned, lru or none); using " + config->eviction);
    }
  }
  if (lookahead.has_value() && *lookahead == "auto") {
    config->lookahead = Config::kMaxLookahead;
    config->lookahead_auto = true;
  } else if (lookahead.has_value() && !lookahead->empty()) {
    int value = 0;
    bool ok = lookahead->size() <= 2;
    for (const char c : *lookahead) {
      ok = ok && c >= '0' && c <= '9';
      value = value * 10 + (c - '0');
    }
    if (ok && value <= Config::kMaxLookahead) {
      config->lookahead = value;
      config->lookahead_auto = false;
    } else {
      config->problems.push_back(
          "SPILLWAY_LOOKAHEAD: cannot use '" + std::string(*lookahead) +
          "' (expected auto or an integer from 0 to 64); using " +
          (config->lookahead_auto ? std::string("auto") : std::to_string(config->lookahead)));
    }
  }
}

void ApplyOnlinePlanSetting(std::optional<std::string_view> online_plan, Config* config) {
  if (!online_plan.has_value() || online_plan->empty()) return;
  if (*online_plan == "0" || *online_plan == "1" || *online_plan == "inline") {
    config->online_plan = *online_plan != "0";
    config->online_plan_inline = *online_plan == "inline";
  } else {
    config->problems.push_back("SPILLWAY_ONLINE_PLAN: unknown value '" + std::string(*online_plan) +
                               "' (expected 0, 1 or inline); using " +
                               (!config->online_plan         ? "0"
                                : config->online_plan_inline ? "inline"
                                                             : "1"));
  }
}

Config ReadConfigFromEnvironment() {
  Config config = MakeConfig(GetEnv("SPILLWAY_MODE"), GetEnv("SPILLWAY_LOG"),
                             GetEnv("SPILLWAY_LOG_FILE"), GetEnv("SPILLWAY_SUMMARY"));
  ApplyMemorySettings(GetEnv("SPILLWAY_DEVICE_MEMORY"), GetEnv("SPILLWAY_HOST_MEMORY"), &config);
  ApplyBackingSettings(GetEnv("SPILLWAY_DEVICE_MODULES"), GetEnv("SPILLWAY_BALLAST"), &config);
  ApplyBallastHeadroom(GetEnv("SPILLWAY_BALLAST_HEADROOM"), &config);
  ApplyEvictionSetting(GetEnv("SPILLWAY_EVICTION"), GetEnv("SPILLWAY_LOOKAHEAD"), &config);
  ApplyOnlinePlanSetting(GetEnv("SPILLWAY_ONLINE_PLAN"), &config);
  if (const std::optional<std::string_view> policy = GetEnv("SPILLWAY_POLICY")) {
    config.policy_file = std::string(*policy);
  }
  if (const std::optional<std::string_view> trace = GetEnv("SPILLWAY_TRACE")) {
    if (!trace->empty()) config.trace_path = std::string(*trace);
  }
  if (const std::optional<std::string_view> list = GetEnv("SPILLWAY_TRACE_LIST")) {
    config.trace_list = std::string(*list);
  }
  return config;
}

std::string ExpandSummaryPath(std::string_view path, long pid) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += path[i];
    }
  }
  return out;
}

}  // namespace spillway::interpose
