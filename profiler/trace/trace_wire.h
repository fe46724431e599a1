// The byte layout of a spillway trace (docs/trace-format.md): the file preamble, the record frame,
// and each record kind's payload, defined once per kind as a list of fields (FieldsOf) that
// sizing, encoding (writer) and bounds-checked decoding (reader) all walk. Internal to
// profiler/trace/.
#ifndef SPILLWAY_PROFILER_TRACE_TRACE_WIRE_H_
#define SPILLWAY_PROFILER_TRACE_TRACE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "profiler/trace/trace_records.h"

namespace spillway::trace::wire {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the trace format is little-endian");

// Preamble: magic, u16 major, u16 minor, u32 preamble length (bytes, >= 16).
inline constexpr char kMagic[8] = {'S', 'P', 'W', 'T', 'R', 'A', 'C', 'E'};
inline constexpr size_t kPreambleBytes = 16;
// Frame: u16 kind, u16 flags (0), u32 payload length; the payload follows.
inline constexpr size_t kFrameBytes = 8;
// No payload is longer (a longer length is corrupt).
inline constexpr uint32_t kMaxPayloadBytes = 16u << 20;

void EncodePreamble(char out[kPreambleBytes]);
void EncodeFrame(RecordKind kind, uint32_t payload_bytes, char out[kFrameBytes]);

template <typename RecordT>
struct KindOf;
#define SPILLWAY_TRACE_KIND(Type, Kind)                    \
  template <>                                              \
  struct KindOf<Type> {                                    \
    static constexpr RecordKind kValue = RecordKind::Kind; \
  };
SPILLWAY_TRACE_KIND(HeaderRecord, kHeader)
SPILLWAY_TRACE_KIND(StringRecord, kString)
SPILLWAY_TRACE_KIND(ModuleRecord, kModule)
SPILLWAY_TRACE_KIND(CallSiteRecord, kCallSite)
SPILLWAY_TRACE_KIND(AllocRecord, kAlloc)
SPILLWAY_TRACE_KIND(FreeRecord, kFree)
SPILLWAY_TRACE_KIND(LaunchRecord, kLaunch)
SPILLWAY_TRACE_KIND(MemcpyRecord, kMemcpy)
SPILLWAY_TRACE_KIND(MemsetRecord, kMemset)
SPILLWAY_TRACE_KIND(SynchronizeRecord, kSynchronize)
SPILLWAY_TRACE_KIND(GraphLaunchRecord, kGraphLaunch)
SPILLWAY_TRACE_KIND(ModuleLoadRecord, kModuleLoad)
SPILLWAY_TRACE_KIND(KernelTimeRecord, kKernelTime)
SPILLWAY_TRACE_KIND(UvmCounterRecord, kUvmCounter)
SPILLWAY_TRACE_KIND(ResidentRecord, kResident)
SPILLWAY_TRACE_KIND(EndRecord, kEnd)
#undef SPILLWAY_TRACE_KIND

// The largest valid value of each enum stored in a payload (a larger one is corrupt).
constexpr uint8_t MaxValue(AllocKind) { return 4; }
constexpr uint8_t MaxValue(CopyDirection) { return 6; }
constexpr uint8_t MaxValue(SyncWhat) { return 3; }
constexpr uint8_t MaxValue(Activity) { return 2; }
constexpr uint8_t MaxValue(KernelTimeRecord::Source) { return 1; }
constexpr uint8_t MaxValue(UvmKind) { return 6; }
constexpr uint8_t MaxValue(bool) { return 1; }

// Each payload's fields, in order. R is the record type, const or not; V has Field() overloads
// for unsigned integers, enums, bool, absl::string_view, and the Frame/AccessRecord spans.
template <typename V, typename R>
void FieldsOf(V& v, R& r) {
  using T = std::remove_const_t<R>;
  if constexpr (std::is_same_v<T, HeaderRecord>) {
    v.Field(r.job), v.Field(r.device_name), v.Field(r.cuda_version), v.Field(r.driver_version),
        v.Field(r.spillway_version), v.Field(r.device_memory_bytes), v.Field(r.start_ns),
        v.Field(r.start_unix_ns), v.Field(r.pid);
  } else if constexpr (std::is_same_v<T, StringRecord>) {
    v.Field(r.id), v.Field(r.text);
  } else if constexpr (std::is_same_v<T, ModuleRecord>) {
    v.Field(r.id), v.Field(r.build_id), v.Field(r.path);
  } else if constexpr (std::is_same_v<T, CallSiteRecord>) {
    v.Field(r.id), v.Field(r.frames);
  } else if constexpr (std::is_same_v<T, AllocRecord>) {
    v.Field(r.time_ns), v.Field(r.thread), v.Field(r.kind), v.Field(r.address), v.Field(r.bytes),
        v.Field(r.stream), v.Field(r.call_site), v.Field(r.allocation_id);
  } else if constexpr (std::is_same_v<T, FreeRecord>) {
    v.Field(r.time_ns), v.Field(r.thread), v.Field(r.address), v.Field(r.allocation_id),
        v.Field(r.stream);
  } else if constexpr (std::is_same_v<T, LaunchRecord>) {
    v.Field(r.time_ns), v.Field(r.thread), v.Field(r.stream), v.Field(r.function),
        v.Field(r.function_name), v.Field(r.grid[0]), v.Field(r.grid[1]), v.Field(r.grid[2]),
        v.Field(r.block[0]), v.Field(r.block[1]), v.Field(r.block[2]),
        v.Field(r.shared_memory_bytes), v.Field(r.correlation_id), v.Field(r.accesses),
        v.Optional(r.access_modes);
  } else if constexpr (std::is_same_v<T, MemcpyRecord>) {
    v.Field(r.time_ns), v.Field(r.thread), v.Field(r.direction), v.Field(r.async), v.Field(r.dst),
        v.Field(r.src), v.Field(r.bytes), v.Field(r.stream), v.Field(r.correlation_id);
  } else if constexpr (std::is_same_v<T, MemsetRecord>) {
    v.Field(r.time_ns), v.Field(r.thread), v.Field(r.async), v.Field(r.dst), v.Field(r.bytes),
        v.Field(r.value), v.Field(r.element_bytes), v.Field(r.stream), v.Field(r.correlation_id);
  } else if constexpr (std::is_same_v<T, SynchronizeRecord>) {
    v.Field(r.time_ns), v.Field(r.end_ns), v.Field(r.thread), v.Field(r.what), v.Field(r.handle);
  } else if constexpr (std::is_same_v<T, GraphLaunchRecord>) {
    v.Field(r.time_ns), v.Field(r.thread), v.Field(r.graph_exec), v.Field(r.stream),
        v.Field(r.correlation_id), v.Trailing(r.accesses);
  } else if constexpr (std::is_same_v<T, ModuleLoadRecord>) {
    v.Field(r.time_ns), v.Field(r.thread), v.Field(r.module), v.Field(r.name);
  } else if constexpr (std::is_same_v<T, KernelTimeRecord>) {
    v.Field(r.correlation_id), v.Field(r.start_ns), v.Field(r.end_ns), v.Field(r.device),
        v.Field(r.stream), v.Field(r.activity), v.Field(r.source);
  } else if constexpr (std::is_same_v<T, UvmCounterRecord>) {
    v.Field(r.kind), v.Field(r.start_ns), v.Field(r.end_ns), v.Field(r.address), v.Field(r.bytes),
        v.Field(r.count), v.Field(r.cause), v.Field(r.device);
  } else if constexpr (std::is_same_v<T, ResidentRecord>) {
    v.Field(r.time_ns), v.Field(r.bytes);
  } else if constexpr (std::is_same_v<T, EndRecord>) {
    v.Field(r.end_ns), v.Field(r.records_written), v.Field(r.records_dropped);
  } else {
    static_assert(sizeof(T) == 0, "not a trace record");
  }
}

// Bytes of a Frame and an AccessRecord on the wire.
inline constexpr size_t kFrameWireBytes = 4 + 8;
inline constexpr size_t kAccessWireBytes = 8 + 8 + 8;

// Sizes a payload.
struct SizeVisitor {
  size_t bytes = 0;
  template <typename T>
  void Field(const T&) {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>);
    bytes += sizeof(T);
  }
  void Field(absl::string_view s) { bytes += 4 + s.size(); }
  void Field(absl::Span<const Frame> f) { bytes += 4 + f.size() * kFrameWireBytes; }
  void Field(absl::Span<const AccessRecord> a) { bytes += 4 + a.size() * kAccessWireBytes; }
  void Field(absl::Span<const uint8_t> b) { bytes += 4 + b.size(); }
  template <typename T>
  void Trailing(const T& value) {
    Field(value);
  }
  // An appended list written only when it has elements (absent reads as empty).
  template <typename T>
  void Optional(const T& value) {
    if (!value.empty()) Field(value);
  }
};

