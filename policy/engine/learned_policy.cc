// The learned eviction policy: finds the repeating training step in the launch sequence online
// and evicts the allocation whose next use is farthest away (Belady's choice, with the step as the
// oracle); least recently used until a step is found or while a prediction fails.
//
// Step detection. Each launch gets two tokens: a *weak* one from the function and the sizes of its
// access set (stable across steps even when activations are freed and reallocated, so their ids
// change), and a *strong* one from the function and the allocation ids (repeats only where the
// same allocations, e.g. weights, are used again). A candidate period P is the distance to an
// earlier occurrence of the current strong token; it is accepted when the last min(P, 32) launches
// repeat the launches P earlier: equal weak tokens, and in each slot the same allocation or one
// that has been freed since (an activation of the previous step). Once a period is locked, each
// launch is checked against the launch P earlier; a mismatch unlocks it and detection starts over.
//
// Reordered launches. A job whose executor launches the ops that are ready at once from several
// threads (TensorFlow in graph mode) launches independent kernels in an order that changes from
// step to step, while the step as a whole, and its length, stay the same. So a launch's
// counterpart in the previous step is the launch P earlier, or else the nearest within a slack
// (common/step_slack.h: 8 launches, a quarter of the step for short ones) that repeats it and that
// no launch of this step has matched yet; only a launch with none unlocks the period. A candidate
// period must still repeat exactly for at least half its verified launches, this launch's own
// included, so a moved launch does not lock a period off by its move. The previous step's launches
// that no launch of this step has matched yet are what comes next: those whose place has passed are
// predicted for the very next launch, those matched early (moved earlier in this step) not again.
//
// Next use. A freed allocation of the previous step is matched with the allocation that took its
// slot in this step (same slot of the corresponding launch), so the uses of the old one in the
// last P launches predict the uses of the new one in the next P. The positions of each allocation
// in the last P launches are kept as launches come and go, and the matches both ways, so a next
// use costs a few lookups instead of a scan of the step (LearnedNextUseByScan checks it in tests).
#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/step_slack.h"
#include "policy/engine/eviction_policy.h"
#include "policy/engine/learned_sequence.h"
#include "policy/engine/recency_order.h"

namespace spillway::policy {
namespace {

constexpr uint64_t kMaxPeriod = 32768;  // longest step, in launches, that can be detected
constexpr uint64_t kVerifyWindow = 32;
constexpr uint64_t kHistory = kMaxPeriod + kVerifyWindow + kStepSlack + 1;
constexpr size_t kRecentOccurrences = 4;     // earlier positions kept per strong token
constexpr size_t kMaxTokens = 4 * kHistory;  // distinct tokens remembered before a reset
constexpr size_t kMaxTranslations = 1 << 16;
constexpr uint64_t kNever = StepPredictor::kNoPrediction;

uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash * 0xff51afd7ed558ccdull;
}

struct LaunchRecord {
  uint64_t weak = 0;
  uint64_t strong = 0;
  std::vector<uint64_t> ids;    // capacity kept across reuse of the ring slot
  std::vector<uint64_t> sizes;  // of each id
  bool matched = false;         // a launch of the next step repeated it (while a period holds)
};

using RecentMap = std::unordered_map<uint64_t, std::array<uint64_t, kRecentOccurrences>>;

class LearnedPolicy final : public EvictionPolicy, public StepPredictor {
 public:
  LearnedPolicy() : history_(kHistory) {}

  std::string_view name() const override { return "learned"; }
  StepPredictor* step_predictor() override { return this; }
  uint64_t predicted_launches() const override { return predicted_; }
  uint64_t step_length() const override { return period_; }
  uint64_t reordered_launches() const override { return reordered_; }

  // See SetSequenceSlack (learned_sequence.h).
  void set_tolerant(bool tolerant) {
    if (tolerant == tolerant_) return;
    tolerant_ = tolerant;
    window_period_ = 0;  // the window's extent changes with the slack: built anew
  }

