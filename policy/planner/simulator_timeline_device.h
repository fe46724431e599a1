// The device that SimulateEngine (policy/planner/simulator_engine.cc) runs the residency engine
// against: operations booked on simgpu's engine timelines in virtual time. Streams are timelines
// (an operation starts when the stream's earlier work and the events it waits for are done, and
// books the compute engine or a copy engine); events carry the time of the work before their
// recording; residency is simgpu's (2 MiB chunks, each taking the device bytes that back it,
// evicted oldest-resident first when the device is full, contents copied only for chunks that hold
// data). Operations change residency in the order they are issued; a chunk that leaves while a
// kernel issued before still uses it (a write-back or a discard ordered too early) is counted in
// SimResult::early_moves, as a GPU would fault it back. The host thread that makes the calls has a
// clock of its own, as in simgpu: each call blocks it for the cost model's CallCost (a
// calibration's; zero by default), a wait for an event takes it to the event's time, and work it
// issues starts no earlier.
#ifndef SPILLWAY_POLICY_PLANNER_SIMULATOR_TIMELINE_DEVICE_H_
#define SPILLWAY_POLICY_PLANNER_SIMULATOR_TIMELINE_DEVICE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "common/cost_model.h"
#include "policy/engine/device.h"
#include "policy/planner/simulator.h"
#include "policy/planner/simulator_residency.h"

