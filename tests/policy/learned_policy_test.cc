// The learned eviction policy on its own: step detection when activation ids change every step,
// re-detection after the step changes, launch orders that change from step to step, the
// farthest-next-use victim, lru before a step is known, lookahead predictions, and next uses from
// its index against a scan on random jobs.
#include <algorithm>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "policy/engine/eviction_policy.h"

namespace spillway::policy {
namespace {

constexpr uint64_t kFunction = 0x1234;

class LearnedPolicyTest : public ::testing::Test {
 protected:
  LearnedPolicyTest() : policy_(MakeLearnedPolicy()) {}

  // One launch using `ids` (sizes from `size_of_`, default 1 MiB); `function` tells kernels apart.
  void Launch(std::initializer_list<uint64_t> ids, uint64_t function = kFunction) {
    std::vector<uint64_t> list(ids), sizes;
    for (const uint64_t id : list) sizes.push_back(SizeOf(id));
    policy_->ObserveLaunch(LaunchView{function, list.data(), sizes.data(), list.size()});
    for (const uint64_t id : list) policy_->Touch(id);
  }
  uint64_t SizeOf(uint64_t id) const { return id < 100 ? (id + 1) << 20 : 1 << 20; }

  // The victim among `candidates`.
  uint64_t Victim(const std::set<uint64_t>& candidates) {
    return policy_->PickVictim(
        [](const void* context, uint64_t id) {
          return static_cast<const std::set<uint64_t>*>(context)->contains(id);
        },
        &candidates);
  }

  // A training-like step: 3 weights (ids 1..3, stable), 3 activations with fresh ids each step
  // (from `next_id_`), forward then backward in reverse, activations freed at the end. Returns the
  // activation ids used.
  std::vector<uint64_t> TrainingStep(int layers = 3) {
    std::vector<uint64_t> activations;
    for (int i = 0; i < layers; ++i) activations.push_back(next_id_++);
    for (int i = 0; i < layers; ++i) Launch({uint64_t(i + 1), activations[i]}, 10 + i);
    for (int i = layers - 1; i >= 0; --i) Launch({uint64_t(i + 1), activations[i]}, 20 + i);
    for (const uint64_t a : activations) policy_->Forget(a);
    return activations;
  }

  // TrainingStep with a weight update per layer (weight only, function 30 + layer) launched as an
  // executor that runs ready ops at once might: each up to 2 backward layers late, the updates due
  // together in a random order. Returns the order the updates were launched in.
  std::vector<int> ReorderedStep(std::mt19937_64* random, int layers) {
    std::vector<uint64_t> activations;
    for (int i = 0; i < layers; ++i) activations.push_back(next_id_++);
    for (int i = 0; i < layers; ++i) Launch({uint64_t(i + 1), activations[i]}, 10 + i);
    std::vector<std::pair<int, int>> pending;  // (due, layer)
    std::vector<int> order;
    for (int i = layers - 1, index = 0; i >= 0; --i, ++index) {
      Launch({uint64_t(i + 1), activations[i]}, 20 + i);
      pending.emplace_back(std::min(index + static_cast<int>((*random)() % 3), layers - 1), i);
      std::vector<int> due;
      std::erase_if(pending, [&](const std::pair<int, int>& p) {
        if (p.first > index) return false;
        due.push_back(p.second);
        return true;
      });
      std::shuffle(due.begin(), due.end(), *random);
      for (const int layer : due) {
        Launch({uint64_t(layer + 1)}, 30 + layer);
        order.push_back(layer);
      }
    }
    for (const uint64_t a : activations) policy_->Forget(a);
    return order;
  }