template <typename RecordT>
size_t PayloadBytes(const RecordT& record) {
  SizeVisitor v;
  FieldsOf(v, record);
  return v.bytes;
}

// Encodes a payload into `out` (PayloadBytes(record) bytes).
struct EncodeVisitor {
  char* out;
  template <typename T>
  void Field(const T& value) {
    std::memcpy(out, &value, sizeof(T));
    out += sizeof(T);
  }
  void Field(absl::string_view s) {
    Field(static_cast<uint32_t>(s.size()));
    if (!s.empty()) std::memcpy(out, s.data(), s.size());
    out += s.size();
  }
  void Field(absl::Span<const Frame> frames) {
    Field(static_cast<uint32_t>(frames.size()));
    for (const Frame& f : frames) Field(f.module), Field(f.offset);
  }
  void Field(absl::Span<const AccessRecord> accesses) {
    Field(static_cast<uint32_t>(accesses.size()));
    for (const AccessRecord& a : accesses) Field(a.allocation_id), Field(a.offset), Field(a.bytes);
  }
  void Field(absl::Span<const uint8_t> bytes) {
    Field(static_cast<uint32_t>(bytes.size()));
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
    out += bytes.size();
  }
  template <typename T>
  void Trailing(const T& value) {
    Field(value);
  }
  template <typename T>
  void Optional(const T& value) {
    if (!value.empty()) Field(value);
  }
};

