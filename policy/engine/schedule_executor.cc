// The residency engine's schedule executor (policy/engine/schedule_executor.h). With side streams
// the moves of a followed launch are executed the way the simulator prices them
// (policy/planner/simulator.cc, SimulatePlanned), one 2 MiB chunk at a time:
//
// - evictions go on the evict stream after what the launch stream has issued so far (so an
//   eviction follows the victim's last use), and after what every other stream that launched
//   since the victim's newest use has (a kernel there may read it through a pointer in device
//   memory), one chunk per call, each followed by an event;
// - room is the engine's RoomLedger (policy/engine/room_ledger.h), in the order it was made: the
// frees'
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
// only for the prefetches of the chunks its pointers name (ArenaUse), a chunk coming in only for a
// queued eviction of that chunk, and an evicted chunk only for that chunk's last use.
//
// Without side streams (once the order events exist) the same ops run with the evict and side
// streams being the launch stream; before that, all go on the launch stream before the kernel.
#include "policy/engine/schedule_executor.h"

#include <algorithm>

#include "common/cost_model.h"
#include "policy/engine/arena_chunks.h"

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

bool Contains(const std::vector<uint64_t>& v, uint64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Reused per thread, so a warm launch path does not allocate; a launch's plan lives here from
// ArenaChunks to the engine's issuing of PlannedOps.
thread_local std::vector<ScheduledMove> t_scheduled;
thread_local std::vector<ResolvedMove> t_resolved;
thread_local std::vector<ScheduleOp> t_ops;
thread_local std::vector<uint64_t> t_evict_seqs;
thread_local std::vector<RoomLedger::Room> t_slot;
thread_local std::vector<uint64_t> t_arena_ids;
thread_local std::vector<uint64_t> t_pieces;
thread_local std::vector<ArenaChunk> t_chunks;

}  // namespace

const std::vector<ScheduleOp>& ScheduleExecutor::PlannedOps() { return t_ops; }

void ScheduleExecutor::ArenaUse(const AccessSet& access, const std::vector<uint64_t>& words,
                                const TrackedMap& tracked, std::vector<uint64_t>* arena_ids,
                                std::vector<uint64_t>* pieces) {
  for (const Allocation& allocation : access) {
    if (allocation.size < kArenaMinBytes || !tracked.contains(allocation.id)) continue;
    auto arena = offsets_.find(allocation.id);
    if (arena == offsets_.end()) {
      if (!ReachedInside(allocation, words)) continue;
      arena = offsets_.emplace(allocation.id, std::vector<uint64_t>{}).first;
      // Its chunks start from the whole allocation's state.
      const auto whole = state_.find(allocation.id);
      if (whole != state_.end()) {
        for (uint64_t c = 0; c * kArenaChunkBytes < allocation.size; ++c) {
          chunk_state_[ArenaPieceId(allocation.id, c)] = whole->second;
        }
        state_.erase(whole);
      }
    }
    const bool named = ForEachNamedChunk(allocation, words, &arena->second, [&](uint64_t c) {
      const uint64_t piece = ArenaPieceId(allocation.id, c);
      if (!Contains(*pieces, piece)) pieces->push_back(piece);
    });
    // Without a pointer into it this launch uses it whole.
    if (named && !Contains(*arena_ids, allocation.id)) arena_ids->push_back(allocation.id);
  }
}

const std::vector<ArenaChunk>& ScheduleExecutor::ArenaChunks(const AccessSet& access,
                                                             const std::vector<uint64_t>& words,
                                                             const TrackedMap& tracked,
                                                             bool has_schedule) {
  // The arenas this launch reaches by pointer, and the chunks it uses of them (learned from the
  // first launch on, with a policy file, so that the offsets are known when following begins).
  t_arena_ids.clear();
  t_pieces.clear();
  t_chunks.clear();
  if (!has_schedule) return t_chunks;
  ArenaUse(access, words, tracked, &t_arena_ids, &t_pieces);
  for (const uint64_t piece : t_pieces) {
    t_chunks.push_back(ArenaChunk{ArenaPieceAllocation(piece), ArenaPieceChunk(piece)});
  }
  return t_chunks;
}

bool ScheduleExecutor::TakeMoves(ScheduleSource* source) {
  if (source != nullptr && source->ScheduledMoves(&t_scheduled)) return true;
  active_ = false;
  return false;
}

void ScheduleExecutor::DropFreed(const TrackedMap& tracked, std::vector<uint64_t>* ids) {
  const auto freed = [&tracked](uint64_t id) { return !tracked.contains(id); };
  std::erase_if(*ids, freed);
  std::erase_if(t_arena_ids, freed);
  // The chunks of an arena the schedule keeps whole: freed with the allocation.
  std::erase_if(t_pieces, [&freed](uint64_t piece) { return freed(ArenaPieceAllocation(piece)); });
}

void ScheduleExecutor::Forget(uint64_t id, uint64_t size) {
  state_.erase(id);
  if (offsets_.erase(id) != 0) {
    for (uint64_t c = 0; c * kArenaChunkBytes < size; ++c) chunk_state_.erase(ArenaPieceId(id, c));
  }
}