namespace spillway::policy {

// Where the replay's allocations live (chunk c of the replay at kTimelineAddressBase + c x 2 MiB).
constexpr uint64_t kTimelineAddressBase = uint64_t{1} << 40;

// A Device whose operations are booked on simgpu's engine timelines; it also runs the kernels.
class TimelineDevice final : public Device {
 public:
  // `footprint`: the device bytes of each chunk (Replay::footprint), which must outlive the device.
  TimelineDevice(const std::vector<uint32_t>& footprint, const CostModel& cost,
                 uint64_t capacity_bytes)
      : cost_(cost),
        footprint_(footprint),
        cap_(capacity_bytes),
        state_(footprint),
        populated_(footprint.size()),
        on_host_(footprint.size()),
        used_until_(footprint.size(), 0.0),
        room_(capacity_bytes) {
    t_.engines = cost.copy_engines;
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
    Charge(cost_.calls.launch, 0, /*engine_call=*/false);
    uint64_t faults = 0;  // chunks; the others are bytes
    uint64_t faulted = 0, copied = 0, evicted = 0, remote = 0;
    double room = 0;
    for (const uint32_t c : chunks) {
      if (state_.resident(c)) continue;
      if (on_host_[c]) {  // mapped over the link: no fault, no migration
        remote += footprint_[c];
        continue;
      }
      room = std::max(room, TakeRoom(c, &evicted));
      copied += MakeResident(c);
      ++faults;
      faulted += footprint_[c];
    }
    const double stall =
        FaultStallSeconds(cost_, copied, evicted) +
        static_cast<double>(FaultBatches(cost_, faulted) - FaultBatches(cost_, copied)) *
            cost_.fault_batch_seconds;
    double& tail = HostIssued(stream);
    const double start = std::max({tail, t_.compute, room});
    t_.compute = start + compute + stall + RemoteAccessSeconds(cost_, remote);
    tail = t_.compute;
    for (const uint32_t c : chunks) used_until_[c] = std::max(used_until_[c], t_.compute);
    if (result_ != nullptr) {
      result_->demand_faults += faults;
      result_->fault_batches += FaultBatches(cost_, faulted);
      result_->h2d_bytes += copied;
      result_->d2h_bytes += evicted;
      result_->compute_seconds += compute;
      result_->remote_bytes += 2 * remote;
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
    Charge(cost_.calls.prefetch_to_device, bytes);
    // Chunk by chunk, as the driver migrates a range: each copy once its room is free.
    for (uint32_t c = First(address); c < End(address, bytes); ++c) {
      if (state_.resident(c)) continue;
      uint64_t out = 0;
      const double room = TakeRoom(c, &out);
      const uint64_t in = MakeResident(c);
      Move(stream, in, out, room);
    }
    HostIssued(stream);
    return kDeviceOk;
  }
  DeviceResult PrefetchToHost(uint64_t address, uint64_t bytes, Stream stream) override {
    Charge(cost_.calls.prefetch_to_host, bytes);
    const std::vector<uint32_t>& out = ResidentIn(address, bytes);
    const uint64_t out_bytes = BytesOf(out);
    const double end = Move(stream, 0, out_bytes, 0);
    NoteEarly(out, end - D2HSeconds(cost_, out_bytes));
    for (const uint32_t c : out) Leave(c, end);
    return kDeviceOk;
  }
  DeviceResult Discard(uint64_t address, uint64_t bytes, Stream stream) override {
    Charge(cost_.calls.discard, bytes);
    const std::vector<uint32_t>& out = ResidentIn(address, bytes);
    if (result_ != nullptr) result_->discarded_bytes += BytesOf(out);
    const double at = HostIssued(stream);
    NoteEarly(out, at);
    for (const uint32_t c : out) Leave(c, at);
    for (uint32_t c = First(address); c < End(address, bytes); ++c) populated_[c] = 0;
    return kDeviceOk;
  }
  // simgpu's preferred location = host: later accesses map it remotely while it is not resident.
  DeviceResult PlaceOnHost(uint64_t address, uint64_t bytes) override {
    Charge(cost_.calls.advise, bytes);
    for (uint32_t c = First(address); c < End(address, bytes); ++c) on_host_[c] = 1;
    return kDeviceOk;
  }
  DeviceResult MemoryInfo(uint64_t* free, uint64_t* total) override {
    Charge(cost_.calls.mem_get_info, 0);
    *total = cap_;
    *free = cap_ - std::min(cap_, state_.bytes());
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
  // The host waits for the event: its clock reaches the event's time.
  DeviceResult SynchronizeEvent(Event event) override {
    host_now_ = std::max(host_now_, *static_cast<double*>(event));
    host_busy_ = std::max(host_busy_, *static_cast<double*>(event));
    return kDeviceOk;
  }
  DeviceResult ElapsedMilliseconds(Event start, Event end, float* ms) override {
    if (QueryEvent(start) != kDeviceOk || QueryEvent(end) != kDeviceOk) return kDeviceNotReady;
    *ms = static_cast<float>((*static_cast<double*>(end) - *static_cast<double*>(start)) * 1e3);
    return kDeviceOk;
  }
  DeviceResult RecordEvent(Event event, Stream stream) override {
    *static_cast<double*>(event) = HostIssued(stream);
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
    return static_cast<uint32_t>((address - kTimelineAddressBase) / kChunkBytes);
  }
  static uint32_t End(uint64_t address, uint64_t bytes) {
    return static_cast<uint32_t>((address - kTimelineAddressBase + bytes + kChunkBytes - 1) /
                                 kChunkBytes);
  }
  // Room for chunk `c` coming in: the oldest free room, and (simgpu's MakeRoomLocked when the
  // device is full) the room of the oldest-resident chunks, evicted now (their bytes counted in
  // `evicted`). Returns when the room is free.
  double TakeRoom(uint32_t c, uint64_t* evicted) {
    const uint64_t need = footprint_[c];
    if (room_.bytes() >= need) return room_.Take(need);
    const double when = room_.Take(room_.bytes());
    const uint64_t out = state_.EvictOldestFor(cap_, need);
    if (state_.bytes() + need > cap_ && result_ != nullptr) ++result_->overcommit_chunks;
    *evicted += out;
    // What the evictions freed beyond this chunk's need is free now.
    if (state_.bytes() + need < cap_) room_.Give(when, cap_ - state_.bytes() - need);
    return when;
  }
  // `stream`'s tail once the host has issued to it: no work the host issues starts before its
  // clock.
  double& HostIssued(Stream stream) {
    double& tail = Tail(stream);
    tail = std::max(tail, host_busy_);
    return tail;
  }
  // The host thread is blocked `cost` for a call naming `bytes`; counted in the result when it is
  // the engine's (not the job's launch).
  void Charge(const CallCost& cost, uint64_t bytes, bool engine_call = true) {
    const double seconds = cost.Of(bytes);
    host_busy_ += seconds;
    if (result_ != nullptr && engine_call) {
      ++result_->host_calls;
      result_->host_call_seconds += seconds;
    }
  }
  uint64_t BytesOf(const std::vector<uint32_t>& chunks) const {
    uint64_t bytes = 0;
    for (const uint32_t c : chunks) bytes += footprint_[c];
    return bytes;
  }
  // The resident chunks of [address, address + bytes) (scratch_).
  const std::vector<uint32_t>& ResidentIn(uint64_t address, uint64_t bytes) {
    scratch_.clear();
    for (uint32_t c = First(address); c < End(address, bytes); ++c) {
      if (state_.resident(c)) scratch_.push_back(c);
    }
    return scratch_;
  }
  // Chunks `out` leave the device from `when`: those a kernel issued before still uses then count
  // in SimResult::early_moves (the engine's order is what prevents that).
  void NoteEarly(const std::vector<uint32_t>& out, double when) {
    if (result_ == nullptr) return;
    for (const uint32_t c : out) {
      if (used_until_[c] > when + 1e-12) ++result_->early_moves;
    }
  }
  // Chunk `c` leaves the device (if resident); its room is free from `when` (as far as the
  // device is not over its capacity).
  void Leave(uint32_t c, double when) {
    if (!state_.resident(c)) return;
    state_.Remove(c);
    const uint64_t accounted = state_.bytes() + room_.bytes();
    if (accounted < cap_) room_.Give(when, std::min<uint64_t>(footprint_[c], cap_ - accounted));
  }
  // Returns the chunk's bytes when it held data (copied in), 0 when it is zero-filled.
  uint64_t MakeResident(uint32_t c) {
    state_.Add(c);
    const uint64_t copied = populated_[c] ? footprint_[c] : 0;
    populated_[c] = 1;
    return copied;
  }
  // simgpu's MoveTime: the copies in and out (bytes) start with the stream's turn (and once the
  // room they take is free), each on its engine. Returns when they end.
  double Move(Stream stream, uint64_t in, uint64_t out, double room) {
    double& tail = HostIssued(stream);
    const double start = std::max(tail, room);
    double end = start;
    if (in > 0) end = std::max(end, t_.Book(true, start, H2DSeconds(cost_, in)));
    if (out > 0) end = std::max(end, t_.Book(false, start, D2HSeconds(cost_, out)));
    tail = end;
    if (result_ != nullptr) {
      result_->h2d_bytes += in;
      result_->d2h_bytes += out;
    }
    return end;
  }

  const CostModel cost_;
  const std::vector<uint32_t>& footprint_;
  const uint64_t cap_;
  ChunkResidency state_;
  std::vector<char> populated_;     // per chunk: holds data (written since made or discarded)
  std::vector<char> on_host_;       // per chunk: placed on the host (PlaceOnHost)
  std::vector<double> used_until_;  // per chunk: the end of the last kernel issued that uses it
  Timelines t_;
  // Free device memory by the time each piece became free, earliest first (cap_ - resident bytes).
  FreeRoom<double> room_;
  std::vector<uint32_t> scratch_;
  double job_ = 0;
  std::deque<double> streams_;  // side streams' tails (stable addresses)
  std::deque<double> events_;   // events' recorded times
  double host_now_ = 0;
  double host_busy_ = 0;  // the calling thread's clock: its calls' costs and its waits
  SimResult* result_ = nullptr;
};

}  // namespace spillway::policy

#endif  // SPILLWAY_POLICY_PLANNER_SIMULATOR_TIMELINE_DEVICE_H_
