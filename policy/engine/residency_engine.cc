// The residency engine: plan under the lock, then move data with the lock released.
#include "policy/engine/residency_engine.h"

#include <algorithm>
#include <vector>

#include "policy/engine/residency_engine_moves.h"

namespace spillway::policy {

namespace {

// Moves planned ahead leave alone what the last kRecentUseGuard launches used: a kernel launched
// just after on another stream may still read it through a pointer stored in device memory (an
// optimizer reading gradients from a pointer table), and the side streams are ordered only after
// the launch stream.
constexpr uint64_t kRecentUseGuard = 2;

// With the lookahead sized from time, room is made by eviction only for the data of the next
// kEvictAheadLaunches launches at most (and room for fresh allocations left for as many); data
// needed further ahead comes in only where room is free. Measured on train_like
// (docs/results/engine-simgpu.md): evicting earlier for data needed later moved more bytes than it
// hid, as a choice made early cannot pick the allocations that do not exist yet.
constexpr uint64_t kEvictAheadLaunches = 2;
// With a fixed lookahead count, room for fresh allocations is left for the next 4 launches at most
// (more evicted ahead what the window needs; measured likewise).
constexpr uint64_t kFixedHeadroomLaunches = 4;

// Reused per thread, so a warm launch path does not allocate.
thread_local std::vector<PlannedMove> t_moves;
thread_local std::vector<PlannedMove> t_side_moves;
thread_local std::vector<PlannedMove> t_evictions;
thread_local std::vector<PlannedMove> t_prefetches;
thread_local std::vector<uint64_t> t_ids;
thread_local std::vector<uint64_t> t_sizes;
thread_local std::vector<uint64_t> t_next;
thread_local std::vector<uint64_t> t_unallocated;
thread_local std::vector<uint64_t> t_needed;
thread_local std::vector<LaunchTimer::Sample> t_samples;
thread_local std::vector<uint64_t> t_room_waits;
thread_local std::vector<RoomLedger::Room> t_taken;
thread_local std::vector<std::pair<Stream, uint64_t>> t_launch_waited;
thread_local std::vector<OrderWait> t_own_waits;
thread_local std::vector<OrderWait> t_side_waits;
thread_local std::vector<LastUse> t_own_last_uses;
thread_local std::vector<LastUse> t_evict_last_uses;

// A number for the calling thread, given on its first launch (LaunchView::thread; never 0).
uint64_t LaunchingThread() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t thread = next.fetch_add(1, std::memory_order_relaxed);
  return thread;
}

uint64_t Bytes(const std::vector<PlannedMove>& moves) {
  uint64_t bytes = 0;
  for (const PlannedMove& move : moves) bytes += move.size;
  return bytes;
}

struct EvictableContext {
  const void* tracked;
  uint64_t stamp;
  uint64_t guard;  // launches since the last use before an allocation may go (0: any but this one)
  const std::vector<uint64_t>* keep = nullptr;  // sorted ids that may not go either (null: none)
};

}  // namespace

uint64_t ResidencyEngine::Footprint(uint64_t base, uint64_t size) const {
  return GranuleFootprint(base, size, options_.residency_granule);
}

ResidencyEngine::ResidencyEngine(Device* device, std::unique_ptr<EvictionPolicy> policy,
                                 uint64_t budget_bytes, EngineOptions options)
    : device_(device),
      budget_bytes_(budget_bytes),
      options_(options),
      moves_(policy->MovesData()),
      policy_(std::move(policy)),
      predictor_(policy_->step_predictor()),
      time_observer_(policy_->time_observer()),
      schedule_source_(policy_->schedule_source()),
      timer_(device) {}

double ResidencyEngine::lookahead_bytes_per_second() const {
  std::lock_guard lock(mutex_);
  return sizer_.bytes_per_second();
}

uint64_t ResidencyEngine::resident_estimate() const {
  std::lock_guard lock(mutex_);
  return resident_bytes_ + fixed_bytes_;
}

uint64_t ResidencyEngine::predicted_launches() const {
  std::lock_guard lock(mutex_);
  return predictor_ != nullptr ? predictor_->predicted_launches() : 0;
}

