// The residency engine's side of planned schedules (policy files, policy/planned_policy.h): when
// the policy's schedule decides a launch, its moves replace the engine's own eviction, prefetch
// and lookahead for that launch. With side streams they are executed the way the simulator prices
// them (policy/simulator.cc, SimulatePlanned), one 2 MiB chunk at a time:
//
// - evictions go on the evict stream after what the launch stream has issued so far (so an
//   eviction follows the victim's last use), and after what every other stream that launched
//   since the victim's newest use has (a kernel there may read it through a pointer in device
//   memory), one chunk per call, each followed by an event;
// - room is the engine's RoomLedger (policy/room_ledger.h), in the order it was made: the frees'
//   discards (a resident allocation's footprint, after an event on the free's stream) and the
//   evictions (each chunk's footprint: the granules it spans); each chunk brought in takes the
//   oldest room for its footprint and waits for the events that made it (when the ledger is empty,
//   for the newest eviction), and for any eviction of its own allocation still queued;
// - prefetches go on the side stream, an event after each allocation's chunks; a populate (a
//   fresh chunk, no copy) of an allocation this launch uses goes on the launch stream, so the
//   kernel does not wait behind unrelated copies; a run of chunks of one allocation that waits
//   for nothing more than its first chunk is one call (the driver migrates a range in order, so
//   its room is taken as one call per chunk would take it, for fewer calls);
// - a launch waits only for the side-stream event after the newest prefetch of what it uses.
//
// An arena (an allocation of at least kArenaMinBytes reached through an interior pointer) stays
// whole in the engine's tracking, but its ordering state is kept per 2 MiB chunk: a launch waits
// only for the prefetches of the chunks its pointers name (ScheduledArenaUse), a chunk coming in
// only for a queued eviction of that chunk, and an evicted chunk only for that chunk's last use.
//
// Without side streams (once the order events exist) the same ops run with the evict and side
// streams being the launch stream; before that, all go on the launch stream before the kernel.
#include <algorithm>
#include <utility>
#include <vector>

#include "common/cost_model.h"
#include "policy/residency_engine.h"

