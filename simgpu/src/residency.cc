// Device memory and managed-memory residency. Every simgpu allocation lives in one reserved
// address arena, in whole 2 MiB chunks, so the SIGSEGV handler finds a chunk by arithmetic,
// without allocating or taking a lock that its own thread could hold.
//
// A managed chunk takes its `backed` bytes of the device when resident: 2 MiB, or in an
// allocation's last chunk the bytes the allocation has there rounded up to 4 KiB, as nvidia-uvm
// backs a partial 2 MiB block with 64 KiB and 4 KiB chunks (common/cost_model.h, BackedBytes).
// Faults, prefetches, evictions and discards move and count those bytes.
//
// A managed chunk is in one of three states:
//   armed     PROT_NONE, not resident: any access faults;
//   host-open RW, not resident: the host touched it (legitimate host data); re-armed before the
//             next device-side operation starts so the device's accesses still fault;
//   resident  RW, resident on the simulated device (counted against capacity).
// A device-side access (a kernel or a device copy on a stream worker, marked by the thread-local
// account) to an armed chunk is a demand fault: evict the oldest-resident chunks while over
// capacity, then make the chunk resident.
//
// With several devices (SIMGPU_DEVICES) each has its own capacity, FIFO and byte counts; a
// resident chunk remembers its device, and an access or prefetch from another device moves it.
//
// A managed chunk also knows whether it holds data (`populated`): not after allocation or a
// discard, yes once it was resident or the host touched it. As in nvidia-uvm, making a chunk that
// holds no data resident (by a fault or a prefetch) populates zeroed device pages: no transfer.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "simgpu_internal.h"

