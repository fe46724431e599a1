// Closing a folded step over its own repetition (see schedule_closure.h).
#include "policy/planner/schedule_closure.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace spillway::policy {
namespace {

// What happens to one chunk in the step.
enum class EvKind : uint8_t { kAlloc, kFree, kGone, kLoad, kUse };

struct Ev {
  uint32_t pos = 0;  // launch position
  // Order at a position: 0 an allocation or free after the step's last launch (so before the
  // next step's first launch), 1 one before this launch, 2 evictions, 3 loads, 4 the launch.
  uint8_t phase = 0;
  uint32_t seq = 0;  // order among equals
  EvKind kind = EvKind::kUse;
  ChunkMoveKind move = ChunkMoveKind::kEvict;  // kGone, kLoad: the schedule's move
  int32_t origin = -1;  // its index in the schedule's list at `pos`; -1: added here
};

bool Before(const Ev& a, const Ev& b) {
  return std::tie(a.pos, a.phase, a.seq) < std::tie(b.pos, b.phase, b.seq);
}

// Whether the chunk is resident after `kind` (a use of an absent chunk faults it in).
bool ResidentAfter(EvKind kind) { return kind == EvKind::kLoad || kind == EvKind::kUse; }

// Whether the chunk holds data at the step's start: what its last allocation or use left.
bool HoldsDataAtStart(const std::vector<Ev>& events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->kind == EvKind::kAlloc) return false;
    if (it->kind == EvKind::kUse) return true;
  }
  return true;
}

struct Walker {
  const std::vector<Ev>& events;
  uint32_t n;
  // Global position of the event at walk index `i` (two laps: i in [0, 2m)).
  uint64_t Global(size_t i) const {
    return uint64_t{i / events.size()} * n + events[i % events.size()].pos;
  }
};

void InsertSorted(std::vector<Ev>* events, Ev ev, uint32_t* seq) {
  ev.seq = ++*seq;
  events->insert(std::upper_bound(events->begin(), events->end(), ev, Before), ev);
}

// Mends the first move that contradicts the chunk's state, following the step twice round from
// the state its end leaves: an eviction of an absent chunk goes; a load of a resident one gets an
// eviction after the chunk's last use before it, or, with no use since the chunk came in, the
// load that brought it goes. Returns false when nothing contradicts.
bool MendOnce(std::vector<Ev>* events, uint32_t n, uint64_t guard, uint32_t* seq,
              ClosureStats* stats) {
  const std::vector<Ev>& e = *events;
  const size_t m = e.size();
  const Walker walk{e, n};
  bool resident = ResidentAfter(e.back().kind);
  int64_t came_in = -1, last_use = -1;  // walk indices
  for (size_t i = 0; i < 2 * m; ++i) {
    const Ev& ev = e[i % m];
    const bool second_lap = i >= m;
    switch (ev.kind) {
      case EvKind::kAlloc:
      case EvKind::kFree:
        resident = false;
        break;
      case EvKind::kGone:
        if (!resident && second_lap) {
          events->erase(events->begin() + static_cast<int64_t>(i % m));
          ++stats->absent_evictions_dropped;
          return true;
        }
        resident = false;
        break;
      case EvKind::kLoad:
        if (resident && second_lap) {
          if (last_use >= 0) {
            const uint64_t use = walk.Global(static_cast<size_t>(last_use));
            const uint64_t at = use + std::min<uint64_t>(1 + guard, walk.Global(i) - use);
            InsertSorted(
                events,
                Ev{static_cast<uint32_t>(at % n), 2, 0, EvKind::kGone, ChunkMoveKind::kEvict}, seq);
            ++stats->evictions_added;
          } else {
            const size_t drop =
                came_in >= 0 && e[static_cast<size_t>(came_in) % m].kind == EvKind::kLoad
                    ? static_cast<size_t>(came_in) % m
                    : i % m;
            events->erase(events->begin() + static_cast<int64_t>(drop));
            ++stats->loads_dropped;
          }
          return true;
        }
        if (!resident) {
          came_in = static_cast<int64_t>(i);
          last_use = -1;
        }
        resident = true;
        break;
      case EvKind::kUse:
        if (!resident) came_in = static_cast<int64_t>(i);
        last_use = static_cast<int64_t>(i);
        resident = true;
        break;
    }
  }
  return false;
}