  void ObserveLaunch(const LaunchView& launch) override {
    const uint64_t n = launches_++;
    LaunchRecord& record = history_[n % kHistory];
    record.weak = Mix(Mix(launch.function, launch.count), 1);
    record.strong = Mix(launch.function, 2);
    record.ids.assign(launch.ids, launch.ids + launch.count);
    record.sizes.assign(launch.sizes, launch.sizes + launch.count);
    record.matched = false;
    for (size_t i = 0; i < launch.count; ++i) {
      record.weak = Mix(record.weak, launch.sizes[i]);
      record.strong = Mix(record.strong, launch.ids[i]);
    }
    if (period_ != 0) {
      const uint64_t then = Counterpart(n);
      if (then != kNever) {
        history_[then % kHistory].matched = true;
        ++predicted_;
        if (then + period_ != n) ++reordered_;
        LearnSlots(n, then);
      } else {
        period_ = 0;
      }
    }
    if (period_ == 0) Detect(n);
    UpdateWindow(n);
    Remember(n, record.strong, &recent_strong_);
    Remember(n, record.weak, &recent_weak_);
  }

  void Touch(uint64_t id) override { order_.Touch(id); }

  void Forget(uint64_t id) override { order_.Forget(id); }

  uint64_t PickVictim(bool (*evictable)(const void*, uint64_t), const void* context) override {
    if (period_ == 0) {
      for (const uint64_t id : order_) {
        if (evictable(context, id)) return id;
      }
      return 0;
    }
    return FarthestVictim(order_, evictable, context, kNever,
                          [this](uint64_t id) { return NextUseOf(id); });
  }

  void PredictUnallocated(size_t launches, std::vector<uint64_t>* out) override {
    out->clear();
    if (period_ == 0) return;
    std::vector<uint64_t>& seen = unallocated_seen_;
    seen.clear();
    ForEachUpcoming(launches, [&](const LaunchRecord& record) {
      for (size_t s = 0; s < record.ids.size() && s < record.sizes.size(); ++s) {
        const uint64_t id = record.ids[s];
        if (Translate(id) != 0 || std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
        seen.push_back(id);
        out->push_back(record.sizes[s]);
      }
    });
  }

  uint64_t NextUse(uint64_t id) override {
    if (period_ == 0 || !Live(id)) return kNoPrediction;
    return NextUseOf(id);
  }

  // The next use by a scan of the last period's launches (what NextUse answers from its index);
  // for tests (LearnedNextUseByScan).
  uint64_t NextUseByScan(uint64_t id) const {
    if (period_ == 0 || !Live(id)) return kNoPrediction;
    const uint64_t n = launches_ - 1;
    for (uint64_t m = WindowStart(); m <= n; ++m) {
      if (history_[m % kHistory].matched) continue;
      for (const uint64_t used : history_[m % kHistory].ids) {
        if (Translate(used) == id) return Distance(m);
      }
    }
    return kNoPrediction;
  }

  void PredictNextUses(size_t launches, std::vector<uint64_t>* out) override {
    out->clear();
    if (period_ == 0) return;
    ForEachUpcoming(launches, [&](const LaunchRecord& record) {
      for (const uint64_t id : record.ids) {
        const uint64_t live = Translate(id);
        if (live == 0 || std::find(out->begin(), out->end(), live) != out->end()) continue;
        out->push_back(live);
      }
    });
  }

 private:
  bool Live(uint64_t id) const { return order_.Contains(id); }

  // The slack for a step of `period` launches: less for short steps, so that a short loop's
  // launches are not matched within one step; none while not tolerant.
  uint64_t Slack(uint64_t period) const { return tolerant_ ? StepSlack(period) : 0; }

  // The oldest launch that can still predict one: the window holds (n - P - slack, n].
  uint64_t WindowStart() const {
    const uint64_t back = period_ + Slack(period_);
    return launches_ > back ? launches_ - back : 0;
  }

  // Launches from now to the repeat of launch `m` of the window: a step later, or the very next
  // launch where that place has passed already (the repeat moved later in this step).
  uint64_t Distance(uint64_t m) const {
    const uint64_t n = launches_ - 1;
    return m + period_ > n ? m + period_ - n : 1;
  }

  // Visits the records of the next `count` launches as predicted, in order: the window's launches
  // that no launch of this step has repeated yet (without reordering: n - P + 1, n - P + 2, ...).
  template <typename Visit>
  void ForEachUpcoming(uint64_t count, Visit visit) const {
    count = std::min<uint64_t>(count, period_);
    for (uint64_t m = WindowStart(); m < launches_ && count > 0; ++m) {
      const LaunchRecord& record = history_[m % kHistory];
      if (record.matched) continue;
      visit(record);
      --count;
    }
  }

  // The launch of the previous step that launch `n` repeats: n - P, else the nearest within the
  // slack that no launch of this step has matched yet; kNever if none.
  uint64_t Counterpart(uint64_t n) const {
    return Nearest(n, period_, [this, n](uint64_t m) { return Unpaired(n, m); });
  }

  // The launch nearest to `now` - `period` within the slack (the earlier one first at equal
  // distance) and before `now` for which `pairable` holds; kNever if none.
  template <typename Pairable>
  uint64_t Nearest(uint64_t now, uint64_t period, Pairable pairable) const {
    const uint64_t center = now - period;  // now >= period: callers keep it so
    const uint64_t slack = Slack(period);
    for (uint64_t d = 0; d <= slack; ++d) {
      if (d <= center && pairable(center - d)) return center - d;
      if (d != 0 && center + d < now && pairable(center + d)) return center + d;
    }
    return kNever;
  }

  // Launch `m` can be launch `n`'s counterpart: in the ring, not yet paired, and repeated by it.
  bool Unpaired(uint64_t n, uint64_t m) const {
    return n - m < kHistory && !history_[m % kHistory].matched && Matches(n, m);
  }

  // Pairs each of the `count` launches up to `n` with its counterpart `period` earlier (within
  // the slack, each earlier launch paired once), newest first; `pairs` gets (launch, counterpart)
  // for those that have one. The number of launches whose counterpart is exactly `period` earlier.
  uint64_t PairSteps(uint64_t n, uint64_t period, uint64_t count,
                     std::vector<std::pair<uint64_t, uint64_t>>* pairs) {
    const uint64_t slack = Slack(period);
    const uint64_t lowest = n + 1 - count - period;          // callers keep it >= 0
    const uint64_t base = lowest - std::min(lowest, slack);  // the earliest launch paired
    std::vector<char>& taken = taken_;
    taken.assign(count + 2 * slack, 0);
    pairs->clear();
    uint64_t exact = 0;
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t now = n - k;
      const uint64_t then =
          Nearest(now, period, [&](uint64_t m) { return !taken[m - base] && Matches(now, m); });
      if (then == kNever) continue;
      taken[then - base] = 1;
      pairs->emplace_back(now, then);
      if (then + period == now) ++exact;
    }
    return exact;
  }

