// Recorded events -> one step (policy/plan/step_events.h), as online planning hands them over: the
// step is found by its tokens wherever the recording starts, each launch's compute time is the
// least recorded for its position over the repetitions (also those after the step picked), a
// position never timed takes the least time of the same kernel, and a kernel never timed takes 0.
// Too few repetitions is one error naming the recording.
#include "policy/plan/step_events.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// A weight (id 1) made once; each step: an activation made, kernels "fwd", "fwd", "bwd", "opt"
// (the activation used by all but the last), the activation freed. Launch correlations count
// from 1; `timed(correlation)` gives a kernel's recorded time, 0 for none.
RecordedEvents Record(int steps, double (*timed)(uint64_t correlation)) {
  RecordedEvents r;
  r.Allocated(1, 4 * kMiB, 0);
  uint64_t next_id = 2, correlation = 0;
  for (int s = 0; s < steps; ++s) {
    const uint64_t act = next_id++;
    r.Allocated(act, 2 * kMiB, 0);
    for (const char* kernel : {"fwd", "fwd", "bwd", "opt"}) {
      std::vector<RecordedAccess> accesses = {{1, 0, 0}};
      if (std::string(kernel) != "opt") accesses.push_back({act, 0, 0});
      r.Launched(kernel, ++correlation, accesses);
      const double seconds = timed(correlation);
      if (seconds > 0) r.kernel_seconds[correlation] = seconds;
    }
    r.Freed(act);
  }
  return r;
}

std::vector<double> ComputeTimes(const Workload& w) {
  std::vector<double> out;
  for (const StepEvent& e : w.step) {
    if (e.kind == StepEvent::Kind::kLaunch) out.push_back(e.launch.compute_seconds);
  }
  return out;
}

TEST(StepEvents, TimesComeFromEveryRepetitionAndFromTheSameKernelWhereAPositionIsNeverTimed) {
  // Step 1 untimed (timing starts later, as online planning's does); step 2: fwd#1 1.0, bwd 3.0;
  // step 3: fwd#1 0.5 (the least), bwd 4.0; the second fwd and opt are never timed.
  const RecordedEvents r = Record(3, [](uint64_t c) -> double {
    switch (c) {
      case 5:
        return 1.0e-3;
      case 7:
        return 3.0e-3;
      case 9:
        return 0.5e-3;
      case 11:
        return 4.0e-3;
      default:
        return 0;
    }
  });
  EXPECT_EQ(r.launches(), 12u);
  absl::StatusOr<Workload> w = WorkloadFromEvents(r, "the recording");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->num_launches(), 4u);
  ASSERT_EQ(w->allocations.size(), 2u);
  EXPECT_TRUE(w->allocations[0].persistent);
  EXPECT_EQ(w->description, "the recording: a step of 6 events");
  EXPECT_EQ(ComputeTimes(*w), (std::vector<double>{0.5e-3, 0.5e-3, 3.0e-3, 0}));
}

// A step of 1500 alike layers (the same kernel on the same sizes: one token) and a loss, recorded
// from the middle of a step to the middle of another, as online planning stops: the layers'
// token comes 1500 times a step, so the step shows only through its rarer events.
TEST(StepEvents, AStepOfManyAlikeLayersIsFoundByItsRarerEvents) {
  RecordedEvents r;
  r.Allocated(1, 4 * kMiB, 0);
  uint64_t next_id = 2, correlation = 0;
  auto layers = [&](uint64_t act, int count) {
    for (int l = 0; l < count; ++l) {
      r.Launched("layer", ++correlation, {{1, 0, 0}, {act, 0, 0}});
      r.kernel_seconds[correlation] = 1e-5;
    }
  };
  uint64_t act = next_id++;
  r.Allocated(act, 2 * kMiB, 0);
  layers(act, 900);  // the recording starts here, in the middle of a step
  for (int s = 0; s < 3; ++s) {
    layers(act, 600);
    r.Launched("loss", ++correlation, {{act, 0, 0}});
    r.kernel_seconds[correlation] = 1e-4;
    r.Freed(act);
    act = next_id++;
    r.Allocated(act, 2 * kMiB, 0);
    layers(act, 900);
  }
  absl::StatusOr<Workload> w = WorkloadFromEvents(r, "the recording");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->num_launches(), 1501u);
  EXPECT_EQ(w->description, "the recording: a step of 1503 events");
}

