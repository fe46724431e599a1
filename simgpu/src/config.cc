// simgpu's configuration from SIMGPU_* environment variables, its statistics counters and the
// stats JSON written at process exit (SIMGPU_STATS).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "common/calibration.h"
#include "common/env.h"
#include "common/json_writer.h"
#include "common/output_file.h"
#include "common/size.h"
#include "simgpu_internal.h"

namespace simgpu {
namespace {

Config* g_config = new Config();

void ReadSize(const char* name, uint64_t* value) {
  std::optional<std::string_view> text = spillway::GetEnv(name);
  if (!text.has_value() || text->empty()) return;
  absl::StatusOr<uint64_t> parsed = spillway::ParseSize(*text);
  if (!parsed.ok() || *parsed == 0) {
    std::string why =
        parsed.ok() ? std::string("must be positive") : std::string(parsed.status().message());
    std::fprintf(stderr, "simgpu: %s='%.*s' is not a valid size (%s); using the default %llu\n",
                 name, static_cast<int>(text->size()), text->data(), why.c_str(),
                 static_cast<unsigned long long>(*value));
    return;
  }
  *value = *parsed;
}

// A whole number from 0 to `max`.
void ReadCount(const char* name, uint32_t max, uint32_t* value) {
  std::optional<std::string_view> text = spillway::GetEnv(name);
  if (!text.has_value() || text->empty()) return;
  std::string s(*text);
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || s[0] == '-' || v > max) {
    std::fprintf(stderr,
                 "simgpu: %s='%s' is not a whole number from 0 to %u; using the default %u\n", name,
                 s.c_str(), max, *value);
    return;
  }
  *value = static_cast<uint32_t>(v);
}

// `name`'s value times `scale` into `*value` when it is a number in [lo, hi] (in the variable's
// own unit); else one line naming the variable, the range and the default kept. A setting whose
// default is 0 accepts 0 (lo = 0); the others must be positive.
void ReadDouble(const char* name, double scale, double* value, double lo, double hi) {
  std::optional<std::string_view> text = spillway::GetEnv(name);
  if (!text.has_value() || text->empty()) return;
  std::string s(*text);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const bool number = end != s.c_str() && *end == '\0' && std::isfinite(v);
  const bool in_range = number && (lo == 0 ? v >= 0 : v > 0) && v >= lo && v <= hi;
  if (!in_range) {
    std::fprintf(stderr, "simgpu: %s='%s' is not a number from %g to %g; using the default %g\n",
                 name, s.c_str(), lo, hi, *value / scale);
    return;
  }
  *value = v * scale;
}

}  // namespace

Config ReadConfig() {
  Config c;
  // A calibration first: the variables below, more specific, override its figures.
  if (std::optional<std::string_view> path = spillway::GetEnv("SIMGPU_CALIBRATION");
      path.has_value() && !path->empty()) {
    absl::StatusOr<spillway::Calibration> cal = spillway::ReadCalibration(std::string(*path));
    if (!cal.ok()) {
      std::string msg(cal.status().message());
      std::fprintf(stderr, "simgpu: SIMGPU_CALIBRATION: %s; using the defaults\n", msg.c_str());
    } else {
      static_cast<spillway::CostModel&>(c) = cal->cost;
      if (const std::string w = spillway::GranuleWarning(*cal); !w.empty()) {
        std::fprintf(stderr, "simgpu: SIMGPU_CALIBRATION: %s\n", w.c_str());
      }
    }
  }
  ReadSize("SIMGPU_MEMORY", &c.capacity_bytes);
  ReadDouble("SIMGPU_H2D_GBPS", 1e9, &c.h2d_bytes_per_s, 1e-3, 1e4);
  ReadDouble("SIMGPU_D2H_GBPS", 1e9, &c.d2h_bytes_per_s, 1e-3, 1e4);
  ReadDouble("SIMGPU_D2D_GBPS", 1e9, &c.d2d_bytes_per_s, 1e-3, 1e5);
  ReadDouble("SIMGPU_FAULT_BATCH_US", 1e-6, &c.fault_batch_seconds, 1e-3, 1e6);
  ReadSize("SIMGPU_FAULT_BATCH_BYTES", &c.fault_batch_bytes);
  ReadDouble("SIMGPU_DEFAULT_KERNEL_SECONDS", 1, &c.default_kernel_seconds, 1e-9, 10);
  double engines = c.copy_engines;
  ReadDouble("SIMGPU_COPY_ENGINES", 1, &engines, 1, 2);
  c.copy_engines = engines >= 2 ? 2 : 1;
  double devices = c.devices;
  ReadDouble("SIMGPU_DEVICES", 1, &devices, 1e-9, 1e9);  // whole and in range: below
  if (devices != static_cast<int>(devices) || devices > kMaxDevices) {
    std::fprintf(stderr, "simgpu: SIMGPU_DEVICES=%g is not a whole number from 1 to %d; using 1\n",
                 devices, kMaxDevices);
    devices = 1;
  }
  c.devices = static_cast<int>(devices);
  ReadCount("SIMGPU_QUEUE_DEPTH", 1u << 20, &c.queue_depth);
  ReadCount("SIMGPU_MANAGED_POOL_CREATE", 1, &c.managed_pool_create);
  // At most a second a kernel: a real hold is hundreds of microseconds, and more would stall a job
  // for good (1e30 used to be taken as 10 s a kernel).
  ReadDouble("SIMGPU_HOLD_KERNEL_US", 1e-6, &c.hold_kernel_seconds, 0, 1e6);
  if (std::optional<std::string_view> p = spillway::GetEnv("SIMGPU_STATS")) c.stats_path = *p;
  return c;
}