namespace spillway::policy {
namespace {

struct ResolvedMove {
  ScheduledMove::Kind kind;
  uint64_t id;
  uint64_t base;  // the allocation's
  uint64_t address;
  uint64_t bytes;
  bool maybe_absent;  // makes no room in the ledger (ScheduledMove::maybe_absent)
};

// One device call of a position's execution, planned under the engine's lock.
struct ScheduleOp {
  enum class Type { kRecord, kWait, kToHost, kToDevice };
  enum class On { kLaunch, kEvict, kSide, kOther };
  Type type;
  On on;
  uint64_t seq = 0;  // kRecord / kWait: the schedule event
  uint64_t id = 0;   // kToHost / kToDevice: the range moved
  uint64_t address = 0;
  uint64_t bytes = 0;
  Stream other = nullptr;  // On::kOther: the stream
};

// Moves that bring data to the device; the others (evict, discard) send it away.
bool IsIncoming(ScheduledMove::Kind kind) {
  return kind == ScheduledMove::Kind::kPrefetch || kind == ScheduledMove::Kind::kPopulate;
}

// Calls `f(address, bytes)` for the 2 MiB-aligned pieces of [address, address + bytes).
template <typename F>
void ForEachPiece(uint64_t address, uint64_t bytes, F f) {
  const uint64_t end = address + bytes;
  while (address < end) {
    const uint64_t piece_end = std::min(end, (address / kChunkBytes + 1) * kChunkBytes);
    f(address, piece_end - address);
    address = piece_end;
  }
}

// Reused per thread, so a warm launch path does not allocate.
thread_local std::vector<ScheduledMove> t_scheduled;
thread_local std::vector<ResolvedMove> t_resolved;
thread_local std::vector<ScheduleOp> t_ops;
thread_local std::vector<uint64_t> t_evict_seqs;
thread_local std::vector<RoomLedger::Room> t_slot;
thread_local std::vector<uint64_t> t_arena_ids;
thread_local std::vector<uint64_t> t_pieces;
thread_local std::vector<ArenaChunk> t_chunks;

bool Contains(const std::vector<uint64_t>& v, uint64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

bool ResidencyEngine::adherence(ScheduleAdherence* out) const {
  std::lock_guard lock(mutex_);
  const ScheduleAdherence* a = policy_->adherence();
  if (a == nullptr) return false;
  *out = *a;
  return true;
}

void ResidencyEngine::ScheduledArenaUse(const AccessSet& access, const std::vector<uint64_t>& words,
                                        std::vector<uint64_t>* arena_ids,
                                        std::vector<uint64_t>* pieces) {
  for (const Allocation& allocation : access) {
    if (allocation.size < kArenaMinBytes || !tracked_.contains(allocation.id)) continue;
    auto arena = schedule_offsets_.find(allocation.id);
    if (arena == schedule_offsets_.end()) {
      if (std::none_of(words.begin(), words.end(), [&allocation](uint64_t word) {
            return word != allocation.base && allocation.Contains(word);
          })) {
        continue;
      }
      arena = schedule_offsets_.emplace(allocation.id, std::vector<uint64_t>{}).first;
      // Its chunks start from the whole allocation's state.
      const auto whole = schedule_state_.find(allocation.id);
      if (whole != schedule_state_.end()) {
        for (uint64_t c = 0; c * kArenaChunkBytes < allocation.size; ++c) {
          schedule_chunk_state_[PieceId(allocation.id, c)] = whole->second;
        }
        schedule_state_.erase(whole);
      }
    }
    const bool named = ForEachNamedChunk(allocation, words, &arena->second, [&](uint64_t c) {
      const uint64_t piece = PieceId(allocation.id, c);
      if (!Contains(*pieces, piece)) pieces->push_back(piece);
    });
    // Without a pointer into it this launch uses it whole.
    if (named && !Contains(*arena_ids, allocation.id)) arena_ids->push_back(allocation.id);
  }
}

const std::vector<ArenaChunk>& ResidencyEngine::ScheduledArenaChunks(
    const AccessSet& access, const std::vector<uint64_t>& words) {
  // The arenas this launch reaches by pointer, and the chunks it uses of them (learned from the
  // first launch on, with a policy file, so that the offsets are known when following begins).
  t_arena_ids.clear();
  t_pieces.clear();
  t_chunks.clear();
  if (policy_->adherence() == nullptr) return t_chunks;
  ScheduledArenaUse(access, words, &t_arena_ids, &t_pieces);
  for (const uint64_t piece : t_pieces) {
    t_chunks.push_back(ArenaChunk{ArenaPieceAllocation(piece), ArenaPieceChunk(piece)});
  }
  return t_chunks;
}

bool ResidencyEngine::TakeScheduledMoves() {
  if (policy_->ScheduledMoves(&t_scheduled)) return true;
  schedule_active_ = false;
  return false;
}

void ResidencyEngine::TrimRoomIfFollowingBegins(std::unique_lock<EngineMutex>& lock,
                                                std::vector<uint64_t>* ids) {
  if (schedule_active_) return;
  // Following begins (again): the ledger keeps at most the device's free memory now. Its room
  // was made by the learned policy, and what the ledger does not see (demand faults) may have
  // taken it since: a chunk the schedule brought into such room would not wait for the room it
  // really takes, and the device would go over the budget and evict by itself (`train_like` at
  // 4x: a third of the weights, every step). The oldest room goes first; a chunk that finds the
  // ledger empty waits for the newest eviction. The device is asked without the lock; another
  // thread may free what this launch uses meanwhile.
  lock.unlock();
  uint64_t free = 0, total = 0;
  const bool known = device_->MemoryInfo(&free, &total) == kDeviceOk;
  lock.lock();
  const auto freed = [this](uint64_t id) { return !tracked_.contains(id); };
  std::erase_if(*ids, freed);
  std::erase_if(t_arena_ids, freed);
  // The chunks of an arena the schedule keeps whole: freed with the allocation.
  std::erase_if(t_pieces, [&freed](uint64_t piece) { return freed(ArenaPieceAllocation(piece)); });
  room_.Trim(order_seq_, kOrderEvents / 2, known ? free : UINT64_MAX);
}

void ResidencyEngine::PlanScheduled(const std::vector<uint64_t>& ids, bool side, Stream stream) {
  std::vector<ResolvedMove>& resolved = t_resolved;
  std::vector<ScheduleOp>& ops = t_ops;
  resolved.clear();
  ops.clear();
  const std::vector<uint64_t>& arena_ids = t_arena_ids;
  const std::vector<uint64_t>& pieces = t_pieces;
  schedule_active_ = true;
  const uint64_t launch = ++schedule_launches_;
  // This launch is its stream's newest; a stream silent for a while is forgotten.
  constexpr uint64_t kSilentLaunches = 256;
  std::erase_if(schedule_streams_, [&](const std::pair<Stream, uint64_t>& s) {
    return s.first == stream || s.second + kSilentLaunches < launch;
  });
  schedule_streams_.emplace_back(stream, launch);
  const auto used_now = [stream, launch](ScheduleState& state) {
    state.last_stream = stream;
    state.last_launch = launch;
  };
  for (const uint64_t id : ids) {
    if (Contains(arena_ids, id)) continue;
    if (!schedule_offsets_.contains(id)) {
      used_now(schedule_state_[id]);
      continue;
    }
    for (uint64_t c = 0; c * kArenaChunkBytes < tracked_.at(id).size; ++c) {  // used whole
      used_now(schedule_chunk_state_[PieceId(id, c)]);
    }
  }
  for (const uint64_t piece : pieces) used_now(schedule_chunk_state_[piece]);
  // The ordering state of the chunks [address, address + bytes) of an arena move (of the whole
  // allocation otherwise), for `f(ScheduleState&)`.
  const auto for_state = [this](const ResolvedMove& move, uint64_t address, uint64_t bytes,
                                auto f) {
    if (!schedule_offsets_.contains(move.id)) {
      f(schedule_state_[move.id]);
      return;
    }
    for (uint64_t c = (address - move.base) / kArenaChunkBytes;
         c <= (address + bytes - 1 - move.base) / kArenaChunkBytes; ++c) {
      f(schedule_chunk_state_[PieceId(move.id, c)]);
    }
  };
  // An order event this old may have been recorded again for something newer: no wait.
  const auto fresh = [this](uint64_t seq) {
    return seq != 0 && seq + kOrderEvents / 2 > order_seq_;
  };
  for (const ScheduledMove& move : t_scheduled) {
    const auto it = tracked_.find(move.id);
    if (it == tracked_.end() || move.offset >= it->second.size) continue;
    Tracked& tracked = it->second;
    const uint64_t bytes = std::min(move.bytes, tracked.size - move.offset);
    resolved.push_back(ResolvedMove{move.kind, move.id, tracked.base, tracked.base + move.offset,
                                    bytes, move.maybe_absent});
    // Residency is tracked per allocation: any part gone counts as gone, any part in as in.
    const bool in = IsIncoming(move.kind);
    if (!in && tracked.resident) {
      tracked.resident = false;
      tracked.pending_batch = 0;
      resident_bytes_ -= tracked.footprint;
    } else if (in && !tracked.resident) {
      tracked.resident = true;
      resident_bytes_ += tracked.footprint;
    }
  }
  using Type = ScheduleOp::Type;
  using On = ScheduleOp::On;
  // Without side streams the same ops run with the evict and side streams being the launch
  // stream: the waits for other streams, and a launch's for what an earlier launch's stream
  // prefetched, still order the moves against the job's other streams.
  if (!order_ready_.load(std::memory_order_acquire)) {
    for (const ResolvedMove& move : resolved) {  // in the file's order, before the kernel
      ops.push_back(ScheduleOp{IsIncoming(move.kind) ? Type::kToDevice : Type::kToHost, On::kLaunch,
                               0, move.id, move.address, move.bytes});
    }
    return;
  }
  // Evictions, a chunk at a time, after the launch stream's work so far.
  std::vector<uint64_t>& evict_seqs = t_evict_seqs;
  evict_seqs.clear();
  const uint64_t earlier_evictions = schedule_last_evict_seq_;
  Stream const evict_stream = side ? evict_stream_ : stream;
  for (const ResolvedMove& move : resolved) {
    if (IsIncoming(move.kind)) continue;
    if (evict_seqs.empty() && ops.empty()) {
      const uint64_t after_launch = ++order_seq_;
      ops.push_back(ScheduleOp{Type::kRecord, On::kLaunch, after_launch});
      ops.push_back(ScheduleOp{Type::kWait, On::kEvict, after_launch});
      // After what each other stream has so far, where it is the stream of a victim's newest use
      // or launched after that use: a kernel launched after the victim's newest known use may
      // still read it through a pointer stored in device memory (an optimizer reading gradients
      // from a pointer table, on its own stream). (An arena's evicted chunks: per chunk.) The
      // legacy default stream (null) is one of them: PyTorch launches there by default.
      const auto after_other = [&](Stream other) {
        if (other == stream) return;
        for (const ScheduleOp& op : ops) {
          if (op.on == On::kOther && op.other == other) return;
        }
        const uint64_t after = ++order_seq_;
        ops.push_back(ScheduleOp{Type::kRecord, On::kOther, after, 0, 0, 0, other});
        ops.push_back(ScheduleOp{Type::kWait, On::kEvict, after});
      };
      for (const ResolvedMove& victim : resolved) {
        if (IsIncoming(victim.kind)) continue;
        for_state(victim, victim.address, victim.bytes, [&](const ScheduleState& state) {
          if (state.last_launch != 0) after_other(state.last_stream);
          for (const auto& [other, newest] : schedule_streams_) {
            if (newest > state.last_launch) after_other(other);
          }
        });
      }
    }
    ForEachPiece(move.address, move.bytes, [&](uint64_t address, uint64_t bytes) {
      ops.push_back(ScheduleOp{Type::kToHost, On::kEvict, 0, move.id, address, bytes});
      const uint64_t seq = ++order_seq_;
      ops.push_back(ScheduleOp{Type::kRecord, On::kEvict, seq});
      evict_seqs.push_back(seq);
      for_state(move, address, bytes, [seq](ScheduleState& state) { state.evict_seq = seq; });
      if (!move.maybe_absent) room_.Add(seq, evict_stream, Footprint(address, bytes));
    });
  }
  if (!evict_seqs.empty()) schedule_last_evict_seq_ = evict_seqs.back();
  // Room older than half the ring of events was made long ago (and its event may be recorded
  // again): it needs no wait.
  room_.Trim(order_seq_, kOrderEvents / 2, UINT64_MAX);
  // Incoming chunks: prefetches first, then populates (the simulator's order of taking slots).
  uint64_t waited[2] = {0, 0};  // the event each stream waited for last (launch, side)
  for (const ScheduledMove::Kind kind :
       {ScheduledMove::Kind::kPrefetch, ScheduledMove::Kind::kPopulate}) {
    for (const ResolvedMove& move : resolved) {
      if (move.kind != kind) continue;
      // Of an arena, only a chunk this launch uses is its own.
      bool used = Contains(ids, move.id);
      if (used && Contains(arena_ids, move.id)) {
        used = false;
        for (uint64_t c = (move.address - move.base) / kArenaChunkBytes;
             c <= (move.address + move.bytes - 1 - move.base) / kArenaChunkBytes; ++c) {
          used |= Contains(pieces, PieceId(move.id, c));
        }
      }
      const bool own = kind == ScheduledMove::Kind::kPopulate && used;
      const On on = own ? On::kLaunch : On::kSide;
      const int s = own ? 0 : 1;
      ForEachPiece(move.address, move.bytes, [&](uint64_t address, uint64_t bytes) {
        uint64_t own_eviction = 0;
        for_state(move, address, bytes, [&own_eviction](const ScheduleState& state) {
          own_eviction = std::max(own_eviction, state.evict_seq);
        });
        std::vector<RoomLedger::Room>& slot = t_slot;
        slot.clear();
        room_.Take(Footprint(address, bytes), 0, &slot);
        if (slot.empty()) {
          slot.push_back({evict_seqs.empty() ? earlier_evictions : evict_seqs.back(), nullptr, 0});
        }
        slot.push_back({own_eviction, nullptr, 0});
        bool waits = false;
        for (const RoomLedger::Room& room : slot) {
          const uint64_t wait = room.seq;
          if (wait == 0 || wait == waited[s]) continue;
          ops.push_back(ScheduleOp{Type::kWait, on, wait});
          waited[s] = wait;
          waits = true;
        }
        // A piece that waits for nothing more goes in the same call as the piece before it on
        // that stream: one cuMemPrefetchAsync for the run, which the driver migrates in order.
        if (!waits && !ops.empty() && ops.back().type == Type::kToDevice && ops.back().on == on &&
            ops.back().id == move.id && ops.back().address + ops.back().bytes == address) {
          ops.back().bytes += bytes;
          return;
        }
        ops.push_back(ScheduleOp{Type::kToDevice, on, 0, move.id, address, bytes});
      });
      if (!own) {
        const uint64_t seq = ++order_seq_;
        ops.push_back(ScheduleOp{Type::kRecord, On::kSide, seq});
        for_state(move, move.address, move.bytes,
                  [seq](ScheduleState& state) { state.ready_seq = seq; });
      }
    }
  }
  // The launch waits for the newest side-stream prefetch of what it uses (the side stream being
  // in order, that covers the earlier ones).
  // Of an arena reached by pointer, only the chunks named.
  uint64_t ready = 0;
  const auto take_ready = [&](ScheduleState& state) {
    if (fresh(state.ready_seq)) ready = std::max(ready, state.ready_seq);
    state.ready_seq = 0;
  };
  for (const uint64_t id : ids) {
    if (Contains(arena_ids, id)) continue;
    if (schedule_offsets_.contains(id)) {  // an arena used whole: every chunk's
      const uint64_t size = tracked_.at(id).size;
      for (uint64_t c = 0; c * kArenaChunkBytes < size; ++c) {
        const auto it = schedule_chunk_state_.find(PieceId(id, c));
        if (it != schedule_chunk_state_.end()) take_ready(it->second);
      }
      continue;
    }
    const auto it = schedule_state_.find(id);
    if (it != schedule_state_.end()) take_ready(it->second);
  }
  for (const uint64_t piece : pieces) {
    const auto it = schedule_chunk_state_.find(piece);
    if (it != schedule_chunk_state_.end()) take_ready(it->second);
  }
  if (ready != 0) ops.push_back(ScheduleOp{Type::kWait, On::kLaunch, ready});
}

int ResidencyEngine::IssueScheduled(Stream stream) {
  int failures = 0;
  // Without side streams PlanScheduled planned the evict and side ops for the launch stream.
  const bool side = side_ready_.load(std::memory_order_acquire);
  const Stream streams[3] = {stream, side ? evict_stream_ : stream, side ? side_stream_ : stream};
  for (const ScheduleOp& op : t_ops) {
    const Stream on = op.on == ScheduleOp::On::kOther ? op.other : streams[static_cast<int>(op.on)];
    DeviceResult result = kDeviceOk;
    switch (op.type) {
      case ScheduleOp::Type::kRecord:
        if (RecordOrderEvent(op.seq, on) != kDeviceOk) ++failures;
        continue;
      case ScheduleOp::Type::kWait:
        if (device_->StreamWaitEvent(on, OrderEvent(op.seq)) != kDeviceOk) ++failures;
        continue;
      // A plan's discard (dead data) and populate (not yet written) are decided from the kernels
      // alone: a host copy or fill the plan does not see (cuMemcpy*, cuMemset* on the job's
      // streams) may still read or have written the data, and dropping it would change the job's
      // results. So they are executed as a write-back and a plain prefetch; on a page that holds
      // no data the prefetch populates it on the device without a copy, as a populate would.
      case ScheduleOp::Type::kToHost:
        result = device_->PrefetchToHost(op.address, op.bytes, on);
        if (result == kDeviceOk) evict_bytes_.fetch_add(op.bytes, std::memory_order_relaxed);
        break;
      case ScheduleOp::Type::kToDevice:
        result = device_->PrefetchToDevice(op.address, op.bytes, on);
        if (result == kDeviceOk) prefetch_bytes_.fetch_add(op.bytes, std::memory_order_relaxed);
        break;
    }
    if (result != kDeviceOk) {
      // As in Issue: a move whose allocation was freed meanwhile lost nothing.
      std::lock_guard lock(mutex_);
      if (tracked_.contains(op.id)) ++failures;
    }
  }
  return failures;
}

}  // namespace spillway::policy
