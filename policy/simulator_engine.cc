// SimulateEngine (see simulator.h): the residency engine's own code, replayed against a device
// that books simgpu's engines in virtual time. Streams are timelines (an operation starts when the
// stream's earlier work and the events it waits for are done, and books the compute engine or a
// copy engine); events carry the time of the work before their recording; residency is simgpu's
// (2 MiB chunks, evicted oldest-resident first when the device is full, contents copied only for
// chunks that hold data). Operations change residency in the order they are issued, as the
// simulator's other models do; a device slot that a chunk leaves becomes usable when its leaving
// completes (a write-back's end, a discard's turn on its stream), and a chunk coming in waits for
// the slot it takes (the oldest free one), as the engine orders its prefetches after the
// evictions and frees that made their room.
#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "policy/planned_policy.h"
#include "policy/residency_engine.h"
#include "policy/simulator.h"
#include "policy/simulator_replay.h"
#include "policy/simulator_residency.h"

namespace spillway::policy {
namespace {

using Kind = StepEvent::Kind;

// Where the replay's allocations live (chunk c of the replay at kAddressBase + c x 2 MiB).
constexpr uint64_t kAddressBase = uint64_t{1} << 40;

// A Device whose operations are booked on simgpu's engine timelines; it also runs the kernels.
class TimelineDevice final : public Device {
 public:
  TimelineDevice(const Replay& r, const CostModel& cost, uint64_t capacity_chunks)
      : cost_(cost),
        cap_(capacity_chunks),
        state_(r.total_chunks),
        populated_(r.total_chunks),
        on_host_(r.total_chunks) {
    t_.engines = cost.copy_engines;
    for (uint64_t i = 0; i < cap_; ++i) free_slots_.push(0);
  }

  Stream job_stream() { return &job_; }
  // The host's clock, for QueryEvent: work that ends by then is complete.
  void set_host_now(double seconds) { host_now_ = seconds; }
  // Where the bytes, faults and compute go; null: not counted.
  void set_result(SimResult* result) { result_ = result; }
  double compute_free() const { return t_.compute; }

  // A kernel of `compute` seconds touching `chunks` on `stream`: what is not resident faults in
  // (simgpu's HandleFault and FaultStallSeconds). Returns when it ends.
  double Launch(Stream stream, const std::vector<uint32_t>& chunks, double compute) {
    uint64_t faults = 0, copied = 0, evicted = 0, remote = 0;
    double room = 0;
    for (const uint32_t c : chunks) {
      if (state_.resident(c)) continue;
      if (on_host_[c]) {  // mapped over the link: no fault, no migration
        ++remote;
        continue;
      }
      room = std::max(room, TakeSlot(&evicted));
      copied += MakeResident(c);
      ++faults;
    }
    const double stall = FaultStallSeconds(cost_, copied * kChunkBytes, evicted * kChunkBytes) +
                         static_cast<double>(FaultBatches(cost_, faults * kChunkBytes) -
                                             FaultBatches(cost_, copied * kChunkBytes)) *
                             cost_.fault_batch_seconds;
    double& tail = Tail(stream);
    const double start = std::max({tail, t_.compute, room});
    t_.compute = start + compute + stall + RemoteAccessSeconds(cost_, remote);
    tail = t_.compute;
    if (result_ != nullptr) {
      result_->demand_faults += faults;
      result_->fault_batches += FaultBatches(cost_, faults * kChunkBytes);
      result_->h2d_bytes += copied * kChunkBytes;
      result_->d2h_bytes += evicted * kChunkBytes;
      result_->compute_seconds += compute;
      result_->remote_bytes += 2 * remote * kChunkBytes;
    }
    return t_.compute;
  }
  // Allocation `first`..`end` (chunks) is made or freed: nothing resident, no data, not placed.
  void Reset(uint32_t first, uint32_t end) {
    for (uint32_t c = first; c < end; ++c) {
      Leave(c, job_);
      populated_[c] = 0;
      on_host_[c] = 0;
    }
  }

