// The `learned` policy as MakeLearnedPolicy makes it: the step of the whole launch sequence
// (policy/engine/learned_policy.cc) while it has one, and each launching thread's own step where it
// has none.
//
// Several threads that launch at once (replicas on their own threads and streams) interleave their
// launches differently every step, so the whole sequence repeats nowhere. Each thread's own
// sequence still does: it is learned on its own, and an allocation's next use is the nearest its
// threads predict, counted in the thread's own launches and scaled by the thread's share of the
// last kShareWindow launches into launches of the whole sequence (what the engine counts in).
//
// The per-thread sequences are kept only while they can matter: from the first launch by a second
// thread while the whole sequence has no step, until the whole sequence's step has held for two of
// its periods. A job whose threads take turns (PyTorch's forward on the Python thread, its backward
// on the autograd thread) repeats as a whole and is then decided by the whole sequence alone.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policy/engine/eviction_policy.h"
#include "policy/engine/learned_sequence.h"
#include "policy/engine/recency_order.h"

namespace spillway::policy {
namespace {

constexpr size_t kMaxThreads = 8;     // threads learned on their own; later ones are not
constexpr size_t kShareWindow = 512;  // the recent launches that give each thread's share
constexpr uint8_t kNoThread = 0xff;
constexpr uint64_t kNever = StepPredictor::kNoPrediction;
constexpr uint64_t kUnknown = kNever - 1;  // used by a thread that has no step (yet)

class ThreadedLearnedPolicy final : public EvictionPolicy, public StepPredictor {
 public:
  ThreadedLearnedPolicy() : whole_(MakeSequenceLearnedPolicy()), recent_(kShareWindow, kNoThread) {}

  const EvictionPolicy& whole() const { return *whole_; }

  std::string_view name() const override { return "learned"; }
  StepPredictor* step_predictor() override { return this; }
  uint64_t predicted_launches() const override { return predicted_; }
  uint64_t step_length() const override { return Predict(whole_).step_length(); }
  // The whole sequence's while no thread is learned on its own (none launched at once yet, or the
  // whole sequence's step has held for two periods since), and the threads' own while their steps
  // decide: what the whole sequence pairs within its slack while threads interleave before their
  // own steps are found is the interleaving, not a launch order that changes.
  uint64_t reordered_launches() const override { return reordered_; }

  uint64_t prediction_horizon() const override {
    if (!PerThread()) return Predict(whole_).step_length();
    uint64_t horizon = 0;
    for (size_t t = 0; t < threads_.size(); ++t) {
      const uint64_t period = Predict(threads_[t]).step_length();
      if (period != 0) horizon = std::max(horizon, Scaled(t, period));
    }
    return horizon;
  }

  uint64_t thread_steps() const override {
    return Predict(whole_).step_length() != 0 ? 0 : ThreadsWithAStep();
  }

  void ObserveLaunch(const LaunchView& launch) override {
    // While a thread's own step predicts, the whole sequence's interleaving of the threads is
    // explained: it gets no slack, so it does not hold a step within the interleaving's drift.
    SetSequenceSlack(*whole_, ThreadsWithAStep() == 0);
    const uint64_t whole_before = Predict(whole_).predicted_launches();
    const uint64_t whole_moved = Predict(whole_).reordered_launches();
    whole_->ObserveLaunch(launch);
    const bool whole_predicted = Predict(whole_).predicted_launches() != whole_before;
    if (threads_.empty()) reordered_ += Predict(whole_).reordered_launches() - whole_moved;
    whole_held_ = whole_predicted ? whole_held_ + 1 : 0;
    const uint64_t period = Predict(whole_).step_length();
    if (!threads_.empty() && period != 0 && whole_held_ >= 2 * period) Retire();
    current_ = ThreadIndex(launch.thread);
    NoteShare(current_);
    bool thread_predicted = false;
    if (current_ != kNoThread) {
      EvictionPolicy& thread = *threads_[current_];
      const StepPredictor& prediction = Predict(threads_[current_]);
      const uint64_t before = prediction.predicted_launches();
      const uint64_t moved = prediction.reordered_launches();
      thread.ObserveLaunch(launch);
      thread_predicted = prediction.predicted_launches() != before;
      if (PerThread()) reordered_ += prediction.reordered_launches() - moved;
    }
    if (whole_predicted || thread_predicted) ++predicted_;
  }

