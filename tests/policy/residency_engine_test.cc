// ResidencyEngine over the fake device. A typed suite runs the same behavioural tests on every
// eviction policy (the current access set is never evicted, the budget holds, counters, discard
// on free); lru's eviction order has its own test.
#include "policy/engine/residency_engine.h"

#include <map>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "policy/engine/engine_mutex.h"
#include "tests/policy/fake_device.h"

namespace spillway::policy {
namespace {

using testing::DeviceCall;
using testing::FakeDevice;

constexpr uint64_t kMiB = 1ull << 20;
Stream const kStream = reinterpret_cast<Stream>(0x5);

struct Lru {
  static std::unique_ptr<EvictionPolicy> Make() { return MakeLruPolicy(); }
  static constexpr std::string_view kName = "lru";
};
struct Learned {
  static std::unique_ptr<EvictionPolicy> Make() { return MakeLearnedPolicy(); }
  static constexpr std::string_view kName = "learned";
};

template <typename PolicyKind>
class ResidencyEngineTest : public ::testing::Test {
 protected:
  explicit ResidencyEngineTest(uint64_t budget = 8 * kMiB)
      : engine_(&device_, PolicyKind::Make(), budget) {}

  Allocation Managed(uint64_t bytes) {
    uint64_t address = 0;
    device_.AllocateManaged(&address, bytes);
    const Allocation allocation = registry_.Insert(address, bytes, Backing::kManaged, false, true);
    engine_.OnAllocated(allocation);
    return allocation;
  }
  int Launch(std::initializer_list<Allocation> access) {
    return engine_.OnLaunch(AccessSet(access), kStream);
  }
  std::vector<uint64_t> Addresses(const std::string& what) const {
    std::vector<uint64_t> out;
    for (const DeviceCall& call : device_.Calls(what)) out.push_back(call.address);
    return out;
  }

  FakeDevice device_;
  AllocationRegistry registry_;
  ResidencyEngine engine_;
};

using Policies = ::testing::Types<Lru, Learned>;
TYPED_TEST_SUITE(ResidencyEngineTest, Policies);
using LruEngineTest = ResidencyEngineTest<Lru>;

TYPED_TEST(ResidencyEngineTest, PrefetchesTheAccessSetOnTheLaunchStream) {
  const Allocation a = this->Managed(2 * kMiB), b = this->Managed(2 * kMiB);
  EXPECT_EQ(this->Launch({a, b}), 0);
  EXPECT_EQ(this->Addresses("to_device"), (std::vector<uint64_t>{a.base, b.base}));
  for (const DeviceCall& call : this->device_.Calls("to_device")) EXPECT_EQ(call.stream, kStream);
  // Already resident: no second prefetch.
  EXPECT_EQ(this->Launch({a}), 0);
  EXPECT_EQ(this->device_.Calls("to_device").size(), 2u);
  EXPECT_TRUE(this->device_.Calls("to_host").empty());
  EXPECT_EQ(this->engine_.prefetch_bytes(), 4 * kMiB);
  EXPECT_EQ(this->engine_.evict_bytes(), 0u);
  EXPECT_EQ(this->engine_.policy_name(), TypeParam::kName);
}

TEST_F(LruEngineTest, EvictsLeastRecentlyUsedFirst) {
  const Allocation a = this->Managed(2 * kMiB), b = this->Managed(2 * kMiB),
                   c = this->Managed(2 * kMiB), d = this->Managed(2 * kMiB),
                   e = this->Managed(2 * kMiB), f = this->Managed(2 * kMiB);
  this->Launch({a});
  this->Launch({b});
  this->Launch({c});
  this->Launch({d});  // budget full: a b c d
  this->Launch({a});  // a is now the newest; b is the oldest
  this->Launch({e});  // evicts b
  this->Launch({f});  // evicts c
  EXPECT_EQ(this->Addresses("to_host"), (std::vector<uint64_t>{b.base, c.base}));
  for (const DeviceCall& call : this->device_.Calls("to_host")) EXPECT_EQ(call.stream, kStream);
  EXPECT_EQ(this->engine_.evict_bytes(), 4 * kMiB);
  EXPECT_EQ(this->engine_.resident_estimate(), 8 * kMiB);
}

TYPED_TEST(ResidencyEngineTest, NeverEvictsTheCurrentAccessSet) {
  const Allocation a = this->Managed(3 * kMiB), b = this->Managed(3 * kMiB),
                   c = this->Managed(3 * kMiB);
  this->Launch({a, b});
  this->Launch(
      {b, c});  // needs c; a is the only candidate although b is older than... b is in the set
  EXPECT_EQ(this->Addresses("to_host"), (std::vector<uint64_t>{a.base}));
  this->Launch({a, b, c});  // 9 MiB > 8 MiB: nothing may go, a is left to demand paging
  EXPECT_EQ(this->Addresses("to_host"), (std::vector<uint64_t>{a.base}));
  EXPECT_EQ(this->Addresses("to_device"), (std::vector<uint64_t>{a.base, b.base, c.base}));
  EXPECT_LE(this->engine_.resident_estimate(), this->engine_.budget_bytes());
}

TYPED_TEST(ResidencyEngineTest, BudgetHoldsOverManyLaunches) {
  std::vector<Allocation> all;
  for (int i = 0; i < 12; ++i) all.push_back(this->Managed(kMiB + 4096 * i));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < all.size(); ++i) {
      this->Launch({all[i], all[(i + 1) % all.size()]});
      EXPECT_LE(this->engine_.resident_estimate(), this->engine_.budget_bytes());
    }
  }
  EXPECT_EQ(this->engine_.prefetch_bytes() - this->engine_.evict_bytes(),
            this->engine_.resident_estimate());
}

