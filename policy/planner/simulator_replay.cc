// The flat replay sequence and Belady's replacement (see simulator_replay.h).
#include "policy/planner/simulator_replay.h"

#include <algorithm>
#include <optional>
#include <queue>
#include <set>
#include <utility>

namespace spillway::policy {

Replay BuildReplay(const Workload& w, int steps) {
  Replay r;
  r.base.assign(w.allocations.size() + 1, 0);
  for (const WorkloadAllocation& a : w.allocations) {
    r.base[a.id] = r.total_chunks;
    r.total_chunks += ChunksOf(a.bytes);
    r.owner.resize(r.total_chunks, a.id);
    for (uint32_t k = 0; k < ChunksOf(a.bytes); ++k)
      r.footprint.push_back(ChunkFootprint(a.bytes, k));
  }
  r.launches_per_step = static_cast<uint32_t>(w.num_launches());
  uint64_t global = 0;
  for (int s = 0; s < steps; ++s) {
    uint32_t position = 0;
    for (const StepEvent& e : w.step) {
      ReplayItem item;
      item.kind = e.kind;
      item.step = static_cast<uint32_t>(s);
      item.position = position;
      item.global = global;
      if (e.kind == StepEvent::Kind::kLaunch) {
        item.launch = &e.launch;
        for (const ChunkRange& c : e.launch.accesses) {
          for (uint32_t k = 0; k < c.num_chunks; ++k) {
            item.chunks.push_back(r.base[c.alloc_id] + c.first_chunk + k);
          }
        }
        std::sort(item.chunks.begin(), item.chunks.end());
        item.chunks.erase(std::unique(item.chunks.begin(), item.chunks.end()), item.chunks.end());
        ++position;
        ++global;
      } else {
        item.alloc_id = e.alloc_id;
      }
      r.items.push_back(std::move(item));
    }
  }
  // Next uses, from the end backwards; a free (or an allocation) ends a chunk's life.
  std::vector<uint64_t> next(r.total_chunks, kNoNextUse);
  std::vector<uint64_t> freed(r.total_chunks, kNoNextUse);
  for (auto it = r.items.rbegin(); it != r.items.rend(); ++it) {
    if (it->kind != StepEvent::Kind::kLaunch) {
      const uint32_t first = r.base[it->alloc_id];
      const uint32_t n = ChunksOf(w.allocation(it->alloc_id).bytes);
      std::fill(next.begin() + first, next.begin() + first + n, kNoNextUse);
      std::fill(freed.begin() + first, freed.begin() + first + n,
                it->kind == StepEvent::Kind::kFree ? it->global : kNoNextUse);
      continue;
    }
    it->next_use.resize(it->chunks.size());
    it->freed_at.resize(it->chunks.size());
    for (size_t i = 0; i < it->chunks.size(); ++i) {
      it->next_use[i] = next[it->chunks[i]];
      it->freed_at[i] = it->next_use[i] == kNoNextUse ? freed[it->chunks[i]] : kNoNextUse;
      next[it->chunks[i]] = it->global;
      freed[it->chunks[i]] = kNoNextUse;
    }
  }
  return r;
}

BeladyRun RunBelady(const Replay& r, uint64_t capacity_bytes, uint64_t idle_horizon,
                    const std::vector<uint64_t>& reserve, double dead_weight) {
  BeladyRun run;
  // Resident chunks by rank (next use), farthest on top: a heap whose entries go stale (the chunk
  // left, or was used again and has a newer entry) and are dropped when they reach the top.
  std::priority_queue<std::pair<uint64_t, uint32_t>> resident;  // (rank, chunk)
  // (last use, chunk), longest unused first: only for time-aware victims (`idle_horizon`).
  std::set<std::pair<uint64_t, uint32_t>> by_age;
  const bool aging = idle_horizon > 0;
  // key: the next use (kNoNextUse: dead); rank: what victims are chosen by (the next use, or
  // for dead data with `dead_weight` >= 0 the use it ranks as).
  std::vector<uint64_t> key(r.total_chunks, kNoNextUse);
  std::vector<uint64_t> rank(r.total_chunks, kNoNextUse);
  std::vector<uint64_t> last_use(r.total_chunks, 0);
  std::vector<char> is_resident(r.total_chunks, 0);
  std::vector<char> in_launch(r.total_chunks, 0);  // touched by the launch being decided
  std::vector<char> fresh(r.total_chunks, 1);
  uint64_t resident_bytes = 0;
  // The resident chunk used farthest in the future that the launch being decided does not touch;
  // nullopt when there is none. The launch's own chunks' entries are dropped: they get new ones
  // (their next use changes) once it is decided.
  auto farthest = [&]() -> std::optional<uint32_t> {
    while (!resident.empty()) {
      const auto [top_rank, c] = resident.top();
      if (is_resident[c] && rank[c] == top_rank && !in_launch[c]) return c;
      resident.pop();
    }
    return std::nullopt;
  };
  // Resident chunk `v` goes out for `item` (`held`: for room held free there).
  auto evict = [&](uint32_t v, const ReplayItem& item, bool held, bool overcommit = false) {
    if (aging) by_age.erase({last_use[v], v});
    is_resident[v] = 0;
    resident_bytes -= r.footprint[v];
    BeladyEvent e;
    e.kind = BeladyEvent::Kind::kEvict;
    e.chunk = v;
    e.global = item.global + (overcommit ? 1 : 0);
    e.step = item.step;
    e.dead = key[v] == kNoNextUse;
    e.last_use = last_use[v];
    e.held = held;
    e.overcommit = overcommit;
    run.events.push_back(e);
  };
  for (const ReplayItem& item : r.items) {
    if (item.kind != StepEvent::Kind::kLaunch) {
      const uint32_t first = r.base[item.alloc_id];
      const uint32_t end =
          item.alloc_id + 1 < r.base.size() ? r.base[item.alloc_id + 1] : r.total_chunks;
      for (uint32_t c = first; c < end; ++c) {
        if (is_resident[c]) {
          if (aging) by_age.erase({last_use[c], c});
          is_resident[c] = 0;
          resident_bytes -= r.footprint[c];
          run.events.push_back(
              {BeladyEvent::Kind::kFree, c, item.global, item.step, false, false, last_use[c]});
        }
        fresh[c] = 1;
      }
      continue;
    }
    // The launch's own chunks are not candidates.
    for (uint32_t c : item.chunks) {
      in_launch[c] = 1;
      if (aging && is_resident[c]) by_age.erase({last_use[c], c});
    }
    const uint64_t held = item.position < reserve.size() ? reserve[item.position] : 0;
    const uint64_t cap = capacity_bytes > held + kChunkBytes ? capacity_bytes - held : kChunkBytes;
    // Room held free at this position: what is over the reduced budget goes out before the launch
    // (farthest next use first), its room not reused until the room is released.
    while (held > 0 && resident_bytes > cap) {
      const std::optional<uint32_t> v = farthest();
      if (!v) break;
      evict(*v, item, true);
    }
    bool overcommitted = false;
    for (uint32_t c : item.chunks) {
      if (is_resident[c]) continue;
      bool overcommit = false;
      while (resident_bytes + r.footprint[c] > cap) {
        std::optional<uint32_t> v = farthest();
        if (!v) {
          ++run.overcommit_chunks;
          overcommit = overcommitted = true;
          break;
        }
        const uint64_t far = item.global + idle_horizon;
        if (aging && rank[*v] != kNoNextUse && rank[*v] >= far) {
          // Some chunk is not needed within the horizon: the longest unused of them.
          for (const auto& [unused_since, candidate] : by_age) {
            if (rank[candidate] >= far) {
              v = candidate;
              break;
            }
          }
        }
        evict(*v, item, false);
      }
      BeladyEvent load{BeladyEvent::Kind::kLoad, c, item.global, item.step, fresh[c] != 0};
      load.overcommit = overcommit;
      run.events.push_back(load);
      fresh[c] = 0;
      is_resident[c] = 1;
      resident_bytes += r.footprint[c];
    }
    for (size_t i = 0; i < item.chunks.size(); ++i) {
      const uint32_t c = item.chunks[i];
      in_launch[c] = 0;
      key[c] = item.next_use[i];
      last_use[c] = item.global;
      rank[c] = key[c];
      if (key[c] == kNoNextUse && dead_weight >= 0 && item.freed_at[i] != kNoNextUse) {
        rank[c] =
            item.global + static_cast<uint64_t>(
                              dead_weight * static_cast<double>(item.freed_at[i] - item.global));
      }
      resident.push({rank[c], c});
      if (aging) by_age.insert({last_use[c], c});
    }
    // A launch larger than the budget: back down to it before the next launch, farthest next use
    // first, so that no later decision counts on room past the budget.
    while (overcommitted && resident_bytes > cap) {
      const std::optional<uint32_t> v = farthest();
      if (!v) break;
      evict(*v, item, false, /*overcommit=*/true);
    }
  }
  return run;
}

}  // namespace spillway::policy