uint64_t ResidencyEngine::step_length() const {
  std::lock_guard lock(mutex_);
  return predictor_ != nullptr ? predictor_->step_length() : 0;
}

uint64_t ResidencyEngine::thread_steps() const {
  std::lock_guard lock(mutex_);
  return predictor_ != nullptr ? predictor_->thread_steps() : 0;
}

uint64_t ResidencyEngine::reordered_launches() const {
  std::lock_guard lock(mutex_);
  return predictor_ != nullptr ? predictor_->reordered_launches() : 0;
}

void ResidencyEngine::OnAllocated(const Allocation& allocation, bool place_now) {
  bool host = false;  // a policy file's host rule places it (or another) on the host
  {
    std::lock_guard lock(mutex_);
    if (allocation.backing != Backing::kManaged) {
      fixed_bytes_ += allocation.size;
      return;
    }
    Tracked& tracked = tracked_[allocation.id];
    tracked = Tracked{};
    tracked.base = allocation.base;
    tracked.size = allocation.size;
    tracked.footprint = Footprint(allocation.base, allocation.size);
    if (schedule_source_ != nullptr) {
      schedule_source_->ObserveAllocated(allocation.id, allocation.size, allocation.call_site);
    }
    host = place_now && PlanHostPlacements(nullptr);  // residency_engine_host.cc
  }
  if (host) IssueHostPlacements(nullptr);
}

uint64_t ResidencyEngine::ForgetLocked(const Allocation& allocation) {
  if (allocation.backing != Backing::kManaged) {
    fixed_bytes_ -= std::min(fixed_bytes_, allocation.size);
    return 0;
  }
  const uint64_t resident_before = resident_bytes_;
  const auto it = tracked_.find(allocation.id);
  if (it != tracked_.end()) {
    MarkAbsent(&it->second, &resident_bytes_);
    tracked_.erase(it);
  }
  arenas_.Forget(allocation.id, ArenaView());
  policy_->Forget(allocation.id);
  schedule_.Forget(allocation.id, allocation.size);
  return resident_before - resident_bytes_;
}

void ResidencyEngine::Forget(const Allocation& allocation) {
  std::lock_guard lock(mutex_);
  ForgetLocked(allocation);
}

int ResidencyEngine::OnFree(const Allocation& allocation, Stream stream) {
  uint64_t seq = 0;
  {
    std::lock_guard lock(mutex_);
    const uint64_t room = ForgetLocked(allocation);
    if (!moves_) return 0;  // nothing is discarded: the free goes to the device as it is
    // Its room is free once `stream` has run the discard (after its last use there): an order
    // event recorded after it, which what takes the room waits for.
    if (room != 0 && (seq = NextOrderEvent()) != 0) room_.Add(seq, stream, room);
  }
  if (allocation.backing != Backing::kManaged) return 0;
  int failures = 0;
  // A discard keeps a freed allocation's dead data from ever being copied back by an eviction.
  // While nothing has had to leave the device (the job has fitted in the budget so far) none is
  // made: a free then costs no driver call of spillway's. A freed pool block left resident this
  // way may be written back once if the device fills later; the engine never evicts it itself.
  const DeviceResult discarded = DiscardsFrees()
                                     ? device_->Discard(allocation.base, allocation.size, stream)
                                     : kDeviceNotSupported;
  if (discarded == kDeviceOk) {
    discard_bytes_.fetch_add(allocation.size, std::memory_order_relaxed);
  } else if (discarded != kDeviceNotSupported) {
    // A driver that cannot discard (no cuMemDiscardBatchAsync before CUDA 13.0) is no failure:
    // the memory is freed as without spillway.
    failures = 1;
  }
  // A failure only loses an ordering hint: the room is then made by the device's own eviction.
  // (Another thread may take the room between the lock and this record: its wait then finds the
  // event's previous recording, long complete, and orders nothing.)
  if (seq != 0) RecordOrderEvent(seq, stream);
  return failures;
}