int DriverVersion() {
  static const int version = [] {
    const std::optional<std::string_view> text = spillway::GetEnv("SIMGPU_DRIVER_VERSION");
    if (!text.has_value() || text->empty()) return CUDA_VERSION;
    const std::string s(*text);
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0' || v < 11030 || v > CUDA_VERSION || v % 10 != 0) {
      std::fprintf(stderr,
                   "simgpu: SIMGPU_DRIVER_VERSION='%s' is not a CUDA version from 11030 to %d "
                   "(e.g. 12040 for 12.4); using %d\n",
                   s.c_str(), CUDA_VERSION, CUDA_VERSION);
      return CUDA_VERSION;
    }
    return static_cast<int>(v);
  }();
  return version;
}

const Config& config() { return *g_config; }
void SetConfig(const Config& c) { *g_config = c; }

Stats& stats() {
  static Stats* s = new Stats();
  return *s;
}

namespace {

// The counters at a context synchronize; at most kMaxContextSyncs are kept (the first ones).
struct ContextSync {
  uint64_t kernels_launched, fault_bytes, capacity_evicted_bytes;
  double virtual_seconds;
};
constexpr size_t kMaxContextSyncs = 100000;
std::mutex& ContextSyncMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::vector<ContextSync>& ContextSyncs() {
  static std::vector<ContextSync>* syncs = new std::vector<ContextSync>();
  return *syncs;
}

}  // namespace

void NoteContextSync() {
  if (config().stats_path.empty()) return;
  Stats& s = stats();
  const ContextSync sync{s.kernels_launched.load(), s.fault_bytes.load(),
                         s.capacity_evicted_bytes.load(), VirtualSeconds()};
  std::lock_guard lock(ContextSyncMutex());
  if (ContextSyncs().size() < kMaxContextSyncs) ContextSyncs().push_back(sync);
}

void WriteStatsFile() {
  const Config& c = config();
  if (c.stats_path.empty()) return;
  Stats& s = stats();
  spillway::JsonWriter w;
  w.BeginObject();
  w.Key("device_name").String("simgpu");
  w.Key("device_capacity_bytes").Uint(c.capacity_bytes);
  w.Key("devices").Uint(static_cast<uint64_t>(c.devices));
  w.Key("peak_resident_bytes").Uint(s.peak_resident_bytes.load());
  w.Key("peak_resident_bytes_by_device").BeginArray();
  for (int d = 0; d < c.devices; ++d) w.Uint(s.peak_resident_bytes_by_device[d].load());
  w.EndArray();
  w.Key("resident_bytes_at_exit").Uint(ResidentBytes());
  w.Key("device_alloc_bytes_peak").Uint(s.device_alloc_bytes_peak.load());
  w.Key("managed_alloc_bytes_peak").Uint(s.managed_alloc_bytes_peak.load());
  w.Key("demand_faults").BeginObject();
  w.Key("count").Uint(s.fault_count.load());
  w.Key("bytes").Uint(s.fault_bytes.load());
  w.Key("batches").Uint(s.fault_batches.load());
  w.EndObject();
  w.Key("prefetched_bytes").Uint(s.prefetched_bytes.load());
  w.Key("zero_filled_bytes").Uint(s.zero_filled_bytes.load());
  w.Key("evicted_bytes").Uint(s.evicted_bytes.load());
  w.Key("capacity_evicted_bytes").Uint(s.capacity_evicted_bytes.load());
  w.Key("discarded_bytes").Uint(s.discarded_bytes.load());
  w.Key("remote_mapped_bytes").Uint(s.remote_mapped_bytes.load());
  w.Key("host_opened_chunks").Uint(s.host_opened_chunks.load());
  w.Key("overcommit_faults").Uint(s.overcommit_faults.load());
  w.Key("memcpy_bytes").Uint(s.memcpy_bytes.load());
  w.Key("kernels_launched").Uint(s.kernels_launched.load());
  w.Key("virtual_seconds").Double(VirtualSeconds());
  w.Key("context_syncs").BeginArray();
  {
    std::lock_guard lock(ContextSyncMutex());
    for (const ContextSync& sync : ContextSyncs()) {
      w.BeginObject();
      w.Key("kernels_launched").Uint(sync.kernels_launched);
      w.Key("demand_fault_bytes").Uint(sync.fault_bytes);
      w.Key("capacity_evicted_bytes").Uint(sync.capacity_evicted_bytes);
      w.Key("virtual_seconds").Double(sync.virtual_seconds);
      w.EndObject();
    }
  }
  w.EndArray();
  w.EndObject();
  absl::Status st = spillway::WriteFileAtomically(c.stats_path, w.str() + "\n");
  if (!st.ok()) {
    std::string msg(st.message());
    std::fprintf(stderr, "simgpu: cannot write SIMGPU_STATS: %s\n", msg.c_str());
  }
}

}  // namespace simgpu