  DeviceResult AllocateManaged(uint64_t*, uint64_t) override { return kNotSupported; }
  DeviceResult AllocateDevice(uint64_t*, uint64_t) override { return kNotSupported; }
  DeviceResult Free(uint64_t) override { return kNotSupported; }
  DeviceResult PrefetchToDevice(uint64_t address, uint64_t bytes, Stream stream) override {
    uint64_t in = 0, out = 0;
    double room = 0;
    for (uint32_t c = First(address); c < End(address, bytes); ++c) {
      if (state_.resident(c)) continue;
      room = std::max(room, TakeSlot(&out));
      in += MakeResident(c);
    }
    Move(stream, in, out, room);
    return kDeviceOk;
  }
  DeviceResult PrefetchToHost(uint64_t address, uint64_t bytes, Stream stream) override {
    std::vector<uint32_t>& out = scratch_;
    out.clear();
    for (uint32_t c = First(address); c < End(address, bytes); ++c) {
      if (state_.resident(c)) out.push_back(c);
    }
    const double end = Move(stream, 0, out.size(), 0);
    for (const uint32_t c : out) Leave(c, end);
    return kDeviceOk;
  }
  DeviceResult Discard(uint64_t address, uint64_t bytes, Stream stream) override {
    for (uint32_t c = First(address); c < End(address, bytes); ++c) {
      if (state_.resident(c) && result_ != nullptr) result_->discarded_bytes += kChunkBytes;
      Leave(c, Tail(stream));
      populated_[c] = 0;
    }
    return kDeviceOk;
  }
  DeviceResult DiscardAndPrefetch(uint64_t address, uint64_t bytes, Stream stream) override {
    uint64_t out = 0;
    double room = 0;
    for (uint32_t c = First(address); c < End(address, bytes); ++c) {
      if (state_.resident(c)) continue;
      room = std::max(room, TakeSlot(&out));
      state_.Add(c);
      populated_[c] = 1;
      if (result_ != nullptr) result_->discarded_bytes += kChunkBytes;
    }
    Move(stream, 0, out, room);
    return kDeviceOk;
  }
  // simgpu's preferred location = host: later accesses map it remotely while it is not resident.
  DeviceResult PlaceOnHost(uint64_t address, uint64_t bytes) override {
    for (uint32_t c = First(address); c < End(address, bytes); ++c) on_host_[c] = 1;
    return kDeviceOk;
  }
  DeviceResult MemoryInfo(uint64_t* free, uint64_t* total) override {
    *total = cap_ * kChunkBytes;
    *free = (cap_ - std::min(cap_, state_.count())) * kChunkBytes;
    return kDeviceOk;
  }
  DeviceResult CreateSideStream(Stream* stream) override {
    *stream = &streams_.emplace_back(0.0);
    return kDeviceOk;
  }
  DeviceResult CreateEvent(Event* event) override {
    *event = &events_.emplace_back(0.0);
    return kDeviceOk;
  }
  DeviceResult CreateTimingEvent(Event* event) override { return CreateEvent(event); }
  DeviceResult QueryEvent(Event event) override {
    return *static_cast<double*>(event) <= host_now_ ? kDeviceOk : kDeviceNotReady;
  }
  DeviceResult ElapsedMilliseconds(Event start, Event end, float* ms) override {
    if (QueryEvent(start) != kDeviceOk || QueryEvent(end) != kDeviceOk) return kDeviceNotReady;
    *ms = static_cast<float>((*static_cast<double*>(end) - *static_cast<double*>(start)) * 1e3);
    return kDeviceOk;
  }
  DeviceResult RecordEvent(Event event, Stream stream) override {
    *static_cast<double*>(event) = Tail(stream);
    return kDeviceOk;
  }
  DeviceResult StreamWaitEvent(Stream stream, Event event) override {
    double& tail = Tail(stream);
    tail = std::max(tail, *static_cast<double*>(event));
    return kDeviceOk;
  }

 private:
  static constexpr DeviceResult kNotSupported = 801;