const std::vector<uint64_t>* ScheduleExecutor::SeenOffsets(uint64_t id) const {
  const auto it = offsets_.find(id);
  return it == offsets_.end() ? nullptr : &it->second;
}

void ScheduleExecutor::ForState(uint64_t id, uint64_t base, uint64_t address, uint64_t bytes,
                                absl::FunctionRef<void(State&)> f) {
  if (!offsets_.contains(id)) {
    f(state_[id]);
    return;
  }
  for (uint64_t c = (address - base) / kArenaChunkBytes;
       c <= (address + bytes - 1 - base) / kArenaChunkBytes; ++c) {
    f(chunk_state_[ArenaPieceId(id, c)]);
  }
}

void ScheduleExecutor::NoteUse(const std::vector<uint64_t>& ids, const TrackedMap& tracked,
                               Stream stream, uint64_t launch) {
  // This launch is its stream's newest; a stream silent for a while is forgotten.
  constexpr uint64_t kSilentLaunches = 256;
  std::erase_if(streams_, [&](const std::pair<Stream, uint64_t>& s) {
    return s.first == stream || s.second + kSilentLaunches < launch;
  });
  streams_.emplace_back(stream, launch);
  const auto used_now = [stream, launch](State& state) {
    state.last_stream = stream;
    state.last_launch = launch;
  };
  for (const uint64_t id : ids) {
    if (Contains(t_arena_ids, id)) continue;
    if (!offsets_.contains(id)) {
      used_now(state_[id]);
      continue;
    }
    for (uint64_t c = 0; c * kArenaChunkBytes < tracked.at(id).size; ++c) {  // used whole
      used_now(chunk_state_[ArenaPieceId(id, c)]);
    }
  }
  for (const uint64_t piece : t_pieces) used_now(chunk_state_[piece]);
}

void ScheduleExecutor::Plan(const std::vector<uint64_t>& ids, bool order_ready, Stream evict_stream,
                            Stream stream, const Residency& residency) {
  std::vector<ResolvedMove>& resolved = t_resolved;
  std::vector<ScheduleOp>& ops = t_ops;
  resolved.clear();
  ops.clear();
  active_ = true;
  NoteUse(ids, *residency.tracked, stream, ++launches_);
  for (const ScheduledMove& move : t_scheduled) {
    const auto it = residency.tracked->find(move.id);
    if (it == residency.tracked->end() || move.offset >= it->second.size) continue;
    TrackedAllocation& tracked = it->second;
    const uint64_t bytes = std::min(move.bytes, tracked.size - move.offset);
    resolved.push_back(ResolvedMove{move.kind, move.id, tracked.base, tracked.base + move.offset,
                                    bytes, move.maybe_absent});
    // Residency follows the chunks moved: a part gone leaves the allocation partly resident, and
    // the engine's count exact for its own moves once following ends.
    const bool in = IsIncoming(move.kind);
    if (!in) tracked.pending_batch = 0;
    MovePart(&tracked, tracked.base + move.offset, bytes, in, residency.granule,
             residency.resident_bytes);
  }
  // Without side streams the same ops run with the evict and side streams being the launch
  // stream: the waits for other streams, and a launch's for what an earlier launch's stream
  // prefetched, still order the moves against the job's other streams.
  if (!order_ready) {
    for (const ResolvedMove& move : resolved) {  // in the file's order, before the kernel
      ops.push_back(ScheduleOp{
          IsIncoming(move.kind) ? ScheduleOp::Type::kToDevice : ScheduleOp::Type::kToHost,
          ScheduleOp::On::kLaunch, 0, move.id, move.address, move.bytes});
    }
    return;
  }
  const uint64_t earlier_evictions = last_evict_seq_;
  PlanEvictions(evict_stream, stream, residency);
  // Room older than half the ring of events was made long ago (and its event may be recorded
  // again): it needs no wait.
  residency.room->Trim(*residency.order_seq, residency.order_events / 2, UINT64_MAX);
  PlanIncoming(ids, earlier_evictions, residency);
  PlanLaunchWait(ids, *residency.tracked, residency);
}

