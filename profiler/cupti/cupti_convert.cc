// Conversions from CUPTI activity records to trace records (cupti_convert.h).
#include "profiler/cupti/cupti_convert.h"

#include <bit>

namespace spillway::cupti {
namespace {

trace::KernelTimeRecord DeviceTime(uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                                   uint64_t correlation_id, trace::Activity activity,
                                   int64_t offset_ns) {
  trace::KernelTimeRecord out;
  out.correlation_id = correlation_id;
  out.start_ns = ToTraceClock(start, offset_ns);
  out.end_ns = ToTraceClock(end, offset_ns);
  out.device = device;
  out.stream = stream;
  out.activity = activity;
  out.source = trace::KernelTimeRecord::kCupti;
  return out;
}

uint32_t LowestDevice(uint32_t mask) {
  return mask == 0 ? 0 : static_cast<uint32_t>(std::countr_zero(mask));
}

}  // namespace

uint64_t ToTraceClock(uint64_t cupti_ns, int64_t offset_ns) {
  if (cupti_ns == 0) return 0;
  return cupti_ns + static_cast<uint64_t>(offset_ns);
}

trace::KernelTimeRecord KernelTime(const CUpti_ActivityKernel10& kernel, uint64_t correlation_id,
                                   int64_t offset_ns) {
  return DeviceTime(kernel.start, kernel.end, kernel.deviceId, kernel.streamId, correlation_id,
                    trace::Activity::kKernel, offset_ns);
}

trace::KernelTimeRecord MemcpyTime(const CUpti_ActivityMemcpy6& memcpy, uint64_t correlation_id,
                                   int64_t offset_ns) {
  return DeviceTime(memcpy.start, memcpy.end, memcpy.deviceId, memcpy.streamId, correlation_id,
                    trace::Activity::kMemcpy, offset_ns);
}

trace::KernelTimeRecord MemsetTime(const CUpti_ActivityMemset4& memset, uint64_t correlation_id,
                                   int64_t offset_ns) {
  return DeviceTime(memset.start, memset.end, memset.deviceId, memset.streamId, correlation_id,
                    trace::Activity::kMemset, offset_ns);
}

std::optional<trace::UvmKind> UvmKindOf(CUpti_ActivityUnifiedMemoryCounterKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
      return trace::UvmKind::kGpuPageFault;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
      return trace::UvmKind::kCpuPageFault;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
      return trace::UvmKind::kMigrateToDevice;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
      return trace::UvmKind::kMigrateToHost;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING:
      return trace::UvmKind::kThrashing;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING:
      return trace::UvmKind::kThrottling;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP:
      return trace::UvmKind::kRemoteMap;
    default:
      return std::nullopt;
  }
}

std::optional<trace::UvmCounterRecord> UvmCounter(const CUpti_ActivityUnifiedMemoryCounter3& record,
                                                  int64_t offset_ns) {
  const std::optional<trace::UvmKind> kind = UvmKindOf(record.counterKind);
  if (!kind.has_value()) return std::nullopt;
  trace::UvmCounterRecord out;
  out.kind = *kind;
  out.start_ns = ToTraceClock(record.start, offset_ns);
  out.address = record.address;
  switch (*kind) {
    case trace::UvmKind::kGpuPageFault:
      out.end_ns = ToTraceClock(record.end, offset_ns);
      out.count = record.value;
      out.cause = record.flags;
      out.device = record.srcId;
      break;
    case trace::UvmKind::kCpuPageFault:
      break;  // value is the faulting PC; end, source and destination are not defined
    case trace::UvmKind::kMigrateToDevice:
      out.end_ns = ToTraceClock(record.end, offset_ns);
      out.bytes = record.value;
      out.cause = record.flags;
      out.device = record.dstId;
      break;
    case trace::UvmKind::kMigrateToHost:
      out.end_ns = ToTraceClock(record.end, offset_ns);
      out.bytes = record.value;
      out.cause = record.flags;
      out.device = record.srcId;
      break;
    case trace::UvmKind::kThrashing:
      out.bytes = record.value;
      out.device = LowestDevice(record.srcId);
      break;
    case trace::UvmKind::kThrottling:
      out.end_ns = ToTraceClock(record.end, offset_ns);
      out.device = record.srcId;
      break;
    case trace::UvmKind::kRemoteMap:
      out.bytes = record.value;
      out.cause = record.flags;
      out.device = record.dstId;
      break;
  }
  return out;
}

const char* UvmCauseName(trace::UvmKind kind, uint32_t cause) {
  switch (kind) {
    case trace::UvmKind::kGpuPageFault:
    case trace::UvmKind::kCpuPageFault:
      switch (cause) {
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_READ:
          return "read";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_WRITE:
          return "write";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_ATOMIC:
          return "atomic";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_ACCESS_TYPE_PREFETCH:
          return "prefetch";
        default:
          return "unknown";
      }
    case trace::UvmKind::kMigrateToDevice:
    case trace::UvmKind::kMigrateToHost:
      switch (cause) {
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER:
          return "user";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_COHERENCE:
          return "coherence";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_PREFETCH:
          return "prefetch";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_EVICTION:
          return "eviction";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_ACCESS_COUNTERS:
          return "access_counters";
        default:
          return "unknown";
      }
    case trace::UvmKind::kRemoteMap:
      switch (cause) {
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_REMOTE_MAP_CAUSE_COHERENCE:
          return "coherence";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_REMOTE_MAP_CAUSE_THRASHING:
          return "thrashing";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_REMOTE_MAP_CAUSE_POLICY:
          return "policy";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_REMOTE_MAP_CAUSE_OUT_OF_MEMORY:
          return "out_of_memory";
        case CUPTI_ACTIVITY_UNIFIED_MEMORY_REMOTE_MAP_CAUSE_EVICTION:
          return "eviction";
        default:
          return "unknown";
      }
    case trace::UvmKind::kThrashing:
    case trace::UvmKind::kThrottling:
      return "unknown";
  }
  return "unknown";
}

std::optional<MemoryEvent> MemoryEventOf(const CUpti_ActivityMemory4& record, int64_t offset_ns) {
  MemoryEvent out;
  switch (record.memoryOperationType) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION:
      out.allocation = true;
      break;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE:
      out.allocation = false;
      break;
    default:
      return std::nullopt;
  }
  switch (record.memoryKind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      out.kind = trace::AllocKind::kDevice;
      break;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      out.kind = trace::AllocKind::kManaged;
      break;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      out.kind = trace::AllocKind::kHost;
      break;
    default:
      out.kind = trace::AllocKind::kOther;
      break;
  }
  if (record.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID &&
      out.kind == trace::AllocKind::kDevice) {
    out.kind = trace::AllocKind::kAsync;
  }
  out.time_ns = ToTraceClock(record.timestamp, offset_ns);
  out.address = record.address;
  out.bytes = record.bytes;
  out.device = record.deviceId;
  out.stream = record.streamId;
  out.correlation_id = record.correlationId;
  return out;
}

}  // namespace spillway::cupti
