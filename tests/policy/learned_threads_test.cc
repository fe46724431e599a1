// The learned policy where several threads launch: replicas whose launches interleave differently
// every step (however little) are predicted from each thread's own step, with next uses scaled by
// each thread's share of the launches; threads that take turns, or a pool of threads running
// whichever op is ready, repeat as a whole and are decided as one sequence.
#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "policy/engine/eviction_policy.h"

namespace spillway::policy {
namespace {

constexpr int kLayers = 4;

// One replica of a training-like job: weights `first_weight`.. (stable), an activation with a
// fresh id per layer and step, forward then backward in reverse (2 * kLayers launches a step).
class Replica {
 public:
  Replica(uint64_t thread, uint64_t first_weight, uint64_t first_activation)
      : thread_(thread), first_weight_(first_weight), next_activation_(first_activation) {}

  uint64_t weight(int layer) const { return first_weight_ + static_cast<uint64_t>(layer); }
  int position() const { return position_; }  // of the next launch in the step

  // Launches the step's next kernel; frees the step's activations after its last.
  void LaunchNext(EvictionPolicy* policy) {
    if (position_ == 0) {
      activations_.clear();
      for (int i = 0; i < kLayers; ++i) activations_.push_back(next_activation_++);
    }
    const int layer = position_ < kLayers ? position_ : 2 * kLayers - 1 - position_;
    const uint64_t ids[] = {weight(layer), activations_[static_cast<size_t>(layer)]};
    const uint64_t sizes[] = {1 << 20, 2 << 20};
    const uint64_t function = (position_ < kLayers ? 10 : 20) + static_cast<uint64_t>(layer);
    LaunchView view{function, ids, sizes, 2};
    view.thread = thread_;
    policy->ObserveLaunch(view);
    for (const uint64_t id : ids) policy->Touch(id);
    if (++position_ == 2 * kLayers) {
      position_ = 0;
      for (const uint64_t id : activations_) policy->Forget(id);
    }
  }

