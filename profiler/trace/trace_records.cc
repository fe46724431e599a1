// Names of the trace's record kinds and enum values (trace_records.h), and the preamble and frame
// encoders of trace_wire.h.
#include "profiler/trace/trace_records.h"

#include <cstring>

#include "profiler/trace/trace_wire.h"

namespace spillway::trace {

namespace {

uint64_t Fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

}  // namespace

CallSiteId HashCallSite(absl::Span<const Frame> frames,
                        absl::FunctionRef<absl::string_view(ModuleId)> build_id) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const Frame& frame : frames) {
    const absl::string_view id = build_id(frame.module);
    const uint32_t length = static_cast<uint32_t>(id.size());
    hash = Fnv1a(hash, &length, sizeof(length));
    hash = Fnv1a(hash, id.data(), id.size());
    hash = Fnv1a(hash, &frame.offset, sizeof(frame.offset));
  }
  return hash == 0 ? 1 : hash;
}

const char* RecordKindName(RecordKind kind) {
  switch (kind) {
    case RecordKind::kHeader:
      return "header";
    case RecordKind::kString:
      return "string";
    case RecordKind::kModule:
      return "module";
    case RecordKind::kCallSite:
      return "call site";
    case RecordKind::kAlloc:
      return "alloc";
    case RecordKind::kFree:
      return "free";
    case RecordKind::kLaunch:
      return "launch";
    case RecordKind::kMemcpy:
      return "memcpy";
    case RecordKind::kMemset:
      return "memset";
    case RecordKind::kSynchronize:
      return "synchronize";
    case RecordKind::kGraphLaunch:
      return "graph launch";
    case RecordKind::kModuleLoad:
      return "module load";
    case RecordKind::kKernelTime:
      return "kernel time";
    case RecordKind::kUvmCounter:
      return "uvm counter";
    case RecordKind::kResident:
      return "resident";
    case RecordKind::kEnd:
      return "end";
  }
  return "unknown";
}

const char* AllocKindName(AllocKind kind) {
  switch (kind) {
    case AllocKind::kDevice:
      return "device";
    case AllocKind::kManaged:
      return "managed";
    case AllocKind::kAsync:
      return "async";
    case AllocKind::kHost:
      return "host";
    case AllocKind::kOther:
      return "other";
  }
  return "unknown";
}

const char* CopyDirectionName(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kUnknown:
      return "";
    case CopyDirection::kHostToDevice:
      return "HtoD";
    case CopyDirection::kDeviceToHost:
      return "DtoH";
    case CopyDirection::kDeviceToDevice:
      return "DtoD";
    case CopyDirection::kHostToHost:
      return "HtoH";
    case CopyDirection::kDefault:
      return "Default";
    case CopyDirection::kPeer:
      return "PtoP";
  }
  return "";
}

const char* SyncWhatName(SyncWhat what) {
  switch (what) {
    case SyncWhat::kContext:
      return "context";
    case SyncWhat::kStream:
      return "stream";
    case SyncWhat::kEvent:
      return "event";
    case SyncWhat::kDevice:
      return "device";
  }
  return "unknown";
}

const char* UvmKindName(UvmKind kind) {
  switch (kind) {
    case UvmKind::kGpuPageFault:
      return "gpu page fault";
    case UvmKind::kCpuPageFault:
      return "cpu page fault";
    case UvmKind::kMigrateToDevice:
      return "migrate to device";
    case UvmKind::kMigrateToHost:
      return "migrate to host";
    case UvmKind::kThrashing:
      return "thrashing";
    case UvmKind::kThrottling:
      return "throttling";
    case UvmKind::kRemoteMap:
      return "remote map";
  }
  return "unknown";
}

namespace wire {

void EncodePreamble(char out[kPreambleBytes]) {
  std::memcpy(out, kMagic, sizeof(kMagic));
  const uint16_t major = kFormatMajor, minor = kFormatMinor;
  const uint32_t length = kPreambleBytes;
  std::memcpy(out + 8, &major, 2);
  std::memcpy(out + 10, &minor, 2);
  std::memcpy(out + 12, &length, 4);
}

void EncodeFrame(RecordKind kind, uint32_t payload_bytes, char out[kFrameBytes]) {
  const uint16_t raw_kind = static_cast<uint16_t>(kind), flags = 0;
  std::memcpy(out, &raw_kind, 2);
  std::memcpy(out + 2, &flags, 2);
  std::memcpy(out + 4, &payload_bytes, 4);
}

}  // namespace wire
}  // namespace spillway::trace
