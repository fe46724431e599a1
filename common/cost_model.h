// The cost model of moving managed memory between host and device, shared by simgpu (which
// charges it to its virtual clock) and the planner/simulator in policy/ (which predict with it):
// one model, not two. Parameters and the formulas that turn bytes into seconds.
#ifndef SPILLWAY_COMMON_COST_MODEL_H_
#define SPILLWAY_COMMON_COST_MODEL_H_

#include <cstdint>

namespace spillway {

// The residency granule: nvidia-uvm's 2 MiB root chunk (a va_block).
inline constexpr uint64_t kChunkBytes = uint64_t{2} << 20;
// The smallest piece of device memory behind managed memory: nvidia-uvm backs the part of a range
// that fills a 2 MiB block only in part with 64 KiB and 4 KiB chunks (the largest supported size
// aligned to the start and no larger than what is left: block_gpu_chunk_size in uvm_va_block.c),
// so that part takes its bytes rounded up to 4 KiB, not 2 MiB.
inline constexpr uint64_t kPieceBytes = uint64_t{4} << 10;

// The device bytes behind `bytes` of a managed range inside one 2 MiB block.
constexpr uint64_t BackedBytes(uint64_t bytes) {
  return (bytes + kPieceBytes - 1) / kPieceBytes * kPieceBytes;
}

// What one driver call costs the thread that makes it: the time it is blocked in the call, a fixed
// part and a part per byte of the range it names. Zero until a calibration measured it
// (common/calibration.h): no public figure for these exists (simgpu/README.md, "Calibration").
struct CallCost {
  double seconds = 0;
  double seconds_per_byte = 0;

  double Of(uint64_t bytes) const {
    return seconds + seconds_per_byte * static_cast<double>(bytes);
  }
  bool operator==(const CallCost&) const = default;
};

// The calls simgpu charges to the calling thread's host clock. A pair measured together (an
// allocation and its free) is charged at the allocation.
struct HostCallCosts {
  CallCost launch;              // cuLaunchKernel and its forms; a graph launch once
  CallCost prefetch_to_device;  // cuMemPrefetchAsync (and a batch's each range) to a device
  CallCost prefetch_to_host;    // the same to the host
  CallCost discard;             // cuMemDiscardBatchAsync, each range
  CallCost advise;              // cuMemAdvise
  CallCost alloc_managed;       // cuMemAllocManaged with its cuMemFree
  CallCost pool_alloc;          // cuMemAllocAsync / cuMemAllocFromPoolAsync with its cuMemFreeAsync
  CallCost mem_get_info;        // cuMemGetInfo

  bool operator==(const HostCallCosts&) const = default;
};

struct CostModel {
  double h2d_bytes_per_s = 45e9;       // host -> device (prefetch, fault migration, H2D copies)
  double d2h_bytes_per_s = 53e9;       // device -> host (eviction, D2H copies)
  double d2d_bytes_per_s = 1500e9;     // device-internal copies and memsets
  double fault_batch_seconds = 30e-6;  // latency of one batch of demand faults
  uint64_t fault_batch_bytes = kChunkBytes;  // faulted bytes serviced per batch
  int copy_engines = 2;                      // 2: H2D and D2H overlap; 1: one shared engine
  double default_kernel_seconds = 10e-6;     // a kernel whose compute time is unknown
  HostCallCosts calls;                       // what the driver calls cost the calling thread

  bool operator==(const CostModel&) const = default;
};

// Number of fault batches needed to service `fault_bytes` of demand faults.
uint64_t FaultBatches(const CostModel& c, uint64_t fault_bytes);

// The stall a kernel suffers from demand paging: fault batches, migrations in, evictions out.
double FaultStallSeconds(const CostModel& c, uint64_t fault_bytes, uint64_t evicted_bytes);

double H2DSeconds(const CostModel& c, uint64_t bytes);
double D2HSeconds(const CostModel& c, uint64_t bytes);

// The least time `h2d_bytes` in and `d2h_bytes` out can take on the copy engines when nothing
// else waits for them (both overlap with two engines, add up with one).
double CopyEngineSeconds(const CostModel& c, uint64_t h2d_bytes, uint64_t d2h_bytes);

}  // namespace spillway

#endif  // SPILLWAY_COMMON_COST_MODEL_H_