  void Touch(uint64_t id) override {
    order_.Touch(id);
    whole_->Touch(id);
    if (current_ == kNoThread) return;
    threads_[current_]->Touch(id);
    owners_[id] |= uint8_t{1} << current_;
  }

  void Forget(uint64_t id) override {
    order_.Forget(id);
    whole_->Forget(id);
    const auto it = owners_.find(id);
    if (it == owners_.end()) return;
    for (size_t t = 0; t < threads_.size(); ++t) {
      if ((it->second >> t) & 1) threads_[t]->Forget(id);
    }
    owners_.erase(it);
  }

  uint64_t PickVictim(bool (*evictable)(const void*, uint64_t), const void* context) override {
    if (!PerThread()) return whole_->PickVictim(evictable, context);
    return FarthestVictim(order_, evictable, context, kNever,
                          [this](uint64_t id) { return Distance(id); });
  }

  uint64_t NextUse(uint64_t id) override {
    if (!PerThread()) return Predict(whole_).NextUse(id);
    const uint64_t distance = Distance(id);
    return distance >= kUnknown ? kNoPrediction : distance;
  }

  // Each thread's predictions for its share of the next `launches`, nearest (scaled) first.
  void PredictNextUses(size_t launches, std::vector<uint64_t>* out) override {
    if (!PerThread()) {
      Predict(whole_).PredictNextUses(launches, out);
      return;
    }
    out->clear();
    ranked_.clear();
    for (size_t t = 0; t < threads_.size(); ++t) {
      if (Predict(threads_[t]).step_length() == 0) continue;
      Predict(threads_[t]).PredictNextUses(ShareOf(t, launches), &scratch_);
      for (const uint64_t id : scratch_) ranked_.emplace_back(Distance(id), id);
    }
    std::sort(ranked_.begin(), ranked_.end());
    for (const auto& [distance, id] : ranked_) {
      if (std::find(out->begin(), out->end(), id) == out->end()) out->push_back(id);
    }
  }

  void PredictUnallocated(size_t launches, std::vector<uint64_t>* out) override {
    if (!PerThread()) {
      Predict(whole_).PredictUnallocated(launches, out);
      return;
    }
    out->clear();
    for (size_t t = 0; t < threads_.size(); ++t) {
      if (Predict(threads_[t]).step_length() == 0) continue;
      Predict(threads_[t]).PredictUnallocated(ShareOf(t, launches), &scratch_);
      out->insert(out->end(), scratch_.begin(), scratch_.end());
    }
  }

 private:
  // The threads decide: the whole sequence has no step and some thread has one.
  bool PerThread() const { return thread_steps() != 0; }
  // The threads learned on their own whose own step is locked, whether or not they decide.
  uint64_t ThreadsWithAStep() const {
    return static_cast<uint64_t>(std::count_if(threads_.begin(), threads_.end(), [](const auto& t) {
      return Predict(t).step_length() != 0;
    }));
  }

  // The index in threads_ of launching thread `thread`, made on its first launch; kNoThread for a
  // thread not learned on its own (unknown, too many, or no second thread launched yet while the
  // whole sequence has no step).
  uint8_t ThreadIndex(uint64_t thread) {
    if (thread == 0) return kNoThread;
    if (threads_.empty()) {
      const uint64_t previous = previous_thread_;
      previous_thread_ = thread;
      if (previous == 0 || previous == thread || Predict(whole_).step_length() != 0)
        return kNoThread;
      AddThread(previous);  // the first thread keeps its place among the kMaxThreads
    }
    for (size_t t = 0; t < threads_.size(); ++t) {
      if (thread_keys_[t] == thread) return static_cast<uint8_t>(t);
    }
    if (threads_.size() == kMaxThreads) return kNoThread;
    AddThread(thread);
    return static_cast<uint8_t>(threads_.size() - 1);
  }