  // The live allocation that `id` stands for: itself, or the allocation that took a freed one's
  // slot (followed a few hops); 0 when none is live.
  uint64_t Translate(uint64_t id) const {
    for (int hop = 0; hop < 4; ++hop) {
      if (Live(id)) return id;
      const auto it = translation_.find(id);
      if (it == translation_.end()) return 0;
      id = it->second;
    }
    return Live(id) ? id : 0;
  }

  // Launch `now` repeats launch `then`: same weak token, and each slot holds the same allocation
  // or one freed since.
  bool Matches(uint64_t now, uint64_t then) const {
    const LaunchRecord& a = history_[now % kHistory];
    const LaunchRecord& b = history_[then % kHistory];
    if (a.weak != b.weak || a.ids.size() != b.ids.size()) return false;
    for (size_t s = 0; s < a.ids.size(); ++s) {
      if (a.ids[s] != b.ids[s] && Live(b.ids[s])) return false;
    }
    return true;
  }

  // Records, for each slot where a freed allocation was replaced, which allocation replaced it.
  void LearnSlots(uint64_t now, uint64_t then) {
    const LaunchRecord& a = history_[now % kHistory];
    const LaunchRecord& b = history_[then % kHistory];
    // The two launches match by token, but a token is a hash: never assume equal lengths.
    const size_t slots = std::min(a.ids.size(), b.ids.size());
    for (size_t s = 0; s < slots; ++s) {
      if (a.ids[s] == b.ids[s] || Live(b.ids[s])) continue;
      SetTranslation(b.ids[s], a.ids[s]);
    }
  }