  std::unique_ptr<EvictionPolicy> policy_;
  uint64_t next_id_ = 1000;
};

TEST_F(LearnedPolicyTest, DetectsTheStepAlthoughActivationIdsChange) {
  EXPECT_EQ(policy_->name(), "learned");
  TrainingStep();
  EXPECT_EQ(policy_->step_predictor()->step_length(), 0u);  // one step is not a repetition
  for (int step = 0; step < 12; ++step) TrainingStep();
  EXPECT_EQ(policy_->step_predictor()->step_length(), 6u);
  // Locked after about 1 step + the verification window; every later launch was predicted.
  EXPECT_GE(policy_->step_predictor()->predicted_launches(), 6u * 8);
  const uint64_t before = policy_->step_predictor()->predicted_launches();
  TrainingStep();
  EXPECT_EQ(policy_->step_predictor()->predicted_launches(), before + 6);
}

// A step of 20000 launches (a large model's, launched op by op) is found, and predicted: the first
// layer's weight is next used at the next step's first launch. Steps beyond 32768 launches are
// not looked for.
TEST_F(LearnedPolicyTest, DetectsStepsOfTensOfThousandsOfLaunches) {
  next_id_ = 1'000'000;  // activation ids above the weights' 1..layers
  for (int step = 0; step < 3; ++step) TrainingStep(10000);
  EXPECT_EQ(policy_->step_predictor()->step_length(), 20000u);
  EXPECT_EQ(policy_->step_predictor()->NextUse(1), 1u);
  std::unique_ptr<EvictionPolicy> longer = MakeLearnedPolicy();
  policy_.swap(longer);
  for (int step = 0; step < 3; ++step) TrainingStep(17000);
  EXPECT_EQ(policy_->step_predictor()->step_length(), 0u);
}

// A long run of a step that frees many allocations (here 2000 a step, 80000 over the run) keeps
// predicting each new activation's next use from the one it replaced, at every step: the
// policy's record of which allocation took a freed one's slot holds about a step's worth, and is
// not cleared (and with it every such prediction for a step) once it has grown large.
TEST_F(LearnedPolicyTest, PredictsNewActivationsNextUsesThroughALongRun) {
  constexpr int kLayers = 2000;
  next_id_ = 1'000'000;
  int wrong = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<uint64_t> activations;
    for (int i = 0; i < kLayers; ++i) activations.push_back(next_id_++);
    for (int i = 0; i < kLayers; ++i) Launch({uint64_t(i + 1), activations[i]}, 10 + i);
    // After the forward pass, each activation's next use is the backward launch of its layer.
    for (int i = 0; i < kLayers && step >= 3; ++i) {
      if (policy_->step_predictor()->NextUse(activations[i]) != uint64_t(kLayers - i)) ++wrong;
    }
    for (int i = kLayers - 1; i >= 0; --i) Launch({uint64_t(i + 1), activations[i]}, 20 + i);
    for (const uint64_t a : activations) policy_->Forget(a);
  }
  EXPECT_EQ(policy_->step_predictor()->step_length(), 2u * kLayers);
  EXPECT_EQ(wrong, 0);
}

TEST_F(LearnedPolicyTest, RedetectsWhenTheStepChanges) {
  for (int step = 0; step < 12; ++step) TrainingStep(3);
  EXPECT_EQ(policy_->step_predictor()->step_length(), 6u);
  const uint64_t before = policy_->step_predictor()->predicted_launches();
  TrainingStep(4);  // a different step: prediction fails, lru meanwhile
  EXPECT_LT(policy_->step_predictor()->predicted_launches(), before + 8);
  for (int step = 0; step < 12; ++step) TrainingStep(4);
  EXPECT_EQ(policy_->step_predictor()->step_length(), 8u);
  const uint64_t after = policy_->step_predictor()->predicted_launches();
  TrainingStep(4);
  EXPECT_EQ(policy_->step_predictor()->predicted_launches(), after + 8);
}

// TensorFlow's executor launches the ops that are ready at once from several threads, so the order
// of independent launches changes from step to step. The step is still found and held, and each
// launch is paired with its counterpart in the previous step.
TEST_F(LearnedPolicyTest, HoldsTheStepWhenIndependentLaunchesChangeOrder) {
  constexpr int kLayers = 12;
  constexpr uint64_t kStep = 3 * kLayers;
  std::mt19937_64 random(11);
  for (int step = 0; step < 6; ++step) ReorderedStep(&random, kLayers);
  ASSERT_EQ(policy_->step_predictor()->step_length(), kStep);
  const uint64_t predicted = policy_->step_predictor()->predicted_launches();
  const uint64_t reordered = policy_->step_predictor()->reordered_launches();
  for (int step = 0; step < 20; ++step) ReorderedStep(&random, kLayers);
  EXPECT_EQ(policy_->step_predictor()->step_length(), kStep);
  EXPECT_EQ(policy_->step_predictor()->predicted_launches(),
            predicted + 20 * kStep);  // every launch, every step
  EXPECT_GT(policy_->step_predictor()->reordered_launches(), reordered + 20);  // the updates moved

  // Mid-step, after the forward: an activation is next used by its layer's backward, whatever
  // the updates' order (they come after the backward launches that the next uses count).
  std::vector<uint64_t> activations;
  for (int i = 0; i < kLayers; ++i) activations.push_back(next_id_++);
  for (int i = 0; i < kLayers; ++i) Launch({uint64_t(i + 1), activations[i]}, 10 + i);
  const uint64_t last_layer = policy_->step_predictor()->NextUse(activations[kLayers - 1]);
  EXPECT_EQ(last_layer, 1u);
  const uint64_t first_layer = policy_->step_predictor()->NextUse(activations[0]);
  EXPECT_GE(first_layer, uint64_t{kLayers});  // the backward of the others and most updates first
  EXPECT_LE(first_layer, uint64_t{2 * kLayers});
}

// A launch of the previous step that has not been repeated although its place has passed (it
// moved later in this step) is predicted for the very next launch; one repeated early (it moved
// earlier) is not predicted again within the step.
TEST_F(LearnedPolicyTest, PredictsALaunchThatMovedLaterForTheNextLaunch) {
  // A step of 16 launches on weights 1..16, function = weight: slack 4.
  const auto step = [&](std::vector<uint64_t> order) {
    for (const uint64_t id : order) Launch({id}, id);
  };
  std::vector<uint64_t> base(16);
  for (uint64_t i = 0; i < 16; ++i) base[i] = i + 1;
  for (int s = 0; s < 4; ++s) step(base);
  ASSERT_EQ(policy_->step_predictor()->step_length(), 16u);
  // This step: 1, 2, 4, 5 (3 is late), ...
  step({1, 2, 4, 5});
  EXPECT_EQ(policy_->step_predictor()->NextUse(3), 1u);  // its place (third) has passed: next
  EXPECT_EQ(policy_->step_predictor()->NextUse(6), 2u);  // the sixth place: after the fifth, 3's
  EXPECT_EQ(policy_->step_predictor()->NextUse(4),
            16u - 1);  // repeated early: its next use is the next step's
  std::vector<uint64_t> next;
  policy_->step_predictor()->PredictNextUses(3, &next);
  EXPECT_EQ(next, (std::vector<uint64_t>{3, 6, 7}));
  step({3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  EXPECT_EQ(policy_->step_predictor()->step_length(), 16u);
  EXPECT_EQ(policy_->step_predictor()->reordered_launches(), 3u);  // 4, 5 and 3 each one place off
  // A launch moved further than the slack (1, from first to last) fails the prediction, which
  // unlocks the step; it is then found again.
  const uint64_t predicted = policy_->step_predictor()->predicted_launches();
  step({2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  EXPECT_EQ(policy_->step_predictor()->predicted_launches(),
            predicted + 15);  // each one place early
  step({1});
  EXPECT_EQ(policy_->step_predictor()->predicted_launches(), predicted + 15);
  for (int s = 0; s < 4; ++s) step(base);
  EXPECT_EQ(policy_->step_predictor()->step_length(), 16u);
}

TEST_F(LearnedPolicyTest, NoStepInAnAperiodicSequence) {
  uint64_t x = 7;
  for (int i = 0; i < 500; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    Launch({1 + (x >> 33) % 50}, (x >> 20) % 7);
  }
  // Random repeats of single tokens may lock briefly; they must not survive as predictions.
  EXPECT_LT(policy_->step_predictor()->predicted_launches(), 50u);
}

TEST_F(LearnedPolicyTest, EvictsTheFarthestNextUse) {
  // A cyclic scan over 1..8: lru would evict the one needed soonest after the scan wraps.
  for (int round = 0; round < 10; ++round) {
    for (uint64_t id = 1; id <= 8; ++id) Launch({id});
  }
  ASSERT_EQ(policy_->step_predictor()->step_length(), 8u);
  // Just used 8; next come 1, 2, ..., 7. Among 1, 3, 5 the farthest is 5.
  EXPECT_EQ(Victim({1, 3, 5}), 5u);
  EXPECT_EQ(Victim({2, 3}), 3u);
  // Never used in the step: first.
  policy_->Touch(50);
  EXPECT_EQ(Victim({1, 50, 7}), 50u);
  EXPECT_EQ(Victim({}), 0u);
}

TEST_F(LearnedPolicyTest, UsesLruBeforeAStepIsDetected) {
  Launch({1});
  Launch({2});
  Launch({3});
  Launch({1});
  ASSERT_EQ(policy_->step_predictor()->step_length(), 0u);
  EXPECT_EQ(Victim({1, 2, 3}), 2u);
  policy_->Forget(2);
  EXPECT_EQ(Victim({1, 3}), 3u);
}

TEST_F(LearnedPolicyTest, PredictsTheNextLaunchesAccessSetsWithTheNewActivations) {
  for (int step = 0; step < 10; ++step) TrainingStep();
  // Mid-step: forward of layer 0 done with a fresh activation.
  const uint64_t a0 = next_id_++, a1 = next_id_++;
  Launch({1, a0}, 10);
  Launch({2, a1}, 11);
  std::vector<uint64_t> next;
  policy_->step_predictor()->PredictNextUses(2, &next);
  // Next: forward layer 2 (weight 3, an activation not allocated yet), then backward layer 2.
  EXPECT_EQ(next, (std::vector<uint64_t>{3}));
  policy_->step_predictor()->PredictNextUses(
      3, &next);  // ... backward 2, backward 1 (weight 2 and a1)
  EXPECT_EQ(next, (std::vector<uint64_t>{3, 2, a1}));
}

TEST(PolicyFactoryTest, KnowsLruAndLearned) {
  EXPECT_EQ(MakePolicy("lru")->name(), "lru");
  EXPECT_EQ(MakePolicy("learned")->name(), "learned");
  EXPECT_EQ(MakePolicy("belady"), nullptr);
}

// The learned policy answers next uses from an index it keeps launch by launch (the positions of
// each allocation in the last step, and the freed allocations each one took the slot of). On
// random training-like jobs (weights, activations made and freed every step and some mid-step,
// launches that reach them through a random fixed pattern, now and then a launch that breaks the
// step) every answer equals a scan of the last step's launches, and the victim is the one a scan
// picks: farthest next use, ties to the least recently used.
TEST(LearnedPolicyIndex, AnswersAsAScanOfTheLastStepOnRandomJobs) {
  std::mt19937_64 random(7);
  for (int job = 0; job < 40; ++job) {
    SCOPED_TRACE("job " + std::to_string(job));
    std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
    std::vector<uint64_t> recency;  // live ids, least recently used first
    auto touch = [&](uint64_t id) {
      recency.erase(std::remove(recency.begin(), recency.end(), id), recency.end());
      recency.push_back(id);
      policy->Touch(id);
    };
    auto forget = [&](uint64_t id) {
      recency.erase(std::remove(recency.begin(), recency.end(), id), recency.end());
      policy->Forget(id);
    };
    const int weights = 2 + static_cast<int>(random() % 6);
    const int slots = 1 + static_cast<int>(random() % 6);  // activations a step
    const int launches = 3 + static_cast<int>(random() % 20);
    struct Use {
      uint64_t function;
      std::vector<int> refs;  // < weights: a weight; else an activation slot
      int renew = -1;         // an activation slot made anew before this launch
    };
    std::vector<Use> pattern(static_cast<size_t>(launches));
    for (Use& use : pattern) {
      use.function = random() % 5;
      const int count = 1 + static_cast<int>(random() % 3);
      for (int r = 0; r < count; ++r) {
        const int ref = static_cast<int>(random() % static_cast<uint64_t>(weights + slots));
        if (std::find(use.refs.begin(), use.refs.end(), ref) == use.refs.end()) {
          use.refs.push_back(ref);
        }
      }
      if (random() % 6 == 0) use.renew = static_cast<int>(random() % static_cast<uint64_t>(slots));
    }
    uint64_t next_id = 100;
    std::vector<uint64_t> slot_ids(static_cast<size_t>(slots));
    size_t checks = 0;
    // Odd jobs of 8 launches or more swap neighbouring launches at random each step, as an
    // executor that launches ready ops at once does.
    const bool reorder = job % 2 == 1 && launches >= 8;
    for (int step = 0; step < 14; ++step) {
      for (uint64_t& id : slot_ids) id = next_id++;
      std::vector<Use> order = pattern;
      for (size_t i = 0; reorder && i + 1 < order.size(); ++i) {
        if (random() % 8 == 0) std::swap(order[i], order[i + 1]), ++i;
      }
      for (const Use& use : order) {
        if (use.renew >= 0) {
          forget(slot_ids[static_cast<size_t>(use.renew)]);
          slot_ids[static_cast<size_t>(use.renew)] = next_id++;
        }
        std::vector<uint64_t> ids, sizes;
        for (const int ref : use.refs) {
          ids.push_back(ref < weights ? uint64_t(ref + 1)
                                      : slot_ids[static_cast<size_t>(ref - weights)]);
          sizes.push_back(ref < weights ? uint64_t(ref + 1) << 20 : uint64_t(ref) << 16);
        }
        if (random() % 40 == 0) ids.push_back(next_id++), sizes.push_back(4096);  // off the step
        policy->ObserveLaunch(LaunchView{use.function, ids.data(), sizes.data(), ids.size()});
        for (const uint64_t id : ids) touch(id);
        // Every live allocation's next use, and the victim among a random half.
        std::set<uint64_t> candidates;
        uint64_t expected = 0, farthest = 0;
        for (const uint64_t id : recency) {
          const uint64_t scanned = LearnedNextUseByScan(*policy, id);
          ASSERT_EQ(policy->step_predictor()->NextUse(id), scanned)
              << "id " << id << " at step " << step;
          checks += scanned != StepPredictor::kNoPrediction;
          if (random() % 2 == 0) continue;
          candidates.insert(id);
          if (policy->step_predictor()->step_length() == 0) {
            if (expected == 0) expected = id;
          } else if (farthest != StepPredictor::kNoPrediction &&
                     (expected == 0 || scanned > farthest)) {
            expected = id;
            farthest = scanned;
          }
        }
        EXPECT_EQ(policy->PickVictim(
                      [](const void* context, uint64_t id) {
                        return static_cast<const std::set<uint64_t>*>(context)->contains(id);
                      },
                      &candidates),
                  expected);
      }
      for (const uint64_t id : slot_ids) forget(id);
    }
    EXPECT_GT(checks, 0u);  // a step was locked and predicted
    if (reorder) {
      EXPECT_GT(policy->step_predictor()->reordered_launches(), 0u);  // ... across the swaps
    }
  }
}

}  // namespace
}  // namespace spillway::policy