bool ResidencyEngine::OrderEventsReady() {
  std::call_once(order_once_, [this] {
    for (Event& event : order_events_) {
      if (device_->CreateEvent(&event) != kDeviceOk) return;
    }
    order_ready_.store(true, std::memory_order_release);
  });
  return order_ready_.load(std::memory_order_acquire);
}

DeviceResult ResidencyEngine::RecordOrderEvent(uint64_t seq, Stream stream) {
  if (seq > kOrderEvents / 2) {
    const Event older = OrderEvent(seq - kOrderEvents / 2);
    if (device_->QueryEvent(older) == kDeviceNotReady) device_->SynchronizeEvent(older);
  }
  return device_->RecordEvent(OrderEvent(seq), stream);
}

uint64_t ResidencyEngine::NextOrderEvent() {
  return order_ready_.load(std::memory_order_acquire) ? ++order_seq_ : 0;
}

void ResidencyEngine::PlanEviction(Tracked* tracked, uint64_t seq, Stream on) {
  moving_.store(true, std::memory_order_relaxed);
  tracked->pending_batch = 0;
  const uint64_t freed = MarkAbsent(tracked, &resident_bytes_);
  if (seq == 0) return;
  tracked->evict_seq = seq;
  tracked->evicted_on = on;
  room_.Add(seq, on, freed);
}

namespace {

// Appends the wait for order event `seq` (recorded on `from`) by stream `on`, unless `on` is
// `from` (in order already) or `on` waited for a newer event on `from` (events on one stream
// complete in order): `waited` holds the newest event `on` waited for, per stream.
void AddWait(uint64_t seq, Stream from, Stream on, std::vector<std::pair<Stream, uint64_t>>* waited,
             std::vector<uint64_t>* waits) {
  if (seq == 0 || from == on) return;
  for (auto& [stream, newest] : *waited) {
    if (stream != from) continue;
    if (newest >= seq) return;
    newest = seq;
    waits->push_back(seq);
    return;
  }
  waited->emplace_back(from, seq);
  waits->push_back(seq);
}

}  // namespace

void ResidencyEngine::TakeRoom(const Tracked& tracked, Stream on, bool on_side, uint64_t* own_room,
                               std::vector<uint64_t>* waits) {
  std::vector<std::pair<Stream, uint64_t>>* waited = on_side ? &side_waited_ : &t_launch_waited;
  // Its own eviction, if still queued elsewhere (an eviction older than half the ring is done).
  if (tracked.evict_seq != 0 && order_seq_ - tracked.evict_seq < kOrderEvents / 2) {
    AddWait(tracked.evict_seq, tracked.evicted_on, on, waited, waits);
  }
  uint64_t bytes = Missing(tracked);
  const uint64_t own = std::min(bytes, *own_room);  // freed before it on `on`: no wait
  *own_room -= own;
  bytes -= own;
  const uint64_t used = fixed_bytes_ + resident_bytes_;
  const uint64_t free = budget_bytes_ > used ? budget_bytes_ - used : 0;
  room_.Trim(order_seq_, kOrderEvents / 2, free);
  // Room free all along (not in the ledger, nor this launch's own) is taken first.
  const uint64_t ledgered = room_.bytes() + *own_room;
  std::vector<RoomLedger::Room>& taken = t_taken;
  taken.clear();
  room_.Take(bytes, free > ledgered ? free - ledgered : 0, &taken);
  for (const RoomLedger::Room& room : taken) AddWait(room.seq, room.stream, on, waited, waits);
}

bool ResidencyEngine::Evictable(const void* context, uint64_t id) {
  const auto* c = static_cast<const EvictableContext*>(context);
  const auto& tracked = *static_cast<const std::unordered_map<uint64_t, Tracked>*>(c->tracked);
  const auto it = tracked.find(id);
  return it != tracked.end() && OnDevice(it->second) != 0 &&
         it->second.used_by_launch + c->guard < c->stamp &&
         (c->keep == nullptr || !std::binary_search(c->keep->begin(), c->keep->end(), id));
}

bool ResidencyEngine::SideStreamReady() {
  if (options_.lookahead_launches <= 0) return false;
  return lookahead_.Ready(device_);
}