// Encodes frame + payload into `out`, which has room for kFrameBytes + PayloadBytes(record).
template <typename RecordT>
void EncodeRecord(const RecordT& record, size_t payload_bytes, char* out) {
  EncodeFrame(KindOf<RecordT>::kValue, static_cast<uint32_t>(payload_bytes), out);
  EncodeVisitor v{out + kFrameBytes};
  FieldsOf(v, record);
}

// Decodes a payload with bounds checks. Views point into the payload; spans into the storage
// vectors. On failure `error` says which field was short or invalid.
struct DecodeVisitor {
  absl::string_view in;
  std::vector<Frame>* frames = nullptr;
  std::vector<AccessRecord>* accesses = nullptr;
  std::vector<uint8_t>* modes = nullptr;
  const char* error = nullptr;

  bool Take(size_t n, const char* what) {
    if (error != nullptr) return false;
    if (in.size() < n) {
      error = what;
      return false;
    }
    return true;
  }
  template <typename T>
  void Field(T& value) {
    if constexpr (std::is_enum_v<T> || std::is_same_v<T, bool>) {
      if (!Take(1, "payload too short")) return;
      const uint8_t raw = static_cast<uint8_t>(in[0]);
      in.remove_prefix(1);
      if (raw > MaxValue(T{})) {
        error = "enum value out of range";
        return;
      }
      value = static_cast<T>(raw);
    } else {
      static_assert(std::is_integral_v<T>);
      if (!Take(sizeof(T), "payload too short")) return;
      std::memcpy(&value, in.data(), sizeof(T));
      in.remove_prefix(sizeof(T));
    }
  }
  void Field(absl::string_view& s) {
    uint32_t n = 0;
    Field(n);
    if (!Take(n, "string longer than its record")) return;
    s = in.substr(0, n);
    in.remove_prefix(n);
  }
  void Field(absl::Span<const Frame>& out) {
    uint32_t n = 0;
    Field(n);
    if (error != nullptr) return;
    if (n > kMaxFrames) {
      error = "too many frames";
      return;
    }
    if (!Take(size_t{n} * kFrameWireBytes, "frame list longer than its record")) return;
    frames->resize(n);
    for (Frame& f : *frames) Field(f.module), Field(f.offset);
    out = absl::MakeConstSpan(*frames);
  }
  void Field(absl::Span<const AccessRecord>& out) {
    uint32_t n = 0;
    Field(n);
    if (error != nullptr) return;
    if (!Take(size_t{n} * kAccessWireBytes, "access list longer than its record")) return;
    accesses->resize(n);
    for (AccessRecord& a : *accesses) Field(a.allocation_id), Field(a.offset), Field(a.bytes);
    out = absl::MakeConstSpan(*accesses);
  }
  // Access modes: as many as the accesses decoded just before, each at most kMaxAccessMode.
  void Field(absl::Span<const uint8_t>& out) {
    uint32_t n = 0;
    Field(n);
    if (error != nullptr) return;
    if (accesses == nullptr || n != accesses->size()) {
      error = "access modes do not match the accesses one for one";
      return;
    }
    if (!Take(n, "access mode list longer than its record")) return;
    modes->assign(in.begin(), in.begin() + n);
    in.remove_prefix(n);
    for (const uint8_t m : *modes) {
      if (m > kMaxAccessMode) {
        error = "access mode out of range";
        return;
      }
    }
    out = absl::MakeConstSpan(*modes);
  }
  // A field a later minor appended: absent (left as default) where the payload ends before it.
  template <typename T>
  void Trailing(T& value) {
    if (error == nullptr && !in.empty()) Field(value);
  }
  template <typename T>
  void Optional(T& value) {
    Trailing(value);
  }
};

}  // namespace spillway::trace::wire

#endif  // SPILLWAY_PROFILER_TRACE_TRACE_WIRE_H_