TYPED_TEST(ResidencyEngineTest, DeviceAllocationsTakeAFixedShareOfTheBudget) {
  const Allocation fixed = this->registry_.Insert(0x1000, 6 * kMiB, Backing::kDevice, true, false);
  this->engine_.OnAllocated(fixed);
  const Allocation a = this->Managed(2 * kMiB), b = this->Managed(2 * kMiB);
  this->Launch({a, fixed});
  this->Launch({b});
  EXPECT_EQ(this->Addresses("to_host"), (std::vector<uint64_t>{a.base}));
  EXPECT_EQ(this->engine_.OnFree(fixed, nullptr), 0);
  EXPECT_TRUE(this->device_.Calls("discard").empty());  // only managed memory is discarded
  EXPECT_EQ(this->engine_.resident_estimate(), 2 * kMiB);
}

TYPED_TEST(ResidencyEngineTest, FreeForgetsAndDiscardsOnceSomethingHasLeftTheDevice) {
  const Allocation a = this->Managed(2 * kMiB), b = this->Managed(2 * kMiB);
  this->Launch({a, b});
  // The job fits in the budget so far: its dead data would never be copied back, so the free
  // makes no device call.
  EXPECT_FALSE(this->engine_.DiscardsFrees());
  const size_t calls = this->device_.calls.size();
  EXPECT_EQ(this->engine_.OnFree(a, kStream), 0);
  for (size_t i = calls; i < this->device_.calls.size(); ++i) {
    EXPECT_EQ(this->device_.calls[i].what, "record");  // only the ordering of the room it frees
  }
  EXPECT_TRUE(this->device_.Calls("discard").empty());
  EXPECT_EQ(this->engine_.discard_bytes(), 0u);
  EXPECT_EQ(this->engine_.resident_estimate(), 2 * kMiB);
  // A freed allocation is never a victim.
  const Allocation c = this->Managed(4 * kMiB), d = this->Managed(4 * kMiB);
  this->Launch({c});
  this->Launch({d});
  EXPECT_EQ(this->Addresses("to_host"), (std::vector<uint64_t>{b.base}));
  // Something has left the device: a free now discards.
  EXPECT_TRUE(this->engine_.DiscardsFrees());
  EXPECT_EQ(this->engine_.OnFree(c, kStream), 0);
  EXPECT_EQ(this->Addresses("discard"), (std::vector<uint64_t>{c.base}));
  EXPECT_EQ(this->engine_.discard_bytes(), 4 * kMiB);
  EXPECT_EQ(this->engine_.resident_estimate(), 4 * kMiB);
  this->device_.discard_result = 1;  // CUDA_ERROR_INVALID_VALUE: a failure
  EXPECT_EQ(this->engine_.OnFree(b, nullptr), 1);
  EXPECT_EQ(this->engine_.discard_bytes(), 4 * kMiB);
  // A driver that cannot discard at all (before CUDA 13.0): no failure, nothing discarded.
  this->device_.discard_result = kDeviceNotSupported;
  EXPECT_EQ(this->engine_.OnFree(d, nullptr), 0);
  EXPECT_EQ(this->engine_.discard_bytes(), 4 * kMiB);
}