  // A stream is the time its work so far ends; the launch stream is job_.
  double& Tail(Stream stream) { return *static_cast<double*>(stream == nullptr ? &job_ : stream); }
  static uint32_t First(uint64_t address) {
    return static_cast<uint32_t>((address - kAddressBase) / kChunkBytes);
  }
  static uint32_t End(uint64_t address, uint64_t bytes) {
    return static_cast<uint32_t>((address - kAddressBase + bytes + kChunkBytes - 1) / kChunkBytes);
  }
  // A device slot for a chunk coming in: the oldest free one, or (simgpu's MakeRoomLocked when the
  // device is full) the slot of the oldest-resident chunk, evicted now (counted in `evicted`).
  // Returns when the slot is free.
  double TakeSlot(uint64_t* evicted) {
    if (free_slots_.empty()) {
      const uint64_t out = state_.EvictOldestFor(cap_);
      if (out == 0 && result_ != nullptr) ++result_->overcommit_chunks;
      *evicted += out;
      return 0;
    }
    const double when = free_slots_.top();
    free_slots_.pop();
    return when;
  }
  // Chunk `c` leaves the device (if resident); its slot is free from `when`.
  void Leave(uint32_t c, double when) {
    if (!state_.resident(c)) return;
    state_.Remove(c);
    if (state_.count() + free_slots_.size() < cap_) free_slots_.push(when);
  }
  // Returns 1 when the chunk held data (copied in), 0 when it is zero-filled.
  uint64_t MakeResident(uint32_t c) {
    state_.Add(c);
    const uint64_t copied = populated_[c];
    populated_[c] = 1;
    return copied;
  }
  // simgpu's MoveTime: the copies in and out start with the stream's turn (and once the room
  // they take is free), each on its engine. Returns when they end.
  double Move(Stream stream, uint64_t in, uint64_t out, double room) {
    double& tail = Tail(stream);
    const double start = std::max(tail, room);
    double end = start;
    if (in > 0) end = std::max(end, t_.Book(true, start, H2DSeconds(cost_, in * kChunkBytes)));
    if (out > 0) end = std::max(end, t_.Book(false, start, D2HSeconds(cost_, out * kChunkBytes)));
    tail = end;
    if (result_ != nullptr) {
      result_->h2d_bytes += in * kChunkBytes;
      result_->d2h_bytes += out * kChunkBytes;
    }
    return end;
  }