uint64_t ResidencyEngine::SizeLookahead(uint64_t stamp, const std::vector<uint64_t>& next) {
  const uint64_t limit = static_cast<uint64_t>(options_.lookahead_launches);
  if (!options_.size_lookahead_from_time) return limit;
  // The bytes each of the next launches needs that are not on the device yet, or are still in the
  // prefetch stream's queue (a batch not seen complete).
  std::vector<uint64_t>& needed = t_needed;
  needed.assign(std::min<uint64_t>(limit, predictor_->prediction_horizon()), 0);
  for (const uint64_t id : next) {
    const auto it = tracked_.find(id);
    if (it == tracked_.end()) continue;
    if (it->second.resident && it->second.pending_batch <= lookahead_.done()) continue;
    const uint64_t distance = predictor_->NextUse(id);
    if (distance >= 1 && distance <= needed.size()) {
      needed[distance - 1] += it->second.resident ? it->second.footprint : Missing(it->second);
    }
  }
  return sizer_.Window(stamp, predictor_->step_length(), needed);
}

void ResidencyEngine::NoteLastUse(const Tracked& tracked, Stream stream,
                                  std::vector<LastUse>* last_uses) {
  if (!tracked.launched || tracked.last_stream == stream) return;
  for (const LastUse& last_use : *last_uses) {
    if (last_use.stream == tracked.last_stream) return;
  }
  const uint64_t seq = NextOrderEvent();
  if (seq != 0) last_uses->push_back(LastUse{tracked.last_stream, seq});
}

// kEvictAheadLaunches of each launching thread whose own step the policy follows: their launches
// interleave, so as many launches of the whole sequence reach about as far into each thread's.
uint64_t ResidencyEngine::EvictAhead() const {
  return kEvictAheadLaunches * std::max<uint64_t>(1, predictor_->thread_steps());
}