// Adds the chunk's footprint `bytes` to `residency` at every launch position it is resident at
// when the step is followed round and round.
void AddResidency(const std::vector<Ev>& events, uint32_t n, uint64_t bytes,
                  std::vector<int64_t>* residency) {
  const auto add = [&](uint32_t from, uint32_t to) {  // [from, to)
    for (uint32_t q = from; q < to; ++q) (*residency)[q] += static_cast<int64_t>(bytes);
  };
  bool resident = ResidentAfter(events.back().kind);
  if (resident) add(0, events.front().pos);
  for (size_t i = 0; i < events.size();) {
    const uint32_t p = events[i].pos;
    for (; i < events.size() && events[i].pos == p; ++i) resident = ResidentAfter(events[i].kind);
    if (resident) add(p, i < events.size() ? events[i].pos : n);
  }
}

// A use of an absent chunk: what made it absent, and the use.
struct Miss {
  size_t gone = 0;       // index of the event that made it absent
  uint64_t gone_at = 0;  // its global position (walk), and the use's
  uint64_t use_at = 0;
  bool holds_data = true;
};

void FindMisses(const std::vector<Ev>& e, uint32_t n, std::vector<Miss>* misses) {
  const size_t m = e.size();
  const Walker walk{e, n};
  bool resident = ResidentAfter(e.back().kind);
  bool data = HoldsDataAtStart(e);
  size_t gone = 0;
  uint64_t gone_at = 0;
  for (size_t i = 0; i < 2 * m; ++i) {
    const Ev& ev = e[i % m];
    switch (ev.kind) {
      case EvKind::kAlloc:
        data = false;
        [[fallthrough]];
      case EvKind::kFree:
      case EvKind::kGone:
        if (resident || ev.kind == EvKind::kAlloc) {
          gone = i % m;
          gone_at = walk.Global(i);
        }
        resident = false;
        break;
      case EvKind::kLoad:
        resident = true;
        break;
      case EvKind::kUse:
        if (!resident && i >= m) {
          misses->push_back(Miss{gone, gone_at, walk.Global(i), data});
        }
        data = true;
        resident = true;
        break;
    }
  }
}

// A load that a chunk came in with and has not been used since, at launch position `q` of the
// second walk: the walk index of that load, its global position, and what comes next for the
// chunk: its use, or, where the load is wasted, the eviction or free that makes it absent unused.
struct UnusedLoad {
  size_t load = 0;
  uint64_t load_at = 0;
  size_t next = 0;  // index of the next event that is not a load
  uint64_t next_at = 0;
  bool used = true;
};

std::optional<UnusedLoad> UnusedLoadAt(const std::vector<Ev>& e, uint32_t n, uint32_t q) {
  const size_t m = e.size();
  const Walker walk{e, n};
  const uint64_t at = uint64_t{n} + q;
  bool resident = ResidentAfter(e.back().kind);
  int64_t load = -1;  // walk index
  size_t i = 0;
  for (; i < 2 * m && walk.Global(i) <= at; ++i) {
    const EvKind kind = e[i % m].kind;
    load = kind == EvKind::kLoad ? static_cast<int64_t>(i) : -1;  // else used, or gone
    resident = ResidentAfter(kind);
  }
  if (!resident || load < 0) return std::nullopt;
  const size_t loaded = static_cast<size_t>(load);
  for (; i < 3 * m; ++i) {  // what comes next (in the third walk, past the step's end)
    const size_t k = i % m;
    if (e[k].kind == EvKind::kLoad) return std::nullopt;  // loaded while resident: not closed
    return UnusedLoad{loaded % m, walk.Global(loaded), k, uint64_t{i / m} * n + e[k].pos,
                      e[k].kind == EvKind::kUse};
  }
  return std::nullopt;
}

}  // namespace