TEST(StepEvents, OneRepetitionIsAnErrorNamingTheRecording) {
  RecordedEvents r;
  r.Allocated(1, 4 * kMiB, 0);
  r.Allocated(2, 2 * kMiB, 0);
  r.Launched("fwd", 1, {{1, 0, 0}, {2, 0, 0}});
  r.Freed(2);
  r.Launched("opt", 2, {{1, 0, 0}});
  r.kernel_seconds = {{1, 1e-3}, {2, 1e-3}};
  EXPECT_EQ(WorkloadFromEvents(r, "the recorded steps").status().message(),
            "the recorded steps: no repeating training step found in its 5 allocations, frees "
            "and launches (at least two whole steps are needed)");
}

// 24 alike layers, each allocating an activation and launching one kernel in the forward (a
// run of alike events within the step), then the backward and an update per layer. With the
// updates moved among the backward launches differently every step (as TensorFlow's executor
// launches ready ops), the step repeats nowhere exactly: an error that says so, not a "step" of
// one forward layer.
TEST(StepEvents, AStepWhoseOrderChangesIsNotMistakenForARunOfAlikeLayers) {
  constexpr int kLayers = 24;
  for (const bool shuffled : {false, true}) {
    SCOPED_TRACE(shuffled ? "updates shuffled" : "in order");
    RecordedEvents r;
    uint64_t next_id = 1, correlation = 0;
    std::mt19937 random(5);
    std::vector<uint64_t> weights;
    for (int l = 0; l < kLayers; ++l) r.Allocated(weights.emplace_back(next_id++), 4 * kMiB, 0);
    for (int s = 0; s < 6; ++s) {
      std::vector<uint64_t> acts;
      for (int l = 0; l < kLayers; ++l) {
        r.Allocated(acts.emplace_back(next_id++), 2 * kMiB, 0);
        r.Launched("fwd", ++correlation, {{weights[l], 0, 0}, {acts[l], 0, 0}});
      }
      // Backward in reverse; each layer's update follows its backward, or (shuffled) comes up
      // to two backward launches later, by a delay that changes from step to step.
      std::vector<std::vector<int>> updates_after(kLayers);
      for (int i = 0; i < kLayers; ++i) {
        const int delay = shuffled ? static_cast<int>(random() % 3) : 0;
        updates_after[std::min(i + delay, kLayers - 1)].push_back(kLayers - 1 - i);
      }
      for (int i = 0; i < kLayers; ++i) {
        const int l = kLayers - 1 - i;
        r.Launched("bwd", ++correlation, {{weights[l], 0, 0}, {acts[l], 0, 0}});
        for (const int u : updates_after[i]) r.Launched("opt", ++correlation, {{weights[u], 0, 0}});
      }
      for (const uint64_t act : acts) r.Freed(act);
    }
    const absl::StatusOr<Workload> w = WorkloadFromEvents(r, "the recording");
    if (!shuffled) {
      ASSERT_TRUE(w.ok()) << w.status();
      EXPECT_EQ(w->num_launches(), 3u * kLayers);
      continue;
    }
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.status().message().find("the recording: no repeating training step found in its "
                                        "744 allocations, frees and launches: the longest "
                                        "repeating run covers only"),
              std::string::npos)
        << w.status();
    EXPECT_NE(w.status().message().find("an order that changes from step to step"),
              std::string::npos)
        << w.status();
  }
}

// Three groups of alike buffers, each worked on by one launch (a CUDA graph) in turn: the events
// repeat by size every launch, but a step uses the same buffers again, so the step is all three.
TEST(StepEvents, AStepThatWorksOnAlikeGroupsInTurnIsAllTheGroups) {
  RecordedEvents r;
  for (uint64_t id = 1; id <= 12; ++id) r.Allocated(id, 4 * kMiB, 0);
  uint64_t correlation = 0;
  for (int round = 0; round < 6; ++round) {
    for (uint64_t group = 0; group < 3; ++group) {
      std::vector<RecordedAccess> accesses;
      for (uint64_t b = 1; b <= 4; ++b) accesses.push_back({4 * group + b, 0, 0});
      r.Launched("graph", ++correlation, accesses);
      r.kernel_seconds[correlation] = 1e-4;
    }
  }
  const absl::StatusOr<Workload> w = WorkloadFromEvents(r, "the recording");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->num_launches(), 3u);
  EXPECT_EQ(w->description, "the recording: a step of 3 events");
}