  void SetTranslation(uint64_t freed, uint64_t now) {
    if (translation_.size() >= kMaxTranslations) {
      translation_.clear();
      predecessors_.clear();
    }
    auto [it, inserted] = translation_.try_emplace(freed, now);
    if (!inserted) {
      if (it->second == now) return;
      std::vector<uint64_t>& old = predecessors_[it->second];
      if (const auto at = std::find(old.begin(), old.end(), freed); at != old.end()) old.erase(at);
      it->second = now;
    }
    predecessors_[now].push_back(freed);
  }

  // Candidate periods: distances to the last occurrences of this launch's strong and weak tokens,
  // shortest first; the first that verifies is locked.
  void Detect(uint64_t n) {
    std::array<uint64_t, 2 * kRecentOccurrences> earlier;
    earlier.fill(kNever);
    const auto strong = recent_strong_.find(history_[n % kHistory].strong);
    if (strong != recent_strong_.end()) {
      std::copy(strong->second.begin(), strong->second.end(), earlier.begin());
    }
    const auto weak = recent_weak_.find(history_[n % kHistory].weak);
    if (weak != recent_weak_.end()) {
      std::copy(weak->second.begin(), weak->second.end(), earlier.begin() + kRecentOccurrences);
    }
    std::sort(earlier.begin(), earlier.end(), std::greater<uint64_t>());  // kNever first
    std::vector<std::pair<uint64_t, uint64_t>>& pairs = pairs_;
    for (const uint64_t position : earlier) {
      if (position == kNever || position >= n) continue;
      const uint64_t period = n - position;
      if (period > kMaxPeriod) break;
      const uint64_t window = std::min(period, kVerifyWindow);
      if (n + 1 < window + period || !Matches(n, position)) continue;
      const uint64_t exact = PairSteps(n, period, window, &pairs);
      if (pairs.size() < window || 2 * exact < window) continue;
      Lock(n, period);
      return;
    }
  }

  // Locks `period` at launch `n`: the last period's launches are paired with the previous step's
  // (learning the slots of what was freed between them), and the pairs' earlier launches marked
  // as repeated.
  void Lock(uint64_t n, uint64_t period) {
    period_ = period;
    const uint64_t slack = Slack(period);
    for (uint64_t m = n + 1 - std::min(n + 1, period + slack); m <= n; ++m) {
      history_[m % kHistory].matched = false;
    }
    // The pairs' launches must still be in the ring.
    const uint64_t count = std::min({period, n + 1 - period, kHistory - period - slack});
    std::vector<std::pair<uint64_t, uint64_t>>& pairs = pairs_;
    PairSteps(n, period, count, &pairs);
    for (const auto& [now, then] : pairs) {
      LearnSlots(now, then);
      history_[then % kHistory].matched = true;
    }
  }

  void Remember(uint64_t n, uint64_t token, RecentMap* recent) {
    if (recent->size() >= kMaxTokens) recent->clear();
    auto [it, inserted] = recent->try_emplace(token);
    if (inserted) it->second.fill(kNever);
    std::copy_backward(it->second.begin(), it->second.end() - 1, it->second.end());
    it->second[0] = n;
  }

  // Keeps window_ = the positions of each id (as launched, not translated) in the launches
  // (n - P - slack, n] while a period P is locked: launch n in, launch n - P - slack out; built
  // anew when the period is locked or changes.
  void UpdateWindow(uint64_t n) {
    if (period_ == 0) {
      window_period_ = 0;
      return;
    }
    const uint64_t back = period_ + Slack(period_);
    if (window_period_ != period_ || window_end_ + 1 != n) {
      window_.clear();
      for (uint64_t m = WindowStart(); m <= n; ++m) AddToWindow(m);
    } else {
      if (n >= back) {
        for (const uint64_t id : history_[(n - back) % kHistory].ids) {
          const auto it = window_.find(id);
          if (it == window_.end()) continue;
          Positions& p = it->second;
          while (p.head < p.at.size() && p.at[p.head] <= n - back) ++p.head;
          if (p.head == p.at.size()) {
            window_.erase(it);
            if (!Live(id)) DropPredecessor(id);
          } else if (2 * p.head >= p.at.size()) {
            p.at.erase(p.at.begin(), p.at.begin() + static_cast<std::ptrdiff_t>(p.head));
            p.head = 0;
          }
        }
      }
      AddToWindow(n);
    }
    window_period_ = period_;
    window_end_ = n;
  }