uint64_t ResidencyEngine::PlanLookahead(uint64_t stamp, Stream stream, uint64_t access_bytes,
                                        std::vector<PlannedMove>* side_moves) {
  // Only a policy that predicts the next launches has a lookahead.
  if (predictor_ == nullptr) return 0;
  std::vector<uint64_t>& next = t_next;
  predictor_->PredictNextUses(options_.lookahead_launches, &next);
  if (next.empty()) return 0;
  // How far ahead data must move now (sized from observed times, or the fixed count). Room is
  // made by eviction only for that data, and at most EvictAhead() launches ahead when sized from
  // time; further ahead (up to lookahead_launches), data comes only into free room.
  const uint64_t window = SizeLookahead(stamp, next);
  lookahead_window_.store(window, std::memory_order_relaxed);
  const uint64_t evict_ahead = EvictAhead();
  const uint64_t evict_horizon =
      options_.size_lookahead_from_time ? std::min(window, evict_ahead) : window;
  // What the next launches need is protected like the current access set, nearest first, as far
  // as it fits in the budget beside the access set: what lies beyond cannot be brought in anyway,
  // and protecting it would keep the next launches from making room.
  uint64_t protected_bytes = fixed_bytes_ + access_bytes;
  for (size_t i = 0; i < next.size(); ++i) {
    const auto it = tracked_.find(next[i]);
    if (it == tracked_.end() || it->second.used_by_launch == stamp) continue;
    if (protected_bytes + it->second.footprint > budget_bytes_) {
      next.resize(i);
      break;
    }
    protected_bytes += it->second.footprint;
    it->second.used_by_launch = stamp;
  }
  const uint64_t batch = lookahead_.next_batch();
  const EvictableContext context{&tracked_, stamp, kRecentUseGuard};
  // An eviction on the evict stream, after the victim's last use, its room freed by an event.
  auto evict = [&](uint64_t victim) {
    Tracked& tracked = tracked_.at(victim);
    NoteLastUse(tracked, stream, &t_evict_last_uses);
    const uint64_t seq = NextOrderEvent();
    PlanEviction(&tracked, seq, lookahead_.evict());
    side_moves->push_back(PlannedMove{false, victim, tracked.base, tracked.size, seq});
  };
  // Room for the allocations the next launches will make (fresh activations), so that their first
  // launch need not evict on its own stream: taken from what is needed after the window.
  const uint64_t headroom_window = std::min(
      evict_horizon, options_.size_lookahead_from_time ? evict_ahead : kFixedHeadroomLaunches);
  predictor_->PredictUnallocated(headroom_window, &t_unallocated);
  uint64_t headroom = 0;
  for (const uint64_t size : t_unallocated) headroom += Footprint(0, size);
  while (headroom != 0 && fixed_bytes_ + resident_bytes_ + headroom > budget_bytes_) {
    const uint64_t victim = policy_->PickVictim(&Evictable, &context);
    const uint64_t distance = victim == 0 ? 0 : predictor_->NextUse(victim);
    if (victim == 0 || distance <= headroom_window) break;
    evict(victim);
  }
  const uint64_t budget = budget_bytes_ > headroom ? budget_bytes_ - headroom : 0;
  size_t prefetches = 0;
  for (const uint64_t id : next) {  // nearest use first
    const auto it = tracked_.find(id);
    if (it == tracked_.end() || it->second.resident) continue;
    const uint64_t distance = predictor_->NextUse(id);
    // Make room only for data within the eviction horizon, and only from allocations needed later
    // than this one (Belady); else stop.
    while (distance <= evict_horizon &&
           fixed_bytes_ + resident_bytes_ + Missing(it->second) > budget) {
      const uint64_t victim = policy_->PickVictim(&Evictable, &context);
      if (victim == 0 || predictor_->NextUse(victim) <= distance) break;
      evict(victim);
    }
    if (fixed_bytes_ + resident_bytes_ + Missing(it->second) > budget) break;
    // It comes in once the room it takes is free (the discards' and evictions' events).
    t_room_waits.clear();
    uint64_t no_own_room = 0;
    TakeRoom(it->second, lookahead_.side(), /*on_side=*/true, &no_own_room, &t_room_waits);
    for (const uint64_t seq : t_room_waits) t_side_waits.push_back(OrderWait{prefetches, seq});
    ++prefetches;
    MarkResident(&it->second, &resident_bytes_);
    it->second.pending_batch = batch;
    side_moves->push_back(PlannedMove{true, it->first, it->second.base, it->second.size});
  }
  if (side_moves->empty()) return 0;
  lookahead_.Planned(batch);
  return batch;
}

int ResidencyEngine::IssueLookahead(const std::vector<PlannedMove>& moves, uint64_t batch) {
  static const std::vector<LastUse> kNoLastUses;
  static const std::vector<OrderWait> kNoWaits;
  std::vector<PlannedMove>& evictions = t_evictions;
  std::vector<PlannedMove>& prefetches = t_prefetches;
  evictions.clear();
  prefetches.clear();
  for (const PlannedMove& move : moves) (move.to_device ? prefetches : evictions).push_back(move);
  int failures = 0;
  Stream const evict_stream = lookahead_.evict(), side_stream = lookahead_.side();
  if (!evictions.empty()) {
    // After the victims' last uses: what the launch stream has so far, and other streams' uses.
    if (device_->StreamWaitEvent(evict_stream, lookahead_.BatchEvent(batch, 0)) != kDeviceOk) {
      ++failures;
    }
    // The write-backs' time on the evict stream gives the device-to-host bandwidth.
    const int transfer =
        options_.size_lookahead_from_time ? timer_.BeginTransfer(evict_stream) : -1;
    failures += Issue(evictions, evict_stream, true, t_evict_last_uses, kNoWaits);
    if (transfer >= 0) timer_.EndTransfer(transfer, Bytes(evictions), false, evict_stream);
  }
  // Each prefetch waits for the events of the room it takes (t_side_waits), so one batch's
  // evictions overlap the previous batch's prefetches.
  // The prefetches' time on the prefetch stream gives the bandwidth the lookahead is sized with.
  const bool timed = options_.size_lookahead_from_time && !prefetches.empty();
  const int transfer = timed ? timer_.BeginTransfer(side_stream) : -1;
  failures += Issue(prefetches, side_stream, true, kNoLastUses, t_side_waits);
  if (transfer >= 0) timer_.EndTransfer(transfer, Bytes(prefetches), true, side_stream);
  if (device_->RecordEvent(lookahead_.BatchEvent(batch, 1), side_stream) != kDeviceOk) ++failures;
  return failures;
}