void ScheduleExecutor::PlanEvictions(Stream evict_stream, Stream stream,
                                     const Residency& residency) {
  using Type = ScheduleOp::Type;
  using On = ScheduleOp::On;
  std::vector<ScheduleOp>& ops = t_ops;
  // Evictions, a chunk at a time, after the launch stream's work so far.
  std::vector<uint64_t>& evict_seqs = t_evict_seqs;
  evict_seqs.clear();
  uint64_t& order_seq = *residency.order_seq;
  for (const ResolvedMove& move : t_resolved) {
    if (IsIncoming(move.kind)) continue;
    if (evict_seqs.empty() && ops.empty()) {
      const uint64_t after_launch = ++order_seq;
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
        const uint64_t after = ++order_seq;
        ops.push_back(ScheduleOp{Type::kRecord, On::kOther, after, 0, 0, 0, other});
        ops.push_back(ScheduleOp{Type::kWait, On::kEvict, after});
      };
      for (const ResolvedMove& victim : t_resolved) {
        if (IsIncoming(victim.kind)) continue;
        ForState(victim.id, victim.base, victim.address, victim.bytes, [&](const State& state) {
          if (state.last_launch != 0) after_other(state.last_stream);
          for (const auto& [other, newest] : streams_) {
            if (newest > state.last_launch) after_other(other);
          }
        });
      }
    }
    ForEachPiece(move.address, move.bytes, [&](uint64_t address, uint64_t bytes) {
      ops.push_back(ScheduleOp{Type::kToHost, On::kEvict, 0, move.id, address, bytes});
      const uint64_t seq = ++order_seq;
      ops.push_back(ScheduleOp{Type::kRecord, On::kEvict, seq});
      evict_seqs.push_back(seq);
      ForState(move.id, move.base, address, bytes, [seq](State& state) { state.evict_seq = seq; });
      if (!move.maybe_absent) {
        residency.room->Add(seq, evict_stream, GranuleFootprint(address, bytes, residency.granule));
      }
    });
  }
  if (!evict_seqs.empty()) last_evict_seq_ = evict_seqs.back();
}

void ScheduleExecutor::PlanIncoming(const std::vector<uint64_t>& ids, uint64_t earlier_evictions,
                                    const Residency& residency) {
  using Type = ScheduleOp::Type;
  using On = ScheduleOp::On;
  std::vector<ScheduleOp>& ops = t_ops;
  const std::vector<uint64_t>& evict_seqs = t_evict_seqs;
  // Prefetches first, then populates (the simulator's order of taking slots).
  uint64_t waited[2] = {0, 0};  // the event each stream waited for last (launch, side)
  for (const ScheduledMove::Kind kind :
       {ScheduledMove::Kind::kPrefetch, ScheduledMove::Kind::kPopulate}) {
    for (const ResolvedMove& move : t_resolved) {
      if (move.kind != kind) continue;
      // Of an arena, only a chunk this launch uses is its own.
      bool used = Contains(ids, move.id);
      if (used && Contains(t_arena_ids, move.id)) {
        used = false;
        for (uint64_t c = (move.address - move.base) / kArenaChunkBytes;
             c <= (move.address + move.bytes - 1 - move.base) / kArenaChunkBytes; ++c) {
          used |= Contains(t_pieces, ArenaPieceId(move.id, c));
        }
      }
      const bool own = kind == ScheduledMove::Kind::kPopulate && used;
      const On on = own ? On::kLaunch : On::kSide;
      const int s = own ? 0 : 1;
      ForEachPiece(move.address, move.bytes, [&](uint64_t address, uint64_t bytes) {
        uint64_t own_eviction = 0;
        ForState(move.id, move.base, address, bytes, [&own_eviction](const State& state) {
          own_eviction = std::max(own_eviction, state.evict_seq);
        });
        std::vector<RoomLedger::Room>& slot = t_slot;
        slot.clear();
        residency.room->Take(GranuleFootprint(address, bytes, residency.granule), 0, &slot);
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
        const uint64_t seq = ++*residency.order_seq;
        ops.push_back(ScheduleOp{Type::kRecord, On::kSide, seq});
        ForState(move.id, move.base, move.address, move.bytes,
                 [seq](State& state) { state.ready_seq = seq; });
      }
    }
  }
}

void ScheduleExecutor::PlanLaunchWait(const std::vector<uint64_t>& ids, const TrackedMap& tracked,
                                      const Residency& residency) {
  // The launch waits for the newest side-stream prefetch of what it uses (the side stream being
  // in order, that covers the earlier ones). Of an arena reached by pointer, only the chunks
  // named. An order event half the ring old may have been recorded again for something newer:
  // no wait.
  uint64_t ready = 0;
  const auto take_ready = [&](State& state) {
    if (state.ready_seq != 0 &&
        state.ready_seq + residency.order_events / 2 > *residency.order_seq) {
      ready = std::max(ready, state.ready_seq);
    }
    state.ready_seq = 0;
  };
  for (const uint64_t id : ids) {
    if (Contains(t_arena_ids, id)) continue;
    if (offsets_.contains(id)) {  // an arena used whole: every chunk's
      const uint64_t size = tracked.at(id).size;
      for (uint64_t c = 0; c * kArenaChunkBytes < size; ++c) {
        const auto it = chunk_state_.find(ArenaPieceId(id, c));
        if (it != chunk_state_.end()) take_ready(it->second);
      }
      continue;
    }
    const auto it = state_.find(id);
    if (it != state_.end()) take_ready(it->second);
  }
  for (const uint64_t piece : t_pieces) {
    const auto it = chunk_state_.find(piece);
    if (it != chunk_state_.end()) take_ready(it->second);
  }
  if (ready != 0)
    t_ops.push_back(ScheduleOp{ScheduleOp::Type::kWait, ScheduleOp::On::kLaunch, ready});
}

}  // namespace spillway::policy