 private:
  uint64_t thread_, first_weight_, next_activation_;
  int position_ = 0;
  std::vector<uint64_t> activations_;
};

uint64_t Victim(EvictionPolicy* policy, const std::set<uint64_t>& candidates) {
  return policy->PickVictim(
      [](const void* context, uint64_t id) {
        return static_cast<const std::set<uint64_t>*>(context)->contains(id);
      },
      &candidates);
}

// Runs both replicas, the next launch drawn at random (replica b with probability `b_share`),
// until replica a has launched `a_steps` whole steps and then `a_position` more launches.
void Interleave(EvictionPolicy* policy, Replica* a, Replica* b, double b_share, int a_steps,
                int a_position, std::mt19937* random) {
  std::bernoulli_distribution pick_b(b_share);
  int a_launches = 0;
  const int target = a_steps * 2 * kLayers + a_position;
  while (a_launches < target) {
    if (pick_b(*random)) {
      b->LaunchNext(policy);
    } else {
      a->LaunchNext(policy);
      ++a_launches;
    }
  }
}

TEST(LearnedThreads, ReplicasLaunchingAtOnceArePredictedFromEachThreadsOwnStep) {
  std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
  Replica a(/*thread=*/1, /*first_weight=*/1, /*first_activation=*/1000);
  Replica b(/*thread=*/2, /*first_weight=*/101, /*first_activation=*/100000);
  std::mt19937 random(7);
  // Replica a has just run its second forward layer (weights 1 and 2 used this step).
  Interleave(policy.get(), &a, &b, 0.5, 12, 2, &random);
  ASSERT_EQ(a.position(), 2);
  EXPECT_EQ(policy->step_predictor()->step_length(), 0u);  // the interleaving repeats nowhere
  EXPECT_EQ(policy->step_predictor()->thread_steps(), 2u);
  EXPECT_NE(policy->step_predictor()->prediction_horizon(), 0u);
  // In a's own step the weights come next in the order 3, 4 (forward), 2, 1 (backward): its
  // least recently used weight (4, last used in the previous backward) is needed soonest.
  EXPECT_EQ(Victim(policy.get(), {a.weight(0), a.weight(1), a.weight(2), a.weight(3)}),
            a.weight(0));
  EXPECT_LT(policy->step_predictor()->NextUse(a.weight(2)),
            policy->step_predictor()->NextUse(a.weight(3)));
  EXPECT_LT(policy->step_predictor()->NextUse(a.weight(3)),
            policy->step_predictor()->NextUse(a.weight(1)));
  EXPECT_LT(policy->step_predictor()->NextUse(a.weight(1)),
            policy->step_predictor()->NextUse(a.weight(0)));
  // Weight 1's next use is 6 of a's launches away, about 12 of the whole sequence's.
  EXPECT_GE(policy->step_predictor()->NextUse(a.weight(0)), 8u);
  EXPECT_LE(policy->step_predictor()->NextUse(a.weight(0)), 18u);
  // The lookahead names a's next weights nearest first.
  std::vector<uint64_t> next;
  policy->step_predictor()->PredictNextUses(4, &next);
  ASSERT_FALSE(next.empty());
  EXPECT_TRUE(next[0] == a.weight(2) || (next[0] >= b.weight(0) && next[0] <= b.weight(3)))
      << next[0];
  EXPECT_NE(std::find(next.begin(), next.end(), a.weight(2)), next.end());
  EXPECT_GT(policy->step_predictor()->predicted_launches(), 0u);
}

// Replicas that take turns launch by launch, a pair swapped now and then: the whole sequence then
// drifts only a launch or two from one step to the next, within the slack that a launch order
// changing from step to step gets. Once the threads' own steps predict, the whole sequence gets no
// slack, so it does not take over with a step that the drift breaks again and again.
TEST(LearnedThreads, ReplicasThatDriftLittleStayDecidedByEachThreadsOwnStep) {
  std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
  Replica a(/*thread=*/1, /*first_weight=*/1, /*first_activation=*/1000);
  Replica b(/*thread=*/2, /*first_weight=*/101, /*first_activation=*/100000);
  std::mt19937 random(3);
  std::bernoulli_distribution swap(0.3);
  for (int pair = 0; pair < 40 * 2 * kLayers; ++pair) {
    if (swap(random)) {
      b.LaunchNext(policy.get());
      a.LaunchNext(policy.get());
    } else {
      a.LaunchNext(policy.get());
      b.LaunchNext(policy.get());
    }
    if (pair >= 8 * 2 * kLayers) {
      ASSERT_EQ(policy->step_predictor()->thread_steps(), 2u) << "launch pair " << pair;
      ASSERT_EQ(policy->step_predictor()->step_length(), 0u) << "launch pair " << pair;
    }
  }
  EXPECT_EQ(policy->step_predictor()->reordered_launches(), 0u);
}

// A replica with a smaller share of the launches reaches its next use later, counted in the whole
// sequence's launches: its weights go before the busier replica's at the same distance of its own.
TEST(LearnedThreads, NextUsesAreScaledByEachThreadsShareOfTheLaunches) {
  std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
  Replica a(1, 1, 1000), b(2, 101, 100000);
  std::mt19937 random(11);
  Interleave(policy.get(), &a, &b, 0.75, 12, 2, &random);  // b launches 3 times as often
  while (b.position() != 2) b.LaunchNext(policy.get());    // both just ran forward layer 1
  ASSERT_EQ(policy->step_predictor()->thread_steps(), 2u);
  const uint64_t a_next = policy->step_predictor()->NextUse(a.weight(0)),
                 b_next = policy->step_predictor()->NextUse(b.weight(0));
  EXPECT_GT(a_next, 2 * b_next) << a_next << " " << b_next;
  EXPECT_EQ(Victim(policy.get(), {a.weight(0), b.weight(0)}), a.weight(0));
}

// More threads than are learned on their own (8): the first 8 to launch have their own steps
// (the very first too, although its first launch came before a second thread's); the
// allocations of the others have no prediction and go first.
TEST(LearnedThreads, ThreadsBeyondTheEighthAreNotPredicted) {
  std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
  std::vector<Replica> replicas;
  for (uint64_t t = 0; t < 10; ++t) replicas.emplace_back(t + 1, 100 * t + 1, 100000 * (t + 1));
  std::mt19937 random(3);
  std::uniform_int_distribution<size_t> pick(0, replicas.size() - 1);
  for (int launch = 0; launch < 10 * 2 * kLayers * 10; ++launch) {
    replicas[launch < 10 ? static_cast<size_t>(launch) : pick(random)].LaunchNext(policy.get());
  }
  EXPECT_EQ(policy->step_predictor()->step_length(), 0u);
  EXPECT_EQ(policy->step_predictor()->thread_steps(), 8u);
  EXPECT_NE(policy->step_predictor()->NextUse(replicas[0].weight(0)), StepPredictor::kNoPrediction);
  EXPECT_NE(policy->step_predictor()->NextUse(replicas[7].weight(0)), StepPredictor::kNoPrediction);
  EXPECT_EQ(policy->step_predictor()->NextUse(replicas[8].weight(0)), StepPredictor::kNoPrediction);
  EXPECT_EQ(policy->step_predictor()->NextUse(replicas[9].weight(0)), StepPredictor::kNoPrediction);
  EXPECT_EQ(Victim(policy.get(), {replicas[0].weight(0), replicas[9].weight(0)}),
            replicas[9].weight(0));
}

// Two threads that take turns (forward on one, backward on the other, as PyTorch's autograd
// thread does) make one repeating sequence: its step decides, and the threads' own are dropped.
TEST(LearnedThreads, ThreadsThatTakeTurnsAreLearnedAsOneSequence) {
  std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
  // The same replica's launches, forward ones from thread 1 and backward ones from thread 2.
  uint64_t next_activation = 1000;
  for (int step = 0; step < 8; ++step) {
    std::vector<uint64_t> activations;
    for (int i = 0; i < kLayers; ++i) activations.push_back(next_activation++);
    for (int position = 0; position < 2 * kLayers; ++position) {
      const int layer = position < kLayers ? position : 2 * kLayers - 1 - position;
      const uint64_t ids[] = {static_cast<uint64_t>(layer + 1),
                              activations[static_cast<size_t>(layer)]};
      const uint64_t sizes[] = {1 << 20, 2 << 20};
      LaunchView view{static_cast<uint64_t>(position), ids, sizes, 2};
      view.thread = position < kLayers ? 1 : 2;
      policy->ObserveLaunch(view);
      for (const uint64_t id : ids) policy->Touch(id);
    }
    for (const uint64_t id : activations) policy->Forget(id);
  }
  EXPECT_EQ(policy->step_predictor()->step_length(), 2u * kLayers);
  EXPECT_EQ(policy->step_predictor()->thread_steps(), 0u);
  EXPECT_EQ(policy->step_predictor()->prediction_horizon(), 2u * kLayers);
  EXPECT_EQ(policy->step_predictor()->NextUse(1), 1u);  // the next step's first launch
  EXPECT_EQ(policy->step_predictor()->NextUse(4), 4u);
}

// An executor that runs the ops that are ready at once from a pool of threads (TensorFlow in graph
// mode): each launch of one step comes from whichever thread is free, and independent launches
// swap places from step to step. No thread's own launches repeat; the whole sequence holds its
// step within the slack and decides, and counts the launches that moved.
TEST(LearnedThreads, AnExecutorsPoolOfThreadsIsLearnedAsOneSequenceThatChangesOrder) {
  std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
  std::mt19937 random(5);
  std::bernoulli_distribution second_thread(0.5), swap(0.2);
  constexpr int kWeights = 8;
  uint64_t next_activation = 1000;
  uint64_t predicted_before = 0;
  for (int step = 0; step < 24; ++step) {
    std::vector<int> order;  // weight layers: forward, then backward
    for (int l = 0; l < kWeights; ++l) order.push_back(l);
    for (int l = kWeights; l-- > 0;) order.push_back(kWeights + l);
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      if (swap(random)) std::swap(order[i], order[i + 1]), ++i;
    }
    const uint64_t activation = next_activation++;
    for (const int position : order) {
      const uint64_t layer = static_cast<uint64_t>(position % kWeights);
      const uint64_t ids[] = {layer + 1, activation};
      const uint64_t sizes[] = {1 << 20, 2 << 20};
      LaunchView view{static_cast<uint64_t>(position), ids, sizes, 2};
      view.thread = second_thread(random) ? 2 : 1;
      policy->ObserveLaunch(view);
      for (const uint64_t id : ids) policy->Touch(id);
    }
    policy->Forget(activation);
    if (step == 19) predicted_before = policy->step_predictor()->predicted_launches();
  }
  EXPECT_EQ(policy->step_predictor()->step_length(), 2u * kWeights);
  EXPECT_EQ(policy->step_predictor()->thread_steps(), 0u);
  EXPECT_EQ(policy->step_predictor()->predicted_launches(), predicted_before + 4 * 2 * kWeights);
  EXPECT_GT(policy->step_predictor()->reordered_launches(), 0u);
}

}  // namespace
}  // namespace spillway::policy
