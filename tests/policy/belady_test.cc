// RunBelady (policy/planner/simulator_replay.h) against a plain reference: the same replacement
// written with a scan over every resident chunk at each choice, on random steps (persistent and
// step-local allocations, some ending in a partial chunk that takes only its 4 KiB pages, launches
// touching random chunk ranges), with Belady's victims, time-aware victims, held room and each
// way of ranking dead data; and BuildReplay's next uses and frees against a forward scan. RunBelady
// keeps its candidates in a heap with stale entries; any difference in a victim, a load or a free
// shows up as a different event.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "policy/plan/workload_model.h"
#include "policy/planner/simulator_replay.h"
#include "tests/policy/random_step.h"

namespace spillway::policy {
namespace {

// The replacement RunBelady makes, with a scan for every victim.
BeladyRun ReferenceBelady(const Replay& r, uint64_t capacity, uint64_t idle_horizon,
                          const std::vector<uint64_t>& reserve, double dead_weight) {
  BeladyRun run;
  const uint32_t n = r.total_chunks;
  // key: next use; rank: what victims are chosen by (dead data with a weight: its last use plus
  // the weight times the launches until its free).
  std::vector<uint64_t> key(n, kNoNextUse), rank(n, kNoNextUse), last_use(n, 0);
  std::vector<char> resident(n, 0), own(n, 0), fresh(n, 1);
  uint64_t bytes = 0;  // resident
  // Resident, not the launch's: the largest (next use, chunk), or with a horizon the smallest
  // (last use, chunk) of those needed at or beyond it when the largest is.
  auto victim = [&](uint64_t now, bool horizon) -> std::optional<uint32_t> {
    std::optional<uint32_t> far;
    for (uint32_t c = 0; c < n; ++c) {
      if (!resident[c] || own[c]) continue;
      if (!far || std::make_pair(rank[c], c) > std::make_pair(rank[*far], *far)) far = c;
    }
    if (!far || !horizon || idle_horizon == 0 || rank[*far] == kNoNextUse ||
        rank[*far] < now + idle_horizon) {
      return far;
    }
    std::optional<uint32_t> oldest;
    for (uint32_t c = 0; c < n; ++c) {
      if (!resident[c] || own[c] || rank[c] < now + idle_horizon) continue;
      if (!oldest || std::make_pair(last_use[c], c) < std::make_pair(last_use[*oldest], *oldest)) {
        oldest = c;
      }
    }
    return oldest;
  };
  auto evict = [&](uint32_t v, const ReplayItem& item, bool held, bool overcommit = false) {
    resident[v] = 0;
    bytes -= r.footprint[v];
    run.events.push_back({BeladyEvent::Kind::kEvict, v, item.global + (overcommit ? 1 : 0),
                          item.step, false, key[v] == kNoNextUse, last_use[v], held, overcommit});
  };
  for (const ReplayItem& item : r.items) {
    if (item.kind != StepEvent::Kind::kLaunch) {
      const uint32_t end = item.alloc_id + 1 < r.base.size() ? r.base[item.alloc_id + 1] : n;
      for (uint32_t c = r.base[item.alloc_id]; c < end; ++c) {
        if (resident[c]) {
          resident[c] = 0;
          bytes -= r.footprint[c];
          run.events.push_back(
              {BeladyEvent::Kind::kFree, c, item.global, item.step, false, false, last_use[c]});
        }
        fresh[c] = 1;
      }
      continue;
    }
    for (uint32_t c : item.chunks) own[c] = 1;
    const uint64_t held = item.position < reserve.size() ? reserve[item.position] : 0;
    const uint64_t cap = capacity > held + kChunkBytes ? capacity - held : kChunkBytes;
    while (held > 0 && bytes > cap) {
      const std::optional<uint32_t> v = victim(item.global, false);
      if (!v) break;
      evict(*v, item, true);
    }
    bool overcommitted = false;
    for (uint32_t c : item.chunks) {
      if (resident[c]) continue;
      bool overcommit = false;
      while (bytes + r.footprint[c] > cap) {
        const std::optional<uint32_t> v = victim(item.global, true);
        if (!v) {
          ++run.overcommit_chunks;
          overcommit = overcommitted = true;
          break;
        }
        evict(*v, item, false);
      }
      run.events.push_back({BeladyEvent::Kind::kLoad, c, item.global, item.step, fresh[c] != 0,
                            false, 0, false, overcommit});
      fresh[c] = 0;
      resident[c] = 1;
      bytes += r.footprint[c];
    }
    for (size_t i = 0; i < item.chunks.size(); ++i) {
      own[item.chunks[i]] = 0;
      const uint32_t c = item.chunks[i];
      key[c] = rank[c] = item.next_use[i];
      if (key[c] == kNoNextUse && dead_weight >= 0 && item.freed_at[i] != kNoNextUse) {
        rank[c] =
            item.global + static_cast<uint64_t>(
                              dead_weight * static_cast<double>(item.freed_at[i] - item.global));
      }
      last_use[c] = item.global;
    }
    // A launch that needed more than the capacity: back down to it, farthest next use first.
    while (overcommitted && bytes > cap) {
      const std::optional<uint32_t> v = victim(item.global, false);
      if (!v) break;
      evict(*v, item, false, /*overcommit=*/true);
    }
  }
  return run;
}

// BuildReplay's next use and free of each launch's chunks, by a forward scan from the launch.
void ExpectNextUsesAndFrees(const Replay& r) {
  for (size_t i = 0; i < r.items.size(); ++i) {
    const ReplayItem& item = r.items[i];
    if (item.kind != StepEvent::Kind::kLaunch) continue;
    for (size_t k = 0; k < item.chunks.size(); ++k) {
      const uint32_t c = item.chunks[k];
      uint64_t next = kNoNextUse, freed = kNoNextUse;
      for (size_t j = i + 1; j < r.items.size(); ++j) {
        const ReplayItem& later = r.items[j];
        if (later.kind == StepEvent::Kind::kLaunch) {
          if (std::find(later.chunks.begin(), later.chunks.end(), c) == later.chunks.end())
            continue;
          next = later.global;
          break;
        }
        if (later.alloc_id != r.owner[c]) continue;
        if (later.kind == StepEvent::Kind::kFree) freed = later.global;
        break;
      }
      ASSERT_EQ(item.next_use[k], next) << "launch " << item.global << ", chunk " << c;
      ASSERT_EQ(item.freed_at[k], freed) << "launch " << item.global << ", chunk " << c;
    }
  }
}

bool SameEvent(const BeladyEvent& a, const BeladyEvent& b) {
  return a.kind == b.kind && a.chunk == b.chunk && a.global == b.global && a.step == b.step &&
         a.fresh == b.fresh && a.dead == b.dead && a.last_use == b.last_use && a.held == b.held &&
         a.overcommit == b.overcommit;
}

TEST(Belady, MatchesAScanOfEveryResidentChunkOnRandomSteps) {
  std::mt19937 rng(20261124);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Workload w = RandomStep(rng, 2 + rng() % 6, rng() % 5, 4 + rng() % 20);
    ASSERT_TRUE(ValidateWorkload(w).ok()) << ValidateWorkload(w);
    const Replay r = BuildReplay(w);
    ASSERT_NO_FATAL_FAILURE(ExpectNextUsesAndFrees(r));
    const uint64_t capacity = (1 + rng() % 8) * kChunkBytes + rng() % 512 * kPieceBytes;
    const uint64_t horizon = trial % 3 == 0 ? 0 : rng() % (2 * r.launches_per_step);
    std::vector<uint64_t> reserve;
    if (trial % 4 == 1) {
      reserve.assign(r.launches_per_step, 0);
      for (uint32_t p = rng() % r.launches_per_step; p < r.launches_per_step; ++p) {
        reserve[p] = (1 + rng() % 2) * kChunkBytes;
      }
    }
    const double dead_weight = trial % 5 < 2 ? kDeadFirst : (trial % 5 - 2) * 0.75;
    const BeladyRun got = RunBelady(r, capacity, horizon, reserve, dead_weight);
    const BeladyRun want = ReferenceBelady(r, capacity, horizon, reserve, dead_weight);
    SCOPED_TRACE(testing::Message() << "trial " << trial << ", capacity " << capacity
                                    << ", horizon " << horizon << ", dead weight " << dead_weight);
    ASSERT_EQ(got.overcommit_chunks, want.overcommit_chunks);
    ASSERT_EQ(got.events.size(), want.events.size());
    for (size_t i = 0; i < got.events.size(); ++i) {
      ASSERT_TRUE(SameEvent(got.events[i], want.events[i]))
          << "event " << i << ": chunk " << got.events[i].chunk << " vs " << want.events[i].chunk;
    }
    compared += static_cast<int>(got.events.size());
  }
  EXPECT_GT(compared, 10000);  // the random steps do evict, load and free
}

}  // namespace
}  // namespace spillway::policy
