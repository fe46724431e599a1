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
// Next use. A freed allocation of the previous step is matched with the allocation that took its
// slot in this step (same slot of the corresponding launch), so the uses of the old one in the
// last P launches predict the uses of the new one in the next P.
#include <algorithm>
#include <array>
#include <functional>
#include <unordered_map>
#include <vector>

#include "policy/eviction_policy.h"
#include "policy/recency_order.h"

namespace spillway::policy {
namespace {

constexpr uint64_t kMaxPeriod = 8192;  // longest step, in launches, that can be detected
constexpr uint64_t kVerifyWindow = 32;
constexpr uint64_t kHistory = kMaxPeriod + kVerifyWindow + 1;
constexpr size_t kRecentOccurrences = 4;     // earlier positions kept per strong token
constexpr size_t kMaxTokens = 4 * kHistory;  // distinct tokens remembered before a reset
constexpr size_t kMaxTranslations = 1 << 16;
constexpr uint64_t kNever = EvictionPolicy::kNoPrediction;

uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash * 0xff51afd7ed558ccdull;
}

struct LaunchRecord {
  uint64_t weak = 0;
  uint64_t strong = 0;
  std::vector<uint64_t> ids;    // capacity kept across reuse of the ring slot
  std::vector<uint64_t> sizes;  // of each id
};

using RecentMap = std::unordered_map<uint64_t, std::array<uint64_t, kRecentOccurrences>>;

class LearnedPolicy final : public EvictionPolicy {
 public:
  LearnedPolicy() : history_(kHistory) {}

  std::string_view name() const override { return "learned"; }
  uint64_t predicted_launches() const override { return predicted_; }
  uint64_t step_length() const override { return period_; }

  void ObserveLaunch(const LaunchView& launch) override {
    const uint64_t n = launches_++;
    LaunchRecord& record = history_[n % kHistory];
    record.weak = Mix(Mix(launch.function, launch.count), 1);
    record.strong = Mix(launch.function, 2);
    record.ids.assign(launch.ids, launch.ids + launch.count);
    record.sizes.assign(launch.sizes, launch.sizes + launch.count);
    for (size_t i = 0; i < launch.count; ++i) {
      record.weak = Mix(record.weak, launch.sizes[i]);
      record.strong = Mix(record.strong, launch.ids[i]);
    }
    next_use_valid_ = false;
    if (period_ != 0) {
      if (Matches(n, n - period_)) {
        ++predicted_;
        LearnSlots(n, n - period_);
      } else {
        period_ = 0;
      }
    }
    if (period_ == 0) Detect(n);
    Remember(n, record.strong, &recent_strong_);
    Remember(n, record.weak, &recent_weak_);
  }

  void Touch(uint64_t id) override { order_.Touch(id); }

  void Forget(uint64_t id) override {
    if (order_.Forget(id)) next_use_valid_ = false;
  }

  uint64_t PickVictim(bool (*evictable)(const void*, uint64_t), const void* context) override {
    if (period_ == 0) {
      for (const uint64_t id : order_) {
        if (evictable(context, id)) return id;
      }
      return 0;
    }
    ComputeNextUses();
    uint64_t victim = 0, farthest = 0;
    for (const uint64_t id : order_) {  // oldest first: ties go to the least recently used
      if (!evictable(context, id)) continue;
      const auto it = next_use_.find(id);
      const uint64_t distance = it == next_use_.end() ? kNever : it->second;
      if (victim == 0 || distance > farthest) {
        victim = id;
        farthest = distance;
        if (distance == kNever) break;
      }
    }
    return victim;
  }