// A repeating step (weights reused, activations reallocated each step) through the engine: no
// eviction ever names an allocation of the launch it is made for, and the budget holds.
TYPED_TEST(ResidencyEngineTest, NeverEvictsTheAccessSetOverARepeatingStep) {
  std::vector<Allocation> weights;
  for (int i = 0; i < 4; ++i) weights.push_back(this->Managed(kMiB + 4096 * i));
  for (int step = 0; step < 6; ++step) {
    std::vector<Allocation> activations;
    for (int i = 0; i < 4; ++i) activations.push_back(this->Managed(kMiB));
    auto check = [&](std::initializer_list<Allocation> access) {
      const size_t before = this->device_.calls.size();
      EXPECT_EQ(this->Launch(access), 0);
      for (size_t c = before; c < this->device_.calls.size(); ++c) {
        if (this->device_.calls[c].what != "to_host") continue;
        for (const Allocation& a : access) EXPECT_NE(this->device_.calls[c].address, a.base);
      }
      EXPECT_LE(this->engine_.resident_estimate(), this->engine_.budget_bytes());
    };
    for (int i = 0; i < 4; ++i) check({weights[i], activations[i]});
    for (int i = 3; i >= 0; --i) check({weights[i], activations[i], activations[(i + 1) % 4]});
    for (const Allocation& a : activations) {
      this->engine_.OnFree(a, kStream);
      this->registry_.Erase(a.base);
    }
  }
}

// The `none` policy: the engine keeps its books but makes no device call of its own, whatever the
// launches need and whatever is freed; the device pages on demand.
// The probe the fake device checks: set while this thread holds an engine's lock, not for another
// thread.
TEST(EngineMutexTest, HeldByThisThreadWhileLockedOnly) {
  EngineMutex mutex;
  EXPECT_FALSE(EngineMutex::HeldByThisThread());
  {
    std::lock_guard lock(mutex);
    EXPECT_TRUE(EngineMutex::HeldByThisThread());
    bool other = true;
    std::thread([&other] { other = EngineMutex::HeldByThisThread(); }).join();
    EXPECT_FALSE(other);
  }
  EXPECT_FALSE(EngineMutex::HeldByThisThread());
}

TEST(NoMovePolicyTest, TheEngineMovesAndDiscardsNothing) {
  FakeDevice device;
  AllocationRegistry registry;
  ResidencyEngine engine(&device, MakeNoMovePolicy(), 4 * kMiB,
                         EngineOptions{8, 2 * kMiB, /*size_lookahead_from_time=*/true});
  EXPECT_EQ(engine.policy_name(), "none");
  std::vector<Allocation> all;
  for (int i = 0; i < 6; ++i) {
    uint64_t address = 0;
    device.AllocateManaged(&address, 2 * kMiB);
    all.push_back(registry.Insert(address, 2 * kMiB, Backing::kManaged, false, true));
    engine.OnAllocated(all.back());
  }
  const size_t made = device.calls.size();
  for (int step = 0; step < 4; ++step) {  // a repeating step three times the budget
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(engine.OnLaunch(AccessSet({all[i], all[(i + 1) % all.size()]}), kStream), 0);
    }
  }
  EXPECT_EQ(engine.OnFree(all[0], kStream), 0);
  EXPECT_EQ(device.calls.size(), made);
  EXPECT_EQ(engine.prefetch_bytes() + engine.evict_bytes() + engine.discard_bytes(), 0u);
  EXPECT_EQ(MakePolicy("none")->name(), "none");
}