  // A freed allocation whose last position left the window adds nothing to any next use (the
  // freed ones it took the slot of are older still), and Translate is asked only of the window's
  // ids: out of the reverse index, so an allocation that took many slots over a long run is not
  // slowed by them, and out of translation_, which so holds about a step's freed allocations and
  // is not cleared (and every prediction from it lost for a step) on a long run of a big step.
  void DropPredecessor(uint64_t freed) {
    predecessors_.erase(freed);
    const auto to = translation_.find(freed);
    if (to == translation_.end()) return;
    const auto list = predecessors_.find(to->second);
    if (list != predecessors_.end()) {
      std::erase(list->second, freed);
      if (list->second.empty()) predecessors_.erase(list);
    }
    translation_.erase(to);
  }

  void AddToWindow(uint64_t m) {
    for (const uint64_t id : history_[m % kHistory].ids) {
      std::vector<uint64_t>& at = window_[id].at;
      if (at.empty() || at.back() != m) at.push_back(m);
    }
  }

  // Launches from now to the predicted next use of live allocation `id`: its first position in
  // the window not yet repeated, or that of an allocation whose slot it took (through at most 4
  // freed ones, as Translate follows them); kNever when the last period did not use it.
  uint64_t NextUseOf(uint64_t id) const {
    const uint64_t first = FirstUse(id, 0);
    return first == kNever ? kNever : Distance(first);
  }

  // The first position in the window, of a launch not yet repeated, of `id` or of a freed
  // allocation that translates to it within 4 - `hops` more hops; kNever if none.
  uint64_t FirstUse(uint64_t id, int hops) const {
    uint64_t first = kNever;
    if (const auto it = window_.find(id); it != window_.end()) {
      const Positions& p = it->second;
      for (size_t i = p.head; i < p.at.size(); ++i) {
        if (!history_[p.at[i] % kHistory].matched) {
          first = p.at[i];
          break;
        }
      }
    }
    if (hops == 4) return first;
    const auto pred = predecessors_.find(id);
    if (pred == predecessors_.end()) return first;
    for (const uint64_t freed : pred->second) {
      if (!Live(freed)) first = std::min(first, FirstUse(freed, hops + 1));
    }
    return first;
  }

  std::vector<LaunchRecord> history_;  // ring of the last kHistory launches
  uint64_t launches_ = 0;
  uint64_t period_ = 0;  // 0: no step locked
  uint64_t predicted_ = 0;
  bool tolerant_ = true;     // pairs launches within the slack (set_tolerant)
  uint64_t reordered_ = 0;   // launches paired with one of the previous step at another place
  RecentMap recent_strong_;  // token -> its last positions, newest first (kNever: none)
  RecentMap recent_weak_;
  std::unordered_map<uint64_t, uint64_t> translation_;  // freed id -> the id in its slot now
  // translation_ reversed: id -> the freed ids that translate to it in one hop.
  std::unordered_map<uint64_t, std::vector<uint64_t>> predecessors_;
  struct Positions {
    std::vector<uint64_t> at;  // ascending; at[head..] are in the window
    size_t head = 0;
  };
  std::unordered_map<uint64_t, Positions> window_;    // see UpdateWindow
  uint64_t window_period_ = 0;                        // the period window_ holds (0: none)
  uint64_t window_end_ = 0;                           // the newest launch in it
  std::vector<uint64_t> unallocated_seen_;            // scratch of PredictUnallocated
  std::vector<char> taken_;                           // scratch of PairSteps
  std::vector<std::pair<uint64_t, uint64_t>> pairs_;  // scratch of Detect and Lock
  RecencyOrder order_;                                // the lru fallback, and the tie-break
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeSequenceLearnedPolicy() {
  return std::make_unique<LearnedPolicy>();
}

uint64_t SequenceNextUseByScan(const EvictionPolicy& sequence, uint64_t id) {
  return static_cast<const LearnedPolicy&>(sequence).NextUseByScan(id);
}

void SetSequenceSlack(EvictionPolicy& sequence, bool tolerant) {
  static_cast<LearnedPolicy&>(sequence).set_tolerant(tolerant);
}

}  // namespace spillway::policy