ClosureStats CloseSchedule(const Replay& r, uint64_t capacity, const std::vector<uint64_t>& budget,
                           const std::vector<char>& excluded, uint64_t guard,
                           FoldedSchedule* schedule) {
  ClosureStats stats;
  const uint32_t n = r.launches_per_step;
  if (n == 0) return stats;
  // Each chunk's events in the measured step, in order.
  std::vector<std::vector<Ev>> events(r.total_chunks);
  uint32_t seq = 0;
  const auto chunks_of = [&r](uint64_t id) {
    const uint32_t first = r.base[id];
    const uint32_t end = id + 1 < r.base.size() ? r.base[id + 1] : r.total_chunks;
    return std::pair{first, end};
  };
  for (const ReplayItem& item : r.items) {
    if (item.step != kMeasuredStep) continue;
    if (item.kind == StepEvent::Kind::kLaunch) {
      for (uint32_t c : item.chunks) {
        if (!excluded[c]) events[c].push_back(Ev{item.position, 4, ++seq, EvKind::kUse});
      }
      continue;
    }
    const bool trailing = item.position >= n;
    const auto [first, end] = chunks_of(item.alloc_id);
    for (uint32_t c = first; c < end; ++c) {
      if (excluded[c]) continue;
      events[c].push_back(
          Ev{trailing ? 0 : item.position, static_cast<uint8_t>(trailing ? 0 : 1), ++seq,
             item.kind == StepEvent::Kind::kAlloc ? EvKind::kAlloc : EvKind::kFree});
    }
  }
  for (uint32_t q = 0; q < n; ++q) {
    for (size_t i = 0; i < (*schedule)[q].size(); ++i) {
      const ChunkMove& move = (*schedule)[q][i];
      if (excluded[move.chunk] || move.kind == ChunkMoveKind::kEvictAbsent) continue;
      const bool in =
          move.kind == ChunkMoveKind::kPrefetch || move.kind == ChunkMoveKind::kPopulate;
      events[move.chunk].push_back(Ev{q, static_cast<uint8_t>(in ? 3 : 2), ++seq,
                                      in ? EvKind::kLoad : EvKind::kGone, move.kind,
                                      static_cast<int32_t>(i)});
    }
  }
  for (std::vector<Ev>& e : events) std::sort(e.begin(), e.end(), Before);

  // Loads and evictions that contradict the state the step leaves.
  for (std::vector<Ev>& e : events) {
    for (size_t tries = 4 * e.size() + 8; !e.empty() && tries > 0; --tries) {
      if (!MendOnce(&e, n, guard, &seq, &stats)) break;
    }
  }

  // Uses of absent chunks: the chunk is kept where the room it takes is free all the way to the
  // use, else loaded as early as the room allows.
  std::vector<int64_t> residency(n, 0);
  for (uint32_t c = 0; c < r.total_chunks; ++c) {
    if (!events[c].empty()) AddResidency(events[c], n, r.footprint[c], &residency);
  }
  const auto fits = [&](uint64_t at, uint64_t bytes) {
    const uint32_t q = static_cast<uint32_t>(at % n);
    return residency[q] + static_cast<int64_t>(bytes) <= static_cast<int64_t>(budget[q]);
  };
  std::vector<Miss> misses;
  for (uint32_t c = 0; c < r.total_chunks; ++c) {
    std::vector<Ev>& e = events[c];
    const uint64_t bytes = r.footprint[c];
    // One miss at a time: mending one moves the indices of the others.
    for (size_t tries = e.size() + 1; !e.empty() && tries > 0; --tries) {
      misses.clear();
      FindMisses(e, n, &misses);
      if (misses.empty()) break;
      const Miss& miss = misses.front();
      const Ev gone = e[miss.gone];
      uint64_t from = miss.use_at;  // the first global position it is resident at
      if (gone.kind == EvKind::kGone && gone.move == ChunkMoveKind::kEvict) {
        bool kept = true;
        for (uint64_t g = miss.gone_at; g < miss.use_at && kept; ++g) kept = fits(g, bytes);
        if (kept) {
          e.erase(e.begin() + static_cast<int64_t>(miss.gone));
          ++stats.evictions_dropped;
          from = miss.gone_at;
        }
      }
      if (from == miss.use_at) {
        const uint64_t earliest = miss.gone_at + (gone.kind == EvKind::kGone ? 1 : 0);
        while (from > earliest && fits(from - 1, bytes)) --from;
        InsertSorted(&e,
                     Ev{static_cast<uint32_t>(from % n), 3, 0, EvKind::kLoad,
                        miss.holds_data ? ChunkMoveKind::kPrefetch : ChunkMoveKind::kPopulate},
                     &seq);
        ++stats.loads_added;
      }
      for (uint64_t g = from; g < miss.use_at; ++g) {
        residency[g % n] += static_cast<int64_t>(bytes);
      }
    }
  }

  // Over the capacity at a launch (Belady's decisions for the steps around the measured one,
  // folded onto it, can meet there): the loads of chunks not used yet by that launch go after it,
  // the one used last first. (`residency` is the closed step's: the mends above kept it so.)
  for (uint32_t q = 0; q < n; ++q) {
    while (residency[q] > static_cast<int64_t>(capacity)) {
      // A wasted load first, else the load of the chunk used last.
      std::optional<std::pair<uint32_t, UnusedLoad>> latest;
      const auto later = [](const UnusedLoad& a, const UnusedLoad& b) {
        return a.used != b.used ? !a.used : a.next_at > b.next_at;
      };
      for (uint32_t c = 0; c < r.total_chunks; ++c) {
        if (events[c].empty()) continue;
        const std::optional<UnusedLoad> load = UnusedLoadAt(events[c], n, q);
        if (load && (!latest || later(*load, latest->second))) latest.emplace(c, *load);
      }
      if (!latest) break;
      const auto [c, load] = *latest;
      std::vector<Ev>& e = events[c];
      Ev moved = e[load.load];
      uint64_t until = uint64_t{n} + q + 1;  // resident no longer from here (global)
      if (!load.used) {
        // Dropped, with the eviction that sent it out unused (a free stays).
        if (e[load.next].kind == EvKind::kGone) {
          e.erase(e.begin() + static_cast<int64_t>(std::max(load.load, load.next)));
          e.erase(e.begin() + static_cast<int64_t>(std::min(load.load, load.next)));
        } else {
          e.erase(e.begin() + static_cast<int64_t>(load.load));
        }
        until = load.next_at;
        ++stats.loads_dropped;
      } else {
        e.erase(e.begin() + static_cast<int64_t>(load.load));
        moved.pos = (q + 1) % n;
        moved.origin = -1;
        InsertSorted(&e, moved, &seq);
        ++stats.loads_delayed;
      }
      for (uint64_t g = load.load_at; g < until; ++g) {
        residency[g % n] -= static_cast<int64_t>(r.footprint[c]);
      }
    }
    if (residency[q] > static_cast<int64_t>(capacity)) ++stats.over_capacity_positions;
  }
  if (stats.changes() == 0) return stats;

  // The schedule again: its moves that stay, in their order (the order a position's loads take
  // their room in), then the moves added, by chunk.
  std::vector<std::vector<char>> kept(n);
  for (uint32_t q = 0; q < n; ++q) {
    kept[q].assign((*schedule)[q].size(), 0);
    for (size_t i = 0; i < (*schedule)[q].size(); ++i) {
      const ChunkMove& m = (*schedule)[q][i];
      kept[q][i] = excluded[m.chunk] || m.kind == ChunkMoveKind::kEvictAbsent;
    }
  }
  std::vector<std::vector<ChunkMove>> added(n);
  for (uint32_t c = 0; c < r.total_chunks; ++c) {
    for (const Ev& ev : events[c]) {
      if (ev.kind != EvKind::kGone && ev.kind != EvKind::kLoad) continue;
      if (ev.origin >= 0) {
        kept[ev.pos][static_cast<size_t>(ev.origin)] = 1;
      } else {
        added[ev.pos].push_back(ChunkMove{ev.move, c});
      }
    }
  }
  for (uint32_t q = 0; q < n; ++q) {
    std::vector<ChunkMove>& moves = (*schedule)[q];
    size_t i = 0;
    std::erase_if(moves, [&](const ChunkMove&) { return !kept[q][i++]; });
    moves.insert(moves.end(), added[q].begin(), added[q].end());
  }
  return stats;
}

}  // namespace spillway::policy