// `count` managed allocations of `bytes`, made on `device`, registered and told to `engine`.
std::vector<Allocation> ManagedAllocations(int count, uint64_t bytes, FakeDevice* device,
                                           AllocationRegistry* registry, ResidencyEngine* engine) {
  std::vector<Allocation> all;
  for (int i = 0; i < count; ++i) {
    uint64_t address = 0;
    device->AllocateManaged(&address, bytes);
    all.push_back(registry->Insert(address, bytes, Backing::kManaged, false, true));
    engine->OnAllocated(all.back());
  }
  return all;
}

// The learned policy's lookahead on the side stream, over a cyclic scan of 6 allocations that do
// not all fit: once the step is found, the next launches' access sets are prefetched on a side
// stream after the evictions that made their room, and the launch that needs them waits for the
// side stream's event. No eviction names the current or the next launch's allocations.
TEST(LookaheadTest, PrefetchesTheNextLaunchesOnASideStreamOrderedByEvents) {
  FakeDevice device;
  AllocationRegistry registry;
  ResidencyEngine engine(&device, MakeLearnedPolicy(), 8 * kMiB, EngineOptions{2});
  const std::vector<Allocation> all = ManagedAllocations(6, 2 * kMiB, &device, &registry, &engine);
  Stream side = nullptr;      // prefetches ahead; made on the first launch
  Stream evict = nullptr;     // evictions ahead; made on the first launch
  std::set<Event> side_done;  // events recorded on the side stream
  uint64_t side_prefetches = 0, waited_launches = 0;
  std::map<uint64_t, Event> pending;  // address prefetched ahead -> its batch's done event
  std::set<Event> room_events;        // recorded after evictions (the evict or launch stream)
  for (int launch = 0; launch < 6 * 12; ++launch) {
    const Allocation& now = all[launch % 6];
    const Allocation& next = all[(launch + 1) % 6];
    const size_t begin = device.calls.size();
    ASSERT_EQ(engine.OnLaunch(AccessSet{now}, kStream), 0);
    if (side == nullptr) side = device.Calls("stream").at(0).stream;
    if (evict == nullptr) evict = device.Calls("stream").at(1).stream;
    std::vector<DeviceCall> range(device.calls.begin() + begin, device.calls.end());
    // A launch whose data came ahead waits for the side stream first.
    if (pending.contains(now.base)) {
      ASSERT_FALSE(range.empty());
      EXPECT_EQ(range[0].what, "wait");
      EXPECT_EQ(range[0].stream, kStream);
      EXPECT_TRUE(side_done.contains(range[0].event));
      ++waited_launches;
      pending.erase(now.base);
    }
    Event launch_point = nullptr;
    bool evict_waited = false;
    for (size_t c = 0; c < range.size(); ++c) {
      const DeviceCall& call = range[c];
      if (call.what == "to_host") {
        EXPECT_NE(call.address, now.base);
        EXPECT_NE(call.address, next.base);
        pending.erase(call.address);
      }
      if (call.what == "record" && call.stream == kStream) {
        launch_point = call.event;
        if (c > 0 && range[c - 1].what == "to_host") room_events.insert(call.event);
      }
      if (call.stream == evict) {
        // Evictions ahead run after the launch stream's work so far (the victims' last uses).
        if (call.what == "wait") {
          EXPECT_EQ(call.event, launch_point);
          evict_waited = true;
        }
        if (call.what == "to_host") {
          EXPECT_TRUE(evict_waited) << "eviction before the launch point";
        }
        if (call.what == "to_device") {
          ADD_FAILURE() << "a prefetch on the evict stream";
        }
        if (call.what == "record") {
          EXPECT_EQ(range[c - 1].what, "to_host") << "an event on the evict stream not after one";
          room_events.insert(call.event);
        }
        continue;
      }
      if (call.stream != side) continue;
      if (call.what == "wait") {
        // After the evictions that made the room it takes.
        EXPECT_TRUE(room_events.contains(call.event));
      }
      if (call.what == "to_device" || call.what == "to_host") {
        EXPECT_NE(launch_point, nullptr) << "side-stream move before the launch stream's event";
      }
      if (call.what == "to_device") {
        ++side_prefetches;
        // The batch's done event is recorded on the side stream after its moves.
        Event done = nullptr;
        for (size_t d = c + 1; d < range.size(); ++d) {
          if (range[d].what == "record" && range[d].stream == side) done = range[d].event;
        }
        ASSERT_NE(done, nullptr);
        side_done.insert(done);
        pending[call.address] = done;
      }
    }
    EXPECT_LE(engine.resident_estimate(), engine.budget_bytes());
  }
  EXPECT_EQ(engine.step_length(), 6u);
  EXPECT_GT(side_prefetches, 10u);
  EXPECT_GT(waited_launches, 10u);
  EXPECT_GT(engine.lookahead_prefetch_bytes(), 0u);
  EXPECT_GT(engine.predicted_launches(), 6u * 8);
}