int ResidencyEngine::Issue(const std::vector<PlannedMove>& moves, Stream stream, bool ahead,
                           const std::vector<LastUse>& last_uses,
                           const std::vector<OrderWait>& waits) {
  int failures = 0;
  for (const LastUse& last_use : last_uses) {
    if (RecordOrderEvent(last_use.seq, last_use.stream) != kDeviceOk ||
        device_->StreamWaitEvent(stream, OrderEvent(last_use.seq)) != kDeviceOk) {
      ++failures;
    }
  }
  size_t wait = 0;
  for (size_t m = 0; m < moves.size(); ++m) {
    const PlannedMove& move = moves[m];
    for (; wait < waits.size() && waits[wait].before <= m; ++wait) {
      if (device_->StreamWaitEvent(stream, OrderEvent(waits[wait].seq)) != kDeviceOk) ++failures;
    }
    const DeviceResult result = move.to_device
                                    ? device_->PrefetchToDevice(move.base, move.size, stream)
                                    : device_->PrefetchToHost(move.base, move.size, stream);
    if (result != kDeviceOk) {
      // Another thread may have freed the allocation after the move was planned (moves are
      // issued outside the lock): nothing was lost, so that is not a failure.
      std::lock_guard lock(mutex_);
      if (tracked_.contains(move.id)) ++failures;
    } else if (move.to_device) {
      prefetch_bytes_.fetch_add(move.size, std::memory_order_relaxed);
      if (ahead) lookahead_bytes_.fetch_add(move.size, std::memory_order_relaxed);
    } else {
      evict_bytes_.fetch_add(move.size, std::memory_order_relaxed);
    }
    // The room is free (and the data on the host) once the stream gets here.
    if (move.seq != 0 && RecordOrderEvent(move.seq, stream) != kDeviceOk) {
      ++failures;
    }
  }
  return failures;
}

uint64_t ResidencyEngine::LoadWhatFits(const std::vector<uint64_t>& ids, Stream stream,
                                       uint64_t* own_room, std::vector<PlannedMove>* moves,
                                       std::vector<OrderWait>* waits) {
  uint64_t loaded = 0;
  for (const uint64_t id : ids) {
    const auto it = tracked_.find(id);
    if (it == tracked_.end() || it->second.resident || it->second.on_host) continue;
    if (schedule_source_ != nullptr && !schedule_source_->MayPrefetch(it->first)) continue;
    if (fixed_bytes_ + resident_bytes_ + Missing(it->second) > budget_bytes_) continue;
    t_room_waits.clear();
    TakeRoom(it->second, stream, /*on_side=*/false, own_room, &t_room_waits);
    for (const uint64_t seq : t_room_waits) waits->push_back(OrderWait{moves->size(), seq});
    MarkResident(&it->second, &resident_bytes_);
    moves->push_back(PlannedMove{true, it->first, it->second.base, it->second.size});
    loaded += it->second.size;
  }
  return loaded;
}