namespace simgpu {
namespace {

// The device address arena: 1 TiB of address space, reserved only. Where that much cannot be
// reserved (a ThreadSanitizer build, whose shadow takes most of the address space; a `ulimit -v`),
// a quarter as much is tried, down to kMinArenaBytes.
constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 40;
constexpr uint64_t kMinArenaBytes = uint64_t{16} << 30;
constexpr uint64_t kDeviceAllocGranule = 256;

enum ChunkState : uint8_t { kUnused = 0, kDevice, kArmed, kHostOpen, kResident };

struct Chunk {
  uint8_t state;
  uint8_t advice;
  uint8_t in_open_list;
  uint8_t device;     // kResident: the device holding it; kDevice: the device it was allocated on
  uint8_t populated;  // managed: holds data (written since allocation or the last discard)
  uint32_t backed;    // managed: the device bytes it takes when resident (BackedBytes of the
                      // allocation's bytes in it: 2 MiB, or less in an allocation's last chunk)
  int32_t prev;       // FIFO of resident managed chunks, oldest first
  int32_t next;
};

// All guarded by g_spin (taken by the signal handler; never held across an access to managed
// memory, a lock, an allocation or a call out of this file).
std::atomic_flag g_spin = ATOMIC_FLAG_INIT;
char* g_arena = nullptr;
uint64_t g_arena_bytes = 0;  // set once by ResidencyInit, before any other use
uint32_t g_num_chunks = 0;
Chunk* g_chunks = nullptr;
int32_t* g_open_list = nullptr;
std::atomic<uint32_t> g_open_top{0};
struct DeviceState {
  int32_t fifo_head = -1;
  int32_t fifo_tail = -1;
  uint64_t resident_managed = 0;
  uint64_t device_bytes = 0;
};
DeviceState g_dev[kMaxDevices];

int ClampDevice(int device) { return device >= 0 && device < kMaxDevices ? device : 0; }

thread_local DeviceAccount* tls_account __attribute__((tls_model("initial-exec"))) = nullptr;
struct sigaction g_prev_segv;

class SpinGuard {
 public:
  SpinGuard() {
    while (g_spin.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~SpinGuard() { g_spin.clear(std::memory_order_release); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;
};

// Allocation bookkeeping, guarded by g_alloc_mu (never taken by the signal handler).
struct AllocRecord {
  size_t size;
  uint32_t num_chunks;
  bool managed;
  uint64_t id;
  uint64_t accounted;  // device bytes charged against capacity
  CUmemoryPool pool;
  int device;
  // The context current when it was made (null without one) and that context's generation then:
  // the context's end frees it.
  const Context* context;
  uint64_t context_generation;
};
std::mutex* g_alloc_mu = new std::mutex();
std::map<uint32_t, AllocRecord>* g_allocs = new std::map<uint32_t, AllocRecord>();
std::map<uint32_t, uint32_t>* g_free_ranges = new std::map<uint32_t, uint32_t>();  // first -> n
uint32_t g_bump = 0;
uint64_t g_next_alloc_id = 1;

void WriteStderr(const char* msg) {
  ssize_t ignored = write(STDERR_FILENO, msg, strlen(msg));
  (void)ignored;
}

char* ChunkAddr(int32_t idx) { return g_arena + static_cast<uint64_t>(idx) * kChunkBytes; }

bool Protect(int32_t idx, int prot) {
  if (mprotect(ChunkAddr(idx), kChunkBytes, prot) == 0) return true;
  WriteStderr("simgpu: mprotect failed on a managed chunk (vm.max_map_count too low?)\n");
  return false;
}

void UpdateMaxRelaxed(std::atomic<uint64_t>& peak, uint64_t now) {
  uint64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

void UpdatePeakLocked(int device) {
  const uint64_t now = g_dev[device].resident_managed + g_dev[device].device_bytes;
  UpdateMaxRelaxed(stats().peak_resident_bytes_by_device[device], now);
  UpdateMaxRelaxed(stats().peak_resident_bytes, now);
}

void FifoAppendLocked(int32_t idx) {
  Chunk& c = g_chunks[idx];
  DeviceState& d = g_dev[c.device];
  c.prev = d.fifo_tail;
  c.next = -1;
  if (d.fifo_tail >= 0)
    g_chunks[d.fifo_tail].next = idx;
  else
    d.fifo_head = idx;
  d.fifo_tail = idx;
}

void FifoRemoveLocked(int32_t idx) {
  Chunk& c = g_chunks[idx];
  DeviceState& d = g_dev[c.device];
  if (c.prev >= 0)
    g_chunks[c.prev].next = c.next;
  else
    d.fifo_head = c.next;
  if (c.next >= 0)
    g_chunks[c.next].prev = c.prev;
  else
    d.fifo_tail = c.prev;
  c.prev = c.next = -1;
}

// Drops a resident chunk's residency (PROT_NONE, armed).
void DropResidencyLocked(int32_t idx) {
  FifoRemoveLocked(idx);
  Protect(idx, PROT_NONE);
  g_chunks[idx].state = kArmed;
  g_dev[g_chunks[idx].device].resident_managed -= g_chunks[idx].backed;
}

// Evicts `device`'s oldest-resident chunks until `need` more bytes fit there. Returns false when
// nothing is left to evict (device allocations fill the capacity).
bool MakeRoomLocked(int device, uint64_t need, uint64_t* evicted) {
  const uint64_t cap = config().capacity_bytes;
  DeviceState& d = g_dev[device];
  while (d.device_bytes + d.resident_managed + need > cap) {
    int32_t victim = d.fifo_head;
    if (victim < 0) return false;
    const uint64_t backed = g_chunks[victim].backed;
    DropResidencyLocked(victim);
    *evicted += backed;
    stats().evicted_bytes.fetch_add(backed, std::memory_order_relaxed);
    stats().capacity_evicted_bytes.fetch_add(backed, std::memory_order_relaxed);
  }
  return true;
}

// REQUIRES: the chunk is not resident (on any device).
// Returns true when the chunk held data, i.e. it had to be copied in (else it is zero-filled).
bool MakeResidentLocked(int32_t idx, int device) {
  Chunk& c = g_chunks[idx];
  if (c.state != kHostOpen) Protect(idx, PROT_READ | PROT_WRITE);
  const bool copied = c.populated != 0;
  c.populated = 1;
  c.state = kResident;
  c.device = static_cast<uint8_t>(device);
  FifoAppendLocked(idx);
  g_dev[device].resident_managed += c.backed;
  UpdatePeakLocked(device);
  return copied;
}

// A chunk resident on another device than `device` goes back to armed there first (its move
// costs a round trip through the host in this model). Returns the bytes that left that device.
uint64_t LeaveOtherDeviceLocked(int32_t idx, int device) {
  Chunk& c = g_chunks[idx];
  if (c.state != kResident || c.device == device) return 0;
  DropResidencyLocked(idx);
  stats().evicted_bytes.fetch_add(c.backed, std::memory_order_relaxed);
  return c.backed;
}

void OpenForHostLocked(int32_t idx) {
  Chunk& c = g_chunks[idx];
  Protect(idx, PROT_READ | PROT_WRITE);
  c.state = kHostOpen;
  c.populated = 1;
  if (!c.in_open_list) {
    c.in_open_list = 1;
    uint32_t top = g_open_top.load(std::memory_order_relaxed);
    g_open_list[top] = idx;
    g_open_top.store(top + 1, std::memory_order_relaxed);
  }
}

// The SIGSEGV path. Returns true when the access may be retried.
bool HandleFault(uintptr_t addr) {
  uintptr_t base = reinterpret_cast<uintptr_t>(g_arena);
  if (g_arena == nullptr || addr < base || addr >= base + g_arena_bytes) return false;
  int32_t idx = static_cast<int32_t>((addr - base) / kChunkBytes);
  DeviceAccount* account = tls_account;
  SpinGuard guard;
  Chunk& c = g_chunks[idx];
  // Resident (on any device: a chunk is mapped once, so another device's access does not fault;
  // it moves when prefetched) or host-open: another thread won the race.
  if (c.state == kResident || c.state == kHostOpen) return true;
  if (c.state != kArmed) return false;  // not managed memory
  if (account == nullptr) {
    OpenForHostLocked(idx);
    stats().host_opened_chunks.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (c.advice & kAdvisePreferHost) {  // stays on the host; the device maps it remotely
    OpenForHostLocked(idx);
    stats().remote_mapped_bytes.fetch_add(c.backed, std::memory_order_relaxed);
    return true;
  }
  const int device = ClampDevice(account->device);
  uint64_t evicted = 0;
  const uint64_t backed = c.backed;
  if (!MakeRoomLocked(device, backed, &evicted)) {
    stats().overcommit_faults.fetch_add(1, std::memory_order_relaxed);
  }
  if (!MakeResidentLocked(idx, device)) {
    account->zero_filled_bytes += backed;
    stats().zero_filled_bytes.fetch_add(backed, std::memory_order_relaxed);
  }
  account->fault_count += 1;
  account->fault_bytes += backed;
  account->evicted_bytes += evicted;
  stats().fault_count.fetch_add(1, std::memory_order_relaxed);
  stats().fault_bytes.fetch_add(backed, std::memory_order_relaxed);
  return true;
}

void SegvHandler(int sig, siginfo_t* info, void* ucontext) {
  int saved_errno = errno;
  bool handled = HandleFault(reinterpret_cast<uintptr_t>(info->si_addr));
  errno = saved_errno;
  if (handled) return;
  // Not simgpu's: hand it to whoever was there before.
  if (g_prev_segv.sa_flags & SA_SIGINFO) {
    if (g_prev_segv.sa_sigaction != nullptr) {
      g_prev_segv.sa_sigaction(sig, info, ucontext);
      return;
    }
  } else if (g_prev_segv.sa_handler != SIG_DFL && g_prev_segv.sa_handler != SIG_IGN) {
    g_prev_segv.sa_handler(sig);
    return;
  }
  // Default action: restore it; the faulting instruction runs again and the process dies.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGSEGV, &dfl, nullptr);
}

void* MapZeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Chunk-range allocator over the arena (first fit, neighbours merged on free).
bool TakeRangeLocked(uint32_t n, uint32_t* first) {
  for (auto it = g_free_ranges->begin(); it != g_free_ranges->end(); ++it) {
    if (it->second < n) continue;
    *first = it->first;
    uint32_t rest = it->second - n;
    uint32_t rest_first = it->first + n;
    g_free_ranges->erase(it);
    if (rest > 0) (*g_free_ranges)[rest_first] = rest;
    return true;
  }
  if (static_cast<uint64_t>(g_bump) + n > g_num_chunks) return false;
  *first = g_bump;
  g_bump += n;
  return true;
}

void ReturnRangeLocked(uint32_t first, uint32_t n) {
  auto next = g_free_ranges->find(first + n);
  if (next != g_free_ranges->end()) {
    n += next->second;
    g_free_ranges->erase(next);
  }
  auto it = g_free_ranges->lower_bound(first);
  if (it != g_free_ranges->begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == first) {
      prev->second += n;
      return;
    }
  }
  (*g_free_ranges)[first] = n;
}

void UpdateMax(std::atomic<uint64_t>& peak, uint64_t now) {
  uint64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}

CUresult Allocate(size_t bytes, bool managed, CUmemoryPool pool, int on_device, CUdeviceptr* out) {
  if (out == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t n64 = (bytes + kChunkBytes - 1) / kChunkBytes;
  if (n64 > g_num_chunks) return CUDA_ERROR_OUT_OF_MEMORY;
  uint32_t n = static_cast<uint32_t>(n64);
  uint64_t accounted =
      managed ? 0 : (bytes + kDeviceAllocGranule - 1) / kDeviceAllocGranule * kDeviceAllocGranule;
  const int device = ClampDevice(on_device >= 0 ? on_device : CurrentDeviceOrdinal());
  DeviceState& d = g_dev[device];
  std::lock_guard<std::mutex> lock(*g_alloc_mu);
  if (!managed) {
    SpinGuard guard;
    if (d.device_bytes + accounted > config().capacity_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t evicted = 0;
    MakeRoomLocked(device, accounted, &evicted);  // resident managed chunks make way
    d.device_bytes += accounted;
    UpdatePeakLocked(device);
  }
  uint32_t first = 0;
  if (!TakeRangeLocked(n, &first)) {
    if (!managed) {
      SpinGuard guard;
      d.device_bytes -= accounted;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!managed && mprotect(ChunkAddr(first), uint64_t{n} * kChunkBytes, PROT_READ | PROT_WRITE)) {
    ReturnRangeLocked(first, n);
    SpinGuard guard;
    d.device_bytes -= accounted;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  {
    SpinGuard guard;
    for (uint32_t i = first; i < first + n; ++i) {
      Chunk& c = g_chunks[i];
      c.state = managed ? kArmed : kDevice;
      c.advice = 0;
      c.populated = 0;
      c.device = static_cast<uint8_t>(device);
      c.prev = c.next = -1;
      const uint64_t in_chunk =
          std::min<uint64_t>(kChunkBytes, bytes - uint64_t{i - first} * kChunkBytes);
      c.backed = managed ? static_cast<uint32_t>(spillway::BackedBytes(in_chunk)) : 0;
    }
  }
  const Context* context = CurrentContext();
  const uint64_t generation = context != nullptr ? context->generation.load() : 0;
  (*g_allocs)[first] = AllocRecord{bytes, n,      managed, g_next_alloc_id++, accounted,
                                   pool,  device, context, generation};
  if (managed) {
    UpdateMax(stats().managed_alloc_bytes_peak, stats().managed_alloc_bytes += bytes);
  } else {
    UpdateMax(stats().device_alloc_bytes_peak, stats().device_alloc_bytes += accounted);
  }
  *out = reinterpret_cast<CUdeviceptr>(ChunkAddr(first));
  return CUDA_SUCCESS;
}

// Chunk index range [first, last] overlapping [ptr, ptr+bytes), clipped to the arena.
bool ChunkSpan(CUdeviceptr ptr, size_t bytes, int32_t* first, int32_t* last) {
  uintptr_t base = reinterpret_cast<uintptr_t>(g_arena);
  if (bytes == 0 || ptr < base || ptr >= base + g_arena_bytes) return false;
  uint64_t end = std::min<uint64_t>(ptr + bytes, base + g_arena_bytes);
  *first = static_cast<int32_t>((ptr - base) / kChunkBytes);
  *last = static_cast<int32_t>((end - 1 - base) / kChunkBytes);
  return true;
}

bool IsManagedState(uint8_t s) { return s == kArmed || s == kHostOpen || s == kResident; }

}  // namespace

bool ResidencyInit() {
  void* arena = MAP_FAILED;
  for (g_arena_bytes = kMaxArenaBytes; g_arena_bytes >= kMinArenaBytes; g_arena_bytes /= 4) {
    arena =
        mmap(nullptr, g_arena_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena != MAP_FAILED) break;
  }
  if (arena == MAP_FAILED) {
    WriteStderr("simgpu: cannot reserve the device address arena (16 GiB of address space)\n");
    return false;
  }
  g_num_chunks = static_cast<uint32_t>(g_arena_bytes / kChunkBytes);
  g_chunks = static_cast<Chunk*>(MapZeroed(sizeof(Chunk) * g_num_chunks));
  g_open_list = static_cast<int32_t*>(MapZeroed(sizeof(int32_t) * g_num_chunks));
  if (g_chunks == nullptr || g_open_list == nullptr) return false;
  g_arena = static_cast<char*>(arena);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = SegvHandler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_prev_segv) != 0) {
    WriteStderr("simgpu: cannot install the SIGSEGV handler\n");
    return false;
  }
  return true;
}

void BeginDeviceAccess(DeviceAccount* account) {
  if (g_open_top.load(std::memory_order_relaxed) > 0) {
    SpinGuard guard;
    uint32_t top = g_open_top.load(std::memory_order_relaxed);
    while (top > 0) {
      int32_t idx = g_open_list[--top];
      Chunk& c = g_chunks[idx];
      c.in_open_list = 0;
      if (c.state == kHostOpen && Protect(idx, PROT_NONE)) c.state = kArmed;
    }
    g_open_top.store(0, std::memory_order_relaxed);
  }
  tls_account = account;
}

void EndDeviceAccess() { tls_account = nullptr; }

CUresult AllocateDevice(size_t bytes, CUmemoryPool pool, CUdeviceptr* out, int device) {
  return Allocate(bytes, false, pool, device, out);
}

CUresult AllocateManaged(size_t bytes, CUmemoryPool pool, CUdeviceptr* out) {
  return Allocate(bytes, true, pool, -1, out);
}

std::vector<CUdeviceptr> AllocationsMadeIn(const Context* c, uint64_t generation) {
  std::vector<CUdeviceptr> bases;
  std::lock_guard<std::mutex> lock(*g_alloc_mu);
  for (const auto& [first, rec] : *g_allocs) {
    if (rec.context == c && rec.context_generation < generation) {
      bases.push_back(reinterpret_cast<CUdeviceptr>(ChunkAddr(first)));
    }
  }
  return bases;
}

CUresult FreeAllocation(CUdeviceptr ptr) {
  uintptr_t base = reinterpret_cast<uintptr_t>(g_arena);
  if (ptr < base || ptr >= base + g_arena_bytes || (ptr - base) % kChunkBytes != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  uint32_t first = static_cast<uint32_t>((ptr - base) / kChunkBytes);
  std::lock_guard<std::mutex> lock(*g_alloc_mu);
  auto it = g_allocs->find(first);
  if (it == g_allocs->end()) return CUDA_ERROR_INVALID_VALUE;
  AllocRecord rec = it->second;
  g_allocs->erase(it);
  if (rec.pool != nullptr) NotePoolFree(rec.pool, rec.size);
  {
    SpinGuard guard;
    for (uint32_t i = first; i < first + rec.num_chunks; ++i) {
      Chunk& c = g_chunks[i];
      if (c.state == kResident) {
        FifoRemoveLocked(static_cast<int32_t>(i));
        g_dev[c.device].resident_managed -= c.backed;
      }
      c.state = kUnused;
      c.advice = 0;
    }
    g_dev[rec.device].device_bytes -= rec.accounted;
  }
  uint64_t span = uint64_t{rec.num_chunks} * kChunkBytes;
  mprotect(ChunkAddr(first), span, PROT_NONE);
  madvise(ChunkAddr(first), span, MADV_DONTNEED);
  ReturnRangeLocked(first, rec.num_chunks);
  if (rec.managed)
    stats().managed_alloc_bytes -= rec.size;
  else
    stats().device_alloc_bytes -= rec.accounted;
  return CUDA_SUCCESS;
}

bool FindAllocation(CUdeviceptr ptr, AllocInfo* info) {
  uintptr_t base = reinterpret_cast<uintptr_t>(g_arena);
  if (g_arena == nullptr || ptr < base || ptr >= base + g_arena_bytes) return false;
  uint32_t idx = static_cast<uint32_t>((ptr - base) / kChunkBytes);
  std::lock_guard<std::mutex> lock(*g_alloc_mu);
  auto it = g_allocs->upper_bound(idx);
  if (it == g_allocs->begin()) return false;
  --it;
  CUdeviceptr start = reinterpret_cast<CUdeviceptr>(ChunkAddr(it->first));
  if (ptr >= start + it->second.size) return false;
  info->base = start;
  info->size = it->second.size;
  info->managed = it->second.managed;
  info->id = it->second.id;
  info->pool = it->second.pool;
  info->device = it->second.device;
  return true;
}

bool IsDeviceRange(CUdeviceptr ptr, size_t bytes) {
  AllocInfo info;
  if (!FindAllocation(ptr, &info)) return false;
  return ptr + bytes <= info.base + info.size;
}

MoveResult PrefetchToDevice(CUdeviceptr ptr, size_t bytes, int device) {
  MoveResult r;
  device = ClampDevice(device);
  int32_t first, last;
  if (!ChunkSpan(ptr, bytes, &first, &last)) return r;
  for (int32_t i = first; i <= last; ++i) {
    SpinGuard guard;
    uint64_t evicted = LeaveOtherDeviceLocked(i, device);
    uint8_t s = g_chunks[i].state;
    if (s != kArmed && s != kHostOpen) continue;
    const uint64_t backed = g_chunks[i].backed;
    if (!MakeRoomLocked(device, backed, &evicted)) stats().overcommit_faults.fetch_add(1);
    if (MakeResidentLocked(i, device)) {
      r.in_bytes += backed;
    } else {
      stats().zero_filled_bytes.fetch_add(backed, std::memory_order_relaxed);
    }
    r.out_bytes += evicted;
    stats().prefetched_bytes.fetch_add(backed, std::memory_order_relaxed);
  }
  return r;
}

namespace {

// Drops device residency of the resident chunks in [ptr, ptr + bytes) and adds the bytes dropped
// to `counter`. Whether contents travel back (eviction) or vanish (discard) only changes the cost;
// a discard also leaves every managed chunk of the range holding no data.
uint64_t DropResidentRange(CUdeviceptr ptr, size_t bytes, std::atomic<uint64_t>& counter,
                           bool discard) {
  uint64_t dropped = 0;
  int32_t first, last;
  if (!ChunkSpan(ptr, bytes, &first, &last)) return 0;
  for (int32_t i = first; i <= last; ++i) {
    SpinGuard guard;
    if (discard && IsManagedState(g_chunks[i].state)) g_chunks[i].populated = 0;
    if (g_chunks[i].state != kResident) continue;
    DropResidencyLocked(i);
    dropped += g_chunks[i].backed;
  }
  counter.fetch_add(dropped, std::memory_order_relaxed);
  return dropped;
}

}  // namespace

MoveResult PrefetchToHost(CUdeviceptr ptr, size_t bytes) {
  MoveResult r;
  r.out_bytes = DropResidentRange(ptr, bytes, stats().evicted_bytes, false);
  return r;
}

// A discarded range's contents are indeterminate until written (the driver's words): the whole
// pages of it in managed chunks are dropped, so they read as zeroes next, as nvidia-uvm's
// zero-filled pages do; the bytes of a page the range covers only in part keep theirs. Whatever
// the chunk's state: madvise needs no access to the pages, and protection and residency stay.
void ForgetContents(CUdeviceptr ptr, size_t bytes) {
  int32_t first, last;
  if (!ChunkSpan(ptr, bytes, &first, &last)) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  for (int32_t i = first; i <= last; ++i) {
    {
      SpinGuard guard;
      if (!IsManagedState(g_chunks[i].state)) continue;
    }
    const uint64_t chunk = reinterpret_cast<uint64_t>(ChunkAddr(i));
    const uint64_t from = (std::max<uint64_t>(ptr, chunk) + page - 1) / page * page;
    const uint64_t to = std::min<uint64_t>(ptr + bytes, chunk + kChunkBytes) / page * page;
    if (from >= to) continue;
    if (madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED) != 0) {
      WriteStderr("simgpu: madvise(MADV_DONTNEED) failed on a discarded range\n");
    }
  }
}

MoveResult Discard(CUdeviceptr ptr, size_t bytes) {
  MoveResult r;
  r.discarded_bytes = DropResidentRange(ptr, bytes, stats().discarded_bytes, true);
  ForgetContents(ptr, bytes);
  return r;
}

MoveResult DiscardAndPrefetchToDevice(CUdeviceptr ptr, size_t bytes, int device) {
  MoveResult r;
  device = ClampDevice(device);
  int32_t first, last;
  if (!ChunkSpan(ptr, bytes, &first, &last)) return r;
  ForgetContents(ptr, bytes);
  for (int32_t i = first; i <= last; ++i) {
    SpinGuard guard;
    if (g_chunks[i].state == kResident && g_chunks[i].device != device) {
      DropResidencyLocked(i);  // discarded there: nothing travels
    }
    uint8_t s = g_chunks[i].state;
    if (s != kArmed && s != kHostOpen) continue;  // resident chunks simply stay
    uint64_t evicted = 0;
    const uint64_t backed = g_chunks[i].backed;
    if (!MakeRoomLocked(device, backed, &evicted)) stats().overcommit_faults.fetch_add(1);
    MakeResidentLocked(i, device);  // populated on the device, nothing copied
    r.out_bytes += evicted;
    r.discarded_bytes += backed;
    stats().discarded_bytes.fetch_add(backed, std::memory_order_relaxed);
  }
  return r;
}

void Advise(CUdeviceptr ptr, size_t bytes, uint8_t set_bits, uint8_t clear_bits) {
  int32_t first, last;
  if (!ChunkSpan(ptr, bytes, &first, &last)) return;
  SpinGuard guard;
  for (int32_t i = first; i <= last; ++i) {
    Chunk& c = g_chunks[i];
    if (!IsManagedState(c.state)) continue;
    c.advice = static_cast<uint8_t>((c.advice & ~clear_bits) | set_bits);
  }
}

uint64_t ResidentBytes() {
  SpinGuard guard;
  uint64_t bytes = 0;
  for (const DeviceState& d : g_dev) bytes += d.resident_managed + d.device_bytes;
  return bytes;
}

uint64_t ResidentBytesOn(int device) {
  SpinGuard guard;
  const DeviceState& d = g_dev[ClampDevice(device)];
  return d.resident_managed + d.device_bytes;
}

uint64_t DeviceAllocBytes() {
  SpinGuard guard;
  uint64_t bytes = 0;
  for (const DeviceState& d : g_dev) bytes += d.device_bytes;
  return bytes;
}

}  // namespace simgpu