// Room counted free is free on the device only once the discard or eviction that made it has
// run on its stream. A training-like step over the fake device: 6 weights of 2 MiB used in turn on
// the launch stream, each with a fresh activation freed (discarded) on another stream right after
// its launch, and a gradient table used by an optimizer on a third stream; 12 MiB of budget. Then:
// - every discard of a resident allocation is followed on its stream by an event, and every
//   lookahead eviction on the evict stream by one;
// - every wait of the prefetch stream is for such an event, and both kinds are waited for (a
//   prefetch into room a discard or an eviction freed waits for that event);
// - an eviction of the gradient table (last used on the optimizer's stream) waits for an event
//   recorded on that stream after its last use.
TEST(LookaheadTest, PrefetchesWaitForTheEventsThatFreedTheirRoom) {
  FakeDevice device;
  AllocationRegistry registry;
  ResidencyEngine engine(&device, MakeLearnedPolicy(), 12 * kMiB, EngineOptions{2});
  Stream const free_stream = reinterpret_cast<Stream>(0x6);
  Stream const optimizer = reinterpret_cast<Stream>(0x7);
  auto managed = [&](uint64_t bytes) {
    uint64_t address = 0;
    device.AllocateManaged(&address, bytes);
    const Allocation allocation = registry.Insert(address, bytes, Backing::kManaged, false, true);
    engine.OnAllocated(allocation);
    return allocation;
  };
  std::vector<Allocation> weights;
  for (int i = 0; i < 6; ++i) weights.push_back(managed(2 * kMiB));
  const Allocation gradients = managed(2 * kMiB);
  for (int step = 0; step < 12; ++step) {
    for (const Allocation& weight : weights) {
      const Allocation activation = managed(2 * kMiB);
      ASSERT_EQ(engine.OnLaunch(AccessSet{weight, activation}, kStream), 0);
      ASSERT_EQ(engine.OnFree(activation, free_stream), 0);
      registry.Erase(activation.base);
    }
    ASSERT_EQ(engine.OnLaunch(AccessSet{gradients}, optimizer), 0);
    EXPECT_LE(engine.resident_estimate(), engine.budget_bytes());
  }
  ASSERT_EQ(engine.step_length(), 7u);
  const Stream side = device.Calls("stream").at(0).stream;
  const Stream evict = device.Calls("stream").at(1).stream;
  const std::vector<DeviceCall>& calls = device.calls;
  std::set<Event> discarded, evicted, own_evicted;  // events recorded after such work
  std::map<Stream, size_t> last_call;               // per stream, its latest call so far
  size_t discards = 0, discard_waits = 0, eviction_waits = 0, gradient_evictions = 0;
  Event optimizer_point = nullptr;  // the newest event recorded on the optimizer's stream
  size_t optimizer_point_at = 0, gradient_last_use = 0;
  for (size_t c = 0; c < calls.size(); ++c) {
    const DeviceCall& call = calls[c];
    const auto previous = last_call.find(call.stream);
    const DeviceCall* before = previous == last_call.end() ? nullptr : &calls[previous->second];
    last_call[call.stream] = c;
    if (call.what == "discard") ++discards;
    if (call.what == "record" && before != nullptr && before->what == "discard") {
      discarded.insert(call.event);
    }
    if (call.what == "record" && before != nullptr && before->what == "to_host") {
      (call.stream == evict ? evicted : own_evicted).insert(call.event);
    }
    if (call.what == "to_host" && call.stream == evict) {
      ASSERT_NE(c + 1, calls.size());
      EXPECT_EQ(calls[c + 1].what, "record") << "no event after a lookahead eviction";
    }
    if (call.what == "record" && call.stream == optimizer) {
      optimizer_point = call.event;
      optimizer_point_at = c;
    }
    if (call.what == "to_device" && call.stream == optimizer && call.address == gradients.base) {
      gradient_last_use = c;
    }
    if (call.what == "wait" && call.stream == side) {
      const bool by_discard = discarded.contains(call.event);
      const bool by_eviction = evicted.contains(call.event) || own_evicted.contains(call.event);
      EXPECT_TRUE(by_discard || by_eviction) << "the prefetch stream waits for another event";
      discard_waits += by_discard;
      eviction_waits += by_eviction;
    }
    if (call.what == "to_host" && call.address == gradients.base) {
      ++gradient_evictions;
      // After its last use on the optimizer's stream: an event recorded there since, that the
      // evicting stream waited for before this eviction.
      ASSERT_NE(optimizer_point, nullptr);
      EXPECT_GT(optimizer_point_at, gradient_last_use);
      bool waited = false;
      for (size_t w = optimizer_point_at; w < c; ++w) {
        waited |= calls[w].what == "wait" && calls[w].stream == call.stream &&
                  calls[w].event == optimizer_point;
      }
      EXPECT_TRUE(waited) << "eviction of the gradients before their last use is done";
    }
  }
  EXPECT_GT(discards, 60u);
  EXPECT_GT(discarded.size(), 60u);  // every discard of resident data
  EXPECT_GT(discard_waits, 0u);
  EXPECT_GT(eviction_waits, 0u);
  EXPECT_GT(gradient_evictions, 3u);
  EXPECT_GT(engine.lookahead_prefetch_bytes(), 0u);
}