void ResidencyEngine::PlanOwnMoves(const std::vector<uint64_t>& ids, uint64_t needed,
                                   uint64_t stamp, Stream stream, std::vector<PlannedMove>* moves,
                                   std::vector<LastUse>* last_uses, std::vector<OrderWait>* waits,
                                   const std::vector<uint64_t>* keep) {
  // Evict until `ids` fit beside what stays, or nothing else can go: on this stream, after the
  // victims' last uses elsewhere; one order event after the evictions.
  // What `stream` has waited for so far in this planning (TakeRoom): nothing yet.
  t_launch_waited.clear();
  const EvictableContext context{&tracked_, stamp, 0, keep};
  const size_t first = moves->size();
  uint64_t own_seq = 0, own_room = 0;
  while (fixed_bytes_ + resident_bytes_ + needed > budget_bytes_) {
    const uint64_t victim = policy_->PickVictim(&Evictable, &context);
    if (victim == 0) break;
    Tracked& tracked = tracked_.at(victim);
    NoteLastUse(tracked, stream, last_uses);
    if (own_seq == 0) own_seq = NextOrderEvent();
    // Its room is this launch's own until the prefetches below have taken what they need.
    own_room += OnDevice(tracked);
    PlanEviction(&tracked, 0, stream);
    if (own_seq != 0) {
      tracked.evict_seq = own_seq;
      tracked.evicted_on = stream;
    }
    moves->push_back(PlannedMove{false, victim, tracked.base, tracked.size});
  }
  if (own_seq != 0 && moves->size() > first) moves->back().seq = own_seq;
  // Prefetch what fits; what does not is left to demand paging.
  LoadWhatFits(ids, stream, &own_room, moves, waits);
  // The own evictions' room left over is free for others once this stream has run them.
  if (own_seq != 0) room_.Add(own_seq, stream, own_room);
}

int ResidencyEngine::OnLaunch(const AccessSet& access, Stream stream, uint64_t function) {
  static const std::vector<uint64_t> kNoWords;
  return OnLaunch(access, kNoWords, stream, function);
}