TEST(StepEvents, FreesAndAccessesOfUnknownAllocationsAreDropped) {
  RecordedEvents r;
  r.Allocated(1, 2 * kMiB, 0);
  EXPECT_FALSE(r.Freed(7));
  r.Launched("k", 1, {{1, 0, 0}, {7, 0, 0}});
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].accesses.size(), 1u);
  EXPECT_TRUE(r.Freed(1));
}

// A step of many alike layers (the same kernels on same-sized tensors, as a ResNet's blocks or a
// transformer's layers), a warm-up step that differs (an optimizer's state made on its first
// step), then three steps: the step found is the whole step, never a layer.
TEST(StepEvents, AStepOfAlikeLayersIsFoundWholeNotALayer) {
  constexpr int kLayers = 12;
  RecordedEvents r;
  uint64_t next_id = 1, correlation = 0;
  std::vector<uint64_t> weights, state;
  for (int l = 0; l < kLayers; ++l) {
    weights.push_back(next_id);
    r.Allocated(next_id++, 2 * kMiB, 0);
  }
  for (int s = 0; s < 4; ++s) {
    std::vector<uint64_t> acts;
    uint64_t x = next_id;
    r.Allocated(next_id++, kMiB, 0);
    acts.push_back(x);
    for (int l = 0; l < kLayers; ++l) {  // forward: each layer's output kept for the backward
      const uint64_t y = next_id;
      r.Allocated(next_id++, kMiB, 0);
      r.Launched("fwd", ++correlation, {{weights[l], 0, 0}, {x, 0, 0}, {y, 0, 0}});
      acts.push_back(y);
      x = y;
    }
    uint64_t grad = next_id;
    r.Allocated(next_id++, kMiB, 0);
    r.Launched("loss", ++correlation, {{x, 0, 0}, {grad, 0, 0}});
    std::vector<uint64_t> grads(kLayers);
    for (int l = kLayers - 1; l >= 0; --l) {  // backward: activations freed as they are used
      const uint64_t gx = next_id;
      r.Allocated(next_id++, kMiB, 0);
      grads[l] = next_id;
      r.Allocated(next_id++, 2 * kMiB, 0);
      r.Launched("bwd", ++correlation,
                 {{weights[l], 0, 0}, {acts[l], 0, 0}, {grad, 0, 0}, {gx, 0, 0}, {grads[l], 0, 0}});
      r.Freed(acts[l + 1]);
      r.Freed(grad);
      grad = gx;
    }
    r.Freed(acts[0]);
    r.Freed(grad);
    for (int l = 0; l < kLayers; ++l) {  // the optimizer: its state made on the first step only
      if (s == 0) {
        state.push_back(next_id);
        r.Allocated(next_id++, 2 * kMiB, 0);
        r.Launched("init", ++correlation, {{state[l], 0, 0}});
      }
      r.Launched("sgd", ++correlation, {{weights[l], 0, 0}, {grads[l], 0, 0}, {state[l], 0, 0}});
    }
    for (int l = 0; l < kLayers; ++l) r.Freed(grads[l]);
  }
  StepPlace place;
  absl::StatusOr<Workload> w = WorkloadFromEvents(r, "layers", &place);
  ASSERT_TRUE(w.ok()) << w.status();
  // One step: 1 + 12 + 1 + 24 allocations, 12 + 1 + 12 + 12 launches, 2 + 24 + 12 frees.
  EXPECT_EQ(place.events_per_step, 38u + 37u + 38u);
  EXPECT_EQ(w->step.size(), 38u + 37u + 38u);
  EXPECT_EQ((place.end - place.first) / place.events_per_step, 3u);  // the warm-up step differs
}

}  // namespace
}  // namespace spillway::policy