// Launches are timed (two events each, to size the lookahead) only once something has had to go
// out: a job that fits in the budget records no events at all, however many steps it repeats; the
// same job over a smaller budget does.
TEST(LookaheadTest, LaunchesAreTimedOnlyOnceSomethingHasToGoOut) {
  for (const uint64_t budget : {64 * kMiB, 8 * kMiB}) {
    FakeDevice device;
    AllocationRegistry registry;
    ResidencyEngine engine(
        &device, MakeLearnedPolicy(), budget,
        EngineOptions{.lookahead_launches = 8, .size_lookahead_from_time = true});
    const std::vector<Allocation> all =
        ManagedAllocations(6, 2 * kMiB, &device, &registry, &engine);
    for (int launch = 0; launch < 6 * 12; ++launch) {
      ASSERT_EQ(engine.OnLaunch(AccessSet{all[launch % 6]}, kStream), 0);
    }
    if (budget == 64 * kMiB) {
      EXPECT_TRUE(device.Calls("record").empty());
      EXPECT_TRUE(device.Calls("to_host").empty());
    } else {
      EXPECT_FALSE(device.Calls("to_host").empty());
      EXPECT_GT(device.Calls("record").size(), 12u * 2);
    }
  }
}

TEST(LookaheadTest, NoSideStreamWithLookaheadOff) {
  FakeDevice device;
  ResidencyEngine engine(&device, MakeLearnedPolicy(), 8 * kMiB, EngineOptions{0});
  AllocationRegistry registry;
  uint64_t address = 0;
  device.AllocateManaged(&address, kMiB);
  const Allocation a = registry.Insert(address, kMiB, Backing::kManaged, false, true);
  engine.OnAllocated(a);
  for (int i = 0; i < 50; ++i) engine.OnLaunch(AccessSet{a}, kStream);
  EXPECT_TRUE(device.Calls("stream").empty());
  EXPECT_TRUE(device.Calls("event").empty());
  EXPECT_EQ(engine.lookahead_prefetch_bytes(), 0u);
}

}  // namespace
}  // namespace spillway::policy