int ResidencyEngine::OnLaunch(const AccessSet& access, const std::vector<uint64_t>& words,
                              Stream stream, uint64_t function) {
  if (!moves_) return 0;  // the device pages the kernel's data in on demand
  std::vector<PlannedMove>& moves = t_moves;
  std::vector<PlannedMove>& side_moves = t_side_moves;
  moves.clear();
  side_moves.clear();
  std::vector<uint64_t>& ids = t_ids;
  std::vector<uint64_t>& sizes = t_sizes;
  ids.clear();
  sizes.clear();
  const bool side = SideStreamReady();
  // Observed times (read without waiting) size the lookahead, and go to a policy that asks for
  // them (online planning's recording). Only once the policy has predicted a step (never for
  // lru: nothing to size) and something has had to move.
  const bool timing =
      side &&
      (options_.size_lookahead_from_time || policy_times_.load(std::memory_order_relaxed)) &&
      step_seen_.load(std::memory_order_relaxed) && moving_.load(std::memory_order_relaxed);
  std::vector<LaunchTimer::Sample>& samples = t_samples;
  samples.clear();
  uint64_t done_batch = 0;
  if (timing) {
    timer_.Poll(&samples);
    done_batch = lookahead_.Poll(device_);
  }
  uint64_t wait_batch = 0, batch = 0;
  uint64_t stamp = 0, step_mark = 0;
  bool scheduled = false, host = false;
  {
    std::unique_lock lock(mutex_);
    stamp = ++launch_stamp_;
    lookahead_.SeenDone(done_batch);
    for (const LaunchTimer::Sample& sample : samples) {
      if (sample.kind == LaunchTimer::Kind::kKernel) {
        sizer_.AddKernelTime(sample.key, sample.seconds);
        if (time_observer_ != nullptr)
          time_observer_->ObserveKernelTime(sample.key, sample.seconds);
      } else if (sample.kind == LaunchTimer::Kind::kStep) {
        if (time_observer_ != nullptr) time_observer_->ObserveStepTime(sample.key, sample.seconds);
      } else {
        sizer_.AddTransfer(sample.key, sample.seconds, sample.kind == LaunchTimer::Kind::kToDevice);
      }
    }
    arenas_.ExpandAccess(access, words, ArenaView(), &ids, &sizes);
    const std::vector<ArenaChunk>& chunks =
        schedule_.ArenaChunks(access, words, tracked_, Adherence() != nullptr);
    policy_->ObserveLaunch(LaunchView{function, ids.data(), sizes.data(), ids.size(), stamp,
                                      chunks.data(), chunks.size(), LaunchingThread()});
    step_mark = time_observer_ != nullptr ? time_observer_->TakeStepMark() : 0;
    policy_times_.store(time_observer_ != nullptr && time_observer_->WantsTimes(),
                        std::memory_order_relaxed);
    host = PlanHostPlacements(stream);  // residency_engine_host.cc
    uint64_t needed = 0, access_bytes = 0;
    for (const uint64_t id : ids) {
      const auto it = tracked_.find(id);
      if (it == tracked_.end()) continue;
      if (it->second.used_by_launch != stamp) access_bytes += it->second.footprint;
      it->second.used_by_launch = stamp;
      it->second.launched = true;
      it->second.last_stream = stream;
      policy_->Touch(id);
      if (!it->second.on_host) needed += Missing(it->second);
      // Prefetched ahead and not waited for yet: the launch waits for the newest such batch.
      if (OnDevice(it->second) != 0 && it->second.pending_batch != 0) {
        wait_batch = std::max(wait_batch, it->second.pending_batch);
        it->second.pending_batch = 0;
      }
    }
    // A policy file's schedule decides this launch's moves (residency_engine_schedule.cc).
    scheduled = schedule_.TakeMoves(schedule_source_);
    if (scheduled) {
      TrimRoomIfFollowingBegins(lock, &ids);
      schedule_.Plan(ids, order_ready_.load(std::memory_order_acquire),
                     side ? lookahead_.evict() : stream, stream,
                     ScheduleExecutor::Residency{&tracked_, &resident_bytes_, &room_, &order_seq_,
                                                 kOrderEvents, options_.residency_granule});
    }
    t_own_last_uses.clear();
    t_own_waits.clear();
    t_evict_last_uses.clear();
    t_side_waits.clear();
    t_launch_waited.clear();
    if (!scheduled) {
      PlanOwnMoves(ids, needed, stamp, stream, &moves, &t_own_last_uses, &t_own_waits);
    } else {
      // The schedule leaves some of this launch's data absent: the residency following began
      // with is not the one the plan starts from (the learned policy's, before), or the plan does
      // not match the step exactly. What fits beside what is resident is loaded before the
      // kernel, as the learned policy would, so the device does not page it in behind the
      // engine's count; nothing is evicted for it (the plan's residency stays as planned).
      uint64_t no_own_room = 0;
      unscheduled_load_bytes_.fetch_add(
          LoadWhatFits(ids, stream, &no_own_room, &moves, &t_own_waits), std::memory_order_relaxed);
    }
    if (side && !scheduled) batch = PlanLookahead(stamp, stream, access_bytes, &side_moves);
    if (predictor_ != nullptr && predictor_->prediction_horizon() != 0) {
      step_seen_.store(true, std::memory_order_relaxed);
    }
    if (scheduled) moving_.store(true, std::memory_order_relaxed);
  }
  int failures = 0;
  // The previous launch's kernel interval ends here, before this launch's own waits and moves; a
  // step the policy times begins here.
  if (timing && step_mark != 0) timer_.StepMark(step_mark, stream);
  if (timing) timer_.LaunchArrived(stamp, stream);
  if (wait_batch != 0 &&
      device_->StreamWaitEvent(stream, lookahead_.BatchEvent(wait_batch, 1)) != kDeviceOk) {
    ++failures;
  }
  if (host) IssueHostPlacements(stream);
  failures += Issue(moves, stream, false, t_own_last_uses, t_own_waits);
  if (timing) timer_.KernelReady(stamp, stream);
  if (scheduled) {
    failures += IssueScheduled(stream);  // residency_engine_schedule.cc
  } else if (batch != 0) {
    // The evictions ahead start after what the launch stream has so far (the victims' last uses
    // there); the prefetches signal the launches that need them.
    const Event after_launch_stream = lookahead_.BatchEvent(batch, 0);
    if (device_->RecordEvent(after_launch_stream, stream) != kDeviceOk) ++failures;
    failures += IssueLookahead(side_moves, batch);
  }
  // The order events (room ledger, schedules) exist from the second launch with side streams,
  // or following a schedule.
  if (side || scheduled) OrderEventsReady();
  return failures;
}

}  // namespace spillway::policy