  const CostModel cost_;
  const uint64_t cap_;
  ChunkResidency state_;
  std::vector<char> populated_;  // per chunk: holds data (written since made or discarded)
  std::vector<char> on_host_;    // per chunk: placed on the host (PlaceOnHost)
  Timelines t_;
  // Free device slots by the time each became free, earliest first (cap_ - resident chunks).
  std::priority_queue<double, std::vector<double>, std::greater<>> free_slots_;
  std::vector<uint32_t> scratch_;
  double job_ = 0;
  std::deque<double> streams_;  // side streams' tails (stable addresses)
  std::deque<double> events_;   // events' recorded times
  double host_now_ = 0;
  SimResult* result_ = nullptr;
};

// What each launch of the step touches, by position, as chunks of the replay, and the pointer words
// the engine sees. The workload's ranges are what the kernels touch (a trace's arena ranges were
// narrowed to the engine's view when it was read, policy/trace_workload.cc); each access's word
// points into its range's first chunk, so that the engine, which names an arena pointer's chunks up
// to the next pointer's offset (docs/engine.md, "Arenas"), names that range: at the chunk's start
// when no range starting before it reaches into the chunk (the range before ends on the chunk
// boundary), one byte in when one does.
struct EngineAccess {
  std::vector<std::vector<uint32_t>> chunks;        // per position, sorted, distinct
  std::vector<std::vector<uint64_t>> word_offsets;  // per position: per access, bytes from base
};

EngineAccess EngineAccessOf(const Workload& w, const Replay& r) {
  // Per allocation, the chunks that a range starting before them reaches into.
  std::vector<std::vector<uint32_t>> reached(w.allocations.size() + 1);
  for (const StepEvent& e : w.step) {
    if (e.kind != Kind::kLaunch) continue;
    for (const ChunkRange& range : e.launch.accesses) {
      for (uint32_t c = range.first_chunk + 1; c < range.first_chunk + range.num_chunks; ++c)
        reached[range.alloc_id].push_back(c);
    }
  }
  for (std::vector<uint32_t>& v : reached) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  EngineAccess out;
  for (const StepEvent& e : w.step) {
    if (e.kind != Kind::kLaunch) continue;
    std::vector<uint32_t>& chunks = out.chunks.emplace_back();
    std::vector<uint64_t>& offsets = out.word_offsets.emplace_back();
    for (const ChunkRange& range : e.launch.accesses) {
      for (uint32_t c = range.first_chunk; c < range.first_chunk + range.num_chunks; ++c)
        chunks.push_back(r.base[range.alloc_id] + c);
      const std::vector<uint32_t>& in = reached[range.alloc_id];
      const bool inside = std::binary_search(in.begin(), in.end(), range.first_chunk);
      offsets.push_back(uint64_t{range.first_chunk} * kChunkBytes + (inside ? 1 : 0));
    }
    std::sort(chunks.begin(), chunks.end());
    chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  }
  return out;
}

}  // namespace

SimResult SimulateEngine(const Workload& w, const SimOptions& o,
                         const std::function<std::unique_ptr<EvictionPolicy>()>& make,
                         const std::string& name, const EngineSimOptions& engine_options) {
  const Replay r = BuildReplay(w, static_cast<int>(kEngineWarmupSteps) + 2);
  SimResult res;
  res.policy = name;
  const uint64_t cap = std::max<uint64_t>(o.device_memory / kChunkBytes, 1);
  TimelineDevice device(r, o.cost, cap);
  EngineOptions options;
  options.lookahead_launches = engine_options.lookahead_launches;
  options.residency_granule = kChunkBytes;
  options.size_lookahead_from_time = engine_options.lookahead_auto;
  ResidencyEngine engine(&device, make(), cap * kChunkBytes, options);
  // The engine numbers allocations itself: a step-local allocation gets a new id each step.
  const uint64_t period = w.allocations.size() + 1;
  auto allocation = [&](uint64_t id, uint32_t step) {
    Allocation a;
    a.id = w.allocation(id).persistent ? id : id + uint64_t{step} * period;
    a.base = kAddressBase + uint64_t{r.base[id]} * kChunkBytes;
    a.size = w.allocation(id).bytes;
    a.backing = Backing::kManaged;
    return a;
  };
  for (const WorkloadAllocation& a : w.allocations) {
    if (a.persistent) engine.OnAllocated(allocation(a.id, 0));
  }
  const EngineAccess touched = EngineAccessOf(w, r);
  const Stream job = device.job_stream();
  AccessSet access;
  std::vector<uint64_t> words;
  double step_start = 0;
  uint32_t step = 0;
  for (const ReplayItem& item : r.items) {
    if (item.step != step) {  // the step ends with its last kernel
      if (item.step == kEngineWarmupSteps) step_start = device.compute_free();
      if (item.step == kEngineWarmupSteps + 1)
        res.step_seconds = device.compute_free() - step_start;
      step = item.step;
      device.set_result(step == kEngineWarmupSteps ? &res : nullptr);
    }
    const uint32_t first = r.base[item.alloc_id];
    const uint32_t end =
        item.alloc_id + 1 < r.base.size() ? r.base[item.alloc_id + 1] : r.total_chunks;
    if (item.kind == Kind::kAlloc) {
      device.Reset(first, end);
      engine.OnAllocated(allocation(item.alloc_id, item.step));
      continue;
    }
    if (item.kind == Kind::kFree) {
      engine.OnFree(allocation(item.alloc_id, item.step), job);
      device.Reset(first, end);
      continue;
    }
    access.clear();
    words.clear();
    for (size_t i = 0; i < item.launch->accesses.size(); ++i) {
      const ChunkRange& range = item.launch->accesses[i];
      const Allocation a = allocation(range.alloc_id, item.step);
      words.push_back(a.base + touched.word_offsets[item.position][i]);
      if (std::none_of(access.begin(), access.end(),
                       [&a](const Allocation& b) { return b.id == a.id; })) {
        access.push_back(a);
      }
    }
    // The host issues a launch once the kernels before it have run (it keeps pace with the
    // device): what completed by then is what the engine's event queries see.
    device.set_host_now(device.compute_free());
    engine.OnLaunch(access, words, job, std::hash<std::string>()(item.launch->kernel) | 1);
    const double compute = item.launch->compute_seconds > 0 ? item.launch->compute_seconds
                                                            : o.cost.default_kernel_seconds;
    device.Launch(job, touched.chunks[item.position], compute);
  }
  return res;
}

SimResult SimulateEngineFollowing(const Workload& w, const PolicyFile& plan, const SimOptions& o) {
  return SimulateEngine(
      w, o,
      [&plan] {
        return MakePlannedPolicy(plan, "(plan)", plan.budget_bytes,
                                 [](bool, const std::string&) {});
      },
      "planned-engine");
}

}  // namespace spillway::policy