  void AddThread(uint64_t thread) {
    threads_.push_back(MakeSequenceLearnedPolicy());
    thread_keys_.push_back(thread);
  }

  // The whole sequence's step has held: the threads' own are dropped.
  void Retire() {
    threads_.clear();
    thread_keys_.clear();
    owners_.clear();
    std::fill(recent_.begin(), recent_.end(), kNoThread);
    std::fill(std::begin(counts_), std::end(counts_), 0);
    launches_ = 0;
    previous_thread_ = 0;
  }

  void NoteShare(uint8_t index) {
    uint8_t& slot = recent_[launches_ % kShareWindow];
    if (slot != kNoThread) --counts_[slot];
    slot = index;
    if (index != kNoThread) ++counts_[index];
    ++launches_;
  }

  // `distance` launches of thread `t` as launches of the whole sequence, rounded up.
  uint64_t Scaled(size_t t, uint64_t distance) const {
    if (distance >= kUnknown) return distance;
    const uint64_t window = std::min<uint64_t>(launches_, kShareWindow);
    const uint64_t share = std::max<uint64_t>(counts_[t], 1);
    return std::min(kUnknown - 1, (distance * window + share - 1) / share);
  }

  // Thread `t`'s launches among the next `launches` of the whole sequence (at least one).
  size_t ShareOf(size_t t, size_t launches) const {
    const uint64_t window = std::max<uint64_t>(std::min<uint64_t>(launches_, kShareWindow), 1);
    return std::max<size_t>(1, static_cast<size_t>(launches * counts_[t] / window));
  }

  // The nearest next use the threads that used `id` predict, in launches of the whole sequence;
  // kUnknown when one of them has no step yet and none predicts a use, kNever when none uses it
  // again within its step.
  uint64_t Distance(uint64_t id) {
    const auto it = owners_.find(id);
    if (it == owners_.end()) return kUnknown;
    uint64_t nearest = kNever;
    bool unknown = false;
    for (size_t t = 0; t < threads_.size(); ++t) {
      if (((it->second >> t) & 1) == 0) continue;
      if (Predict(threads_[t]).step_length() == 0) {
        unknown = true;
        continue;
      }
      nearest = std::min(nearest, Scaled(t, Predict(threads_[t]).NextUse(id)));
    }
    return nearest != kNever ? nearest : unknown ? kUnknown : kNever;
  }

  // The step prediction of a sequence policy (MakeSequenceLearnedPolicy: it always has one).
  static StepPredictor& Predict(const std::unique_ptr<EvictionPolicy>& sequence) {
    return *sequence->step_predictor();
  }

  std::unique_ptr<EvictionPolicy> whole_;
  std::vector<std::unique_ptr<EvictionPolicy>> threads_;  // one per thread learned on its own
  std::vector<uint64_t> thread_keys_;                     // LaunchView::thread of each
  std::unordered_map<uint64_t, uint8_t> owners_;          // id -> the threads that used it (bits)
  RecencyOrder order_;                                    // all ids, for PickVictim per thread
  uint8_t current_ = kNoThread;                           // the thread of the launch observed last
  uint64_t previous_thread_ = 0;       // the last launch's thread while threads_ is empty
  uint64_t whole_held_ = 0;            // launches the whole sequence's step has predicted in a row
  uint64_t reordered_ = 0;             // see reordered_launches()
  uint64_t predicted_ = 0;             // launches predicted by the whole sequence or their thread
  std::vector<uint8_t> recent_;        // the thread index of each of the last kShareWindow launches
  uint64_t counts_[kMaxThreads] = {};  // launches of each thread in recent_
  uint64_t launches_ = 0;              // launches noted in recent_ since the start or Retire
  std::vector<std::pair<uint64_t, uint64_t>> ranked_;  // scratch of PredictNextUses
  std::vector<uint64_t> scratch_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeLearnedPolicy() {
  return std::make_unique<ThreadedLearnedPolicy>();
}

uint64_t LearnedNextUseByScan(const EvictionPolicy& learned, uint64_t id) {
  return SequenceNextUseByScan(static_cast<const ThreadedLearnedPolicy&>(learned).whole(), id);
}

}  // namespace spillway::policy
