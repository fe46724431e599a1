// The shim's settings, read once from the environment: SPILLWAY_MODE, SPILLWAY_LOG,
// SPILLWAY_LOG_FILE, SPILLWAY_SUMMARY, SPILLWAY_DEVICE_MEMORY, SPILLWAY_HOST_MEMORY,
// SPILLWAY_DEVICE_MODULES, SPILLWAY_BALLAST, SPILLWAY_EVICTION, SPILLWAY_LOOKAHEAD,
// SPILLWAY_POLICY, SPILLWAY_TRACE. Parsing is pure so tests can feed it values directly.
#ifndef SPILLWAY_INTERPOSE_CONFIG_H_
#define SPILLWAY_INTERPOSE_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::interpose {

// `run`: hooks count and (later) drive the engine; `record`: the same plus trace recording (later);
// `off`: pure passthrough, only per-function call counts are kept.
enum class Mode { kRun, kRecord, kOff };

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

std::optional<Mode> ParseMode(std::string_view text);
std::string_view ModeName(Mode mode);
std::optional<LogLevel> ParseLogLevel(std::string_view text);

struct Config {
  Mode mode = Mode::kRun;
  LogLevel log_level = LogLevel::kWarn;
  std::string log_file;      // empty: stderr
  std::string summary_path;  // empty: no summary; "%p" is replaced by the pid when written
  // SPILLWAY_DEVICE_MEMORY: the engine's device budget; nullopt = physical free memory at the
  // engine's start minus 5% of the total.
  std::optional<uint64_t> device_memory;
  // SPILLWAY_HOST_MEMORY: how much more than the budget cuMemGetInfo / cuDeviceTotalMem report
  // (the reported total is max(physical total, budget + this)). Default 0.
  uint64_t host_memory = 0;
  // SPILLWAY_DEVICE_MODULES: comma-separated parts of module file names; allocations whose calling
  // module's path contains one stay plain device memory. Default "libnccl"; empty: none.
  std::vector<std::string> device_modules = {"libnccl"};
  // SPILLWAY_BALLAST=1: at the engine's start, allocate the physical free memory beyond the budget
  // (less headroom) as plain device memory, so the GPU behaves like one with the budget.
  bool ballast = false;
  // SPILLWAY_BALLAST_HEADROOM: what the ballast leaves free beyond the budget, for the device
  // memory a job takes outside its allocations (module code loaded lazily, the driver's own);
  // unset: 5% of the device. The GPU check measures it from the job's unlimited run.
  std::optional<uint64_t> ballast_headroom;
  // SPILLWAY_EVICTION: the residency engine's eviction policy, "learned" (default), "lru", or
  // "none" (managed backing only: the engine moves nothing, the device pages on demand).
  std::string eviction = "learned";
  // SPILLWAY_LOOKAHEAD: how many launches ahead a detected step's access sets are prefetched on a
  // side stream; 0 = none (every move on the launch stream just before the kernel). With
  // lookahead_auto ("auto", the default) the count is sized from observed kernel times and
  // bandwidth, up to kMaxLookahead launches.
  int lookahead = kMaxLookahead;
  bool lookahead_auto = true;
  static constexpr int kMaxLookahead = 64;
  // SPILLWAY_ONLINE_PLAN: with the learned policy and no policy file, "1" (the default) records
  // the detected step, plans it inside the job on a thread of its own and follows the plan
  // (docs/engine.md, "Online planning"); "inline" plans in the launch that completes the
  // recording instead (the job waits for it, and the plan is followed from the next step); "0"
  // leaves every decision to the learned policy.
  bool online_plan = true;
  bool online_plan_inline = false;
  // SPILLWAY_POLICY: a policy file (docs/policy.md) the engine follows; empty: none. It is read
  // when an engine starts; a file that cannot be used gives one line and the learned policy.
  std::string policy_file;
  // SPILLWAY_TRACE: where record mode writes its trace; "%p" is replaced by the pid (a forked
  // child without "%p" in the name writes to "<name>.<pid>").
  std::string trace_path = "spillway-%p.trace";
  // SPILLWAY_TRACE_LIST (set by `spillway profile`): a file each recording process appends the
  // path of its trace to, one line, so the launcher lists its own job's traces and no other's.
  std::string trace_list;
  // One line per setting that was rejected, e.g. "SPILLWAY_MODE: unknown value 'x' ...".
  std::vector<std::string> problems;
};

// Builds the configuration from the values of the variables (nullopt = unset).
Config MakeConfig(std::optional<std::string_view> mode, std::optional<std::string_view> log,
                  std::optional<std::string_view> log_file,
                  std::optional<std::string_view> summary);

// This host's physical memory in bytes (0 when it cannot be read).
uint64_t HostMemoryBytes();

// The smallest device-memory budget taken (a page), as the launcher checks it.
inline constexpr uint64_t kMinDeviceMemoryBytes = 4096;

// Sets device_memory and host_memory from the variables' values (nullopt = unset). A value that
// does not parse, or a budget under kMinDeviceMemoryBytes, adds a line to `problems` naming the
// variable and the value; the default stays.
void ApplyMemorySettings(std::optional<std::string_view> device_memory,
                         std::optional<std::string_view> host_memory, Config* config);

// Sets device_modules and ballast from SPILLWAY_DEVICE_MODULES and SPILLWAY_BALLAST (nullopt =
// unset). A ballast value other than 0/1 adds a line to `problems`; the default (off) stays.
void ApplyBackingSettings(std::optional<std::string_view> device_modules,
                          std::optional<std::string_view> ballast, Config* config);

// Sets ballast_headroom from SPILLWAY_BALLAST_HEADROOM (nullopt or empty = unset): a size. A value
// that is not one adds a line to `problems`; the default (5% of the device) stays.
void ApplyBallastHeadroom(std::optional<std::string_view> headroom, Config* config);

// Sets eviction from SPILLWAY_EVICTION (nullopt or empty = unset). A value other than
// learned/lru/none adds a line to `problems` naming the variable and the value; the default
// (learned) stays.
// Also sets lookahead from SPILLWAY_LOOKAHEAD ("auto": sized from observed times, or an integer
// 0..64: a fixed count; another value: a problem line, default kept).
void ApplyEvictionSetting(std::optional<std::string_view> eviction,
                          std::optional<std::string_view> lookahead, Config* config);

// Sets online_plan and online_plan_inline from SPILLWAY_ONLINE_PLAN (nullopt or empty = unset).
// A value other than 0, 1 or inline adds a line to `problems`; the default (1) stays.
void ApplyOnlinePlanSetting(std::optional<std::string_view> online_plan, Config* config);

// Splits a comma-separated module list, dropping surrounding spaces and empty entries.
std::vector<std::string> ParseModuleList(std::string_view text);

// MakeConfig, ApplyMemorySettings and ApplyBackingSettings over the process environment (an environ
// scan, no getenv).
Config ReadConfigFromEnvironment();

// Replaces every "%p" in `path` with `pid`.
std::string ExpandSummaryPath(std::string_view path, long pid);

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CONFIG_H_