  void PredictUnallocated(size_t launches, std::vector<uint64_t>* out) override {
    out->clear();
    if (period_ == 0) return;
    const uint64_t n = launches_ - 1;
    const uint64_t count = std::min<uint64_t>(launches, period_);
    std::vector<uint64_t>& seen = unallocated_seen_;
    seen.clear();
    for (uint64_t d = 1; d <= count; ++d) {
      const LaunchRecord& record = history_[(n + d - period_) % kHistory];
      for (size_t s = 0; s < record.ids.size() && s < record.sizes.size(); ++s) {
        const uint64_t id = record.ids[s];
        if (Translate(id) != 0 || std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
        seen.push_back(id);
        out->push_back(record.sizes[s]);
      }
    }
  }

  uint64_t NextUse(uint64_t id) override {
    if (period_ == 0) return kNoPrediction;
    ComputeNextUses();
    const auto it = next_use_.find(id);
    return it == next_use_.end() ? kNoPrediction : it->second;
  }

  void PredictNextUses(size_t launches, std::vector<uint64_t>* out) override {
    out->clear();
    if (period_ == 0) return;
    const uint64_t n = launches_ - 1;
    const uint64_t count = std::min<uint64_t>(launches, period_);
    for (uint64_t d = 1; d <= count; ++d) {
      for (const uint64_t id : history_[(n + d - period_) % kHistory].ids) {
        const uint64_t live = Translate(id);
        if (live == 0 || std::find(out->begin(), out->end(), live) != out->end()) continue;
        out->push_back(live);
      }
    }
  }

 private:
  bool Live(uint64_t id) const { return order_.Contains(id); }

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
      if (translation_.size() >= kMaxTranslations) translation_.clear();
      translation_[b.ids[s]] = a.ids[s];
    }
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
    for (const uint64_t position : earlier) {
      if (position == kNever || position >= n) continue;
      const uint64_t period = n - position;
      if (period > kMaxPeriod) break;
      const uint64_t window = std::min(period, kVerifyWindow);
      if (n < period + window - 1) continue;
      bool repeats = true;
      for (uint64_t k = 0; k < window && repeats; ++k) repeats = Matches(n - k, n - k - period);
      if (!repeats) continue;
      period_ = period;
      for (uint64_t k = 0; k < period && k + period <= n; ++k) LearnSlots(n - k, n - k - period);
      return;
    }
  }

  void Remember(uint64_t n, uint64_t token, RecentMap* recent) {
    if (recent->size() >= kMaxTokens) recent->clear();
    auto [it, inserted] = recent->try_emplace(token);
    if (inserted) it->second.fill(kNever);
    std::copy_backward(it->second.begin(), it->second.end() - 1, it->second.end());
    it->second[0] = n;
  }

  // next_use_[id] = launches from now to the predicted next use of each live allocation that the
  // last period used (directly or through the allocation whose slot it took).
  void ComputeNextUses() {
    if (next_use_valid_) return;
    next_use_.clear();
    const uint64_t n = launches_ - 1;
    const uint64_t first = n >= period_ ? n - period_ + 1 : 0;
    for (uint64_t m = first; m <= n; ++m) {
      const uint64_t distance = m + period_ - n;
      for (const uint64_t id : history_[m % kHistory].ids) {
        const uint64_t live = Translate(id);
        if (live == 0) continue;
        auto [it, inserted] = next_use_.try_emplace(live, distance);
        if (!inserted) it->second = std::min(it->second, distance);
      }
    }
    next_use_valid_ = true;
  }

  std::vector<LaunchRecord> history_;  // ring of the last kHistory launches
  uint64_t launches_ = 0;
  uint64_t period_ = 0;  // 0: no step locked
  uint64_t predicted_ = 0;
  RecentMap recent_strong_;  // token -> its last positions, newest first (kNever: none)
  RecentMap recent_weak_;
  std::unordered_map<uint64_t, uint64_t> translation_;  // freed id -> the id in its slot now
  std::unordered_map<uint64_t, uint64_t> next_use_;
  bool next_use_valid_ = false;
  std::vector<uint64_t> unallocated_seen_;  // scratch of PredictUnallocated
  RecencyOrder order_;                      // the lru fallback, and the tie-break
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLearnedPolicy() { return std::make_unique<LearnedPolicy>(); }

std::unique_ptr<EvictionPolicy> MakePolicy(std::string_view name) {
  if (name == "lru") return MakeLruPolicy();
  if (name == "learned") return MakeLearnedPolicy();
  if (name == "none") return MakeNoMovePolicy();
  return nullptr;
}

}  // namespace spillway::policy
