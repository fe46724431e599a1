// Helpers for the trace tests: a temporary file path, a trace with one record of every kind
// (distinctive field values), reading a whole trace back, and a record's encoded bytes (two
// records are equal when their encodings are).
#ifndef SPILLWAY_TESTS_PROFILER_TRACE_TEST_UTIL_H_
#define SPILLWAY_TESTS_PROFILER_TRACE_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/trace/trace_reader.h"
#include "profiler/trace/trace_wire.h"
#include "profiler/trace/trace_writer.h"

namespace spillway::trace::testing {

// A path in the test's temporary directory, removed by the destructor.
class TempPath {
 public:
  explicit TempPath(const std::string& name) {
    const char* dir = std::getenv("TEST_TMPDIR");
    path_ =
        std::string(dir != nullptr ? dir : "/tmp") + "/" + name + "." + std::to_string(::getpid());
  }
  ~TempPath() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The payload encoding of a record (with its kind), to compare records field by field.
inline std::string Encoded(const Record& record) {
  return std::visit(
      [](const auto& r) {
        const size_t payload = wire::PayloadBytes(r);
        std::string out(wire::kFrameBytes + payload, '\0');
        wire::EncodeRecord(r, payload, out.data());
        return out;
      },
      record);
}

// Every record of a trace after the header, encoded; or the reader's error.
inline absl::StatusOr<std::vector<std::string>> ReadAllEncoded(const std::string& path) {
  auto reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::vector<std::string> out;
  Record record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    out.push_back(Encoded(record));
  }
  return out;
}

inline HeaderRecord TestHeader() {
  HeaderRecord h;
  h.job = "train.py --epochs 3";
  h.device_name = "simgpu";
  h.cuda_version = "12.4";
  h.driver_version = "12.4 (simgpu)";
  h.spillway_version = "0.1.0";
  h.device_memory_bytes = 16ull << 30;
  h.start_ns = 123456789;
  h.start_unix_ns = 1700000000000000000ull;
  h.pid = 31337;
  return h;
}

// One record of every kind a caller writes, in writing order (definitions excluded: they come
// from the writer's Intern* calls). The spans point to static storage.
inline std::vector<Record> OneOfEachKind(StringId function, CallSiteId site) {
  static const AccessRecord kAccesses[] = {{7, 0, 4096}, {9, 512, 0}, {~0ull, ~0ull, ~0ull}};
  std::vector<Record> records;
  records.push_back(
      AllocRecord{1000, 11, AllocKind::kManaged, 0x7f0000001000, 1 << 20, 3, site, 7});
  records.push_back(AllocRecord{1001, 11, AllocKind::kOther, ~0ull, ~0ull, ~0ull, 0, 9});
  LaunchRecord launch;
  launch.time_ns = 1002;
  launch.thread = 12;
  launch.stream = 3;
  launch.function = 0xdeadbeef;
  launch.function_name = function;
  launch.grid[0] = 1024, launch.grid[1] = 2, launch.grid[2] = 3;
  launch.block[0] = 256, launch.block[1] = 1, launch.block[2] = 4;
  launch.shared_memory_bytes = 48 << 10;
  launch.correlation_id = 77;
  launch.accesses = kAccesses;
  static const uint8_t kModes[] = {kAccessRead, kAccessWrite, kAccessReadWrite};
  launch.access_modes = kModes;  // since 1.2
  records.push_back(launch);
  launch.access_modes = {};  // a launch of a recording that cannot tell how it uses its accesses
  records.push_back(launch);
  records.push_back(LaunchRecord{});  // no accesses
  records.push_back(
      MemcpyRecord{1003, 11, CopyDirection::kDeviceToHost, true, 0x1000, 0x7f00, 4096, 3, 78});
  records.push_back(MemsetRecord{1004, 11, false, 0x2000, 8192, 0xab, 4, 0, 79});
  records.push_back(SynchronizeRecord{1005, 1500, 11, SyncWhat::kEvent, 0xe7});
  records.push_back(GraphLaunchRecord{1006, 13, 0x9a, 3, 80, kAccesses});
  records.push_back(GraphLaunchRecord{1009, 13, 0x9b, 3, 81, {}});  // no accesses
  records.push_back(ModuleLoadRecord{1007, 11, 0x5c, "/opt/kernels/attention.cubin"});
  records.push_back(ModuleLoadRecord{1008, 11, 0x5d, ""});
  records.push_back(
      KernelTimeRecord{77, 1010, 1900, 1, 3, Activity::kKernel, KernelTimeRecord::kEvents});
  records.push_back(
      KernelTimeRecord{78, 1011, 1100, 0, 3, Activity::kMemcpy, KernelTimeRecord::kCupti});
  records.push_back(
      UvmCounterRecord{UvmKind::kMigrateToHost, 1200, 1300, 0x7f0000001000, 2 << 20, 1, 3, 0});
  records.push_back(UvmCounterRecord{UvmKind::kRemoteMap, 1201, 0, 1, 0, 5, 0, 2});
  records.push_back(ResidentRecord{1400, 3ull << 30});
  records.push_back(FreeRecord{1500, 14, 0x7f0000001000, 7, 3});
  return records;
}

inline void WriteRecord(TraceWriter& writer, const Record& record) {
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (requires { writer.Write(r); }) {
          writer.Write(r);
        } else {
          (void)sizeof(T);
        }
      },
      record);
}

}  // namespace spillway::trace::testing

#endif  // SPILLWAY_TESTS_PROFILER_TRACE_TEST_UTIL_H_
