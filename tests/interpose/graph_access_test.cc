// GraphAccessTable (the kernel-node words kept per instantiated graph) and the capture tracker's
// per-stream answer, which keeps the engine from moving data for launches that are only recorded.
#include "interpose/graph_access.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "interpose/capture_state.h"

namespace spillway::interpose {
namespace {

using State = GraphAccessTable::State;

TEST(GraphAccessTableTest, MergesTheWordsOfEveryKernelNodeInNodeOrder) {
  GraphAccessTable table;
  std::vector<uint64_t> words = {99};
  size_t nodes = 7;
  EXPECT_EQ(table.Words(1, &words, &nodes), State::kUnknown);
  EXPECT_TRUE(words.empty());
  EXPECT_EQ(nodes, 0u);
  table.Remember(1, {{0x10, {0x1000, 0x2000}}, {0x20, {}}, {0x10, {0x3000}}});
  ASSERT_EQ(table.Words(1, &words, &nodes), State::kKnown);
  EXPECT_EQ(words, (std::vector<uint64_t>{0x1000, 0x2000, 0x3000}));
  EXPECT_EQ(nodes, 3u);
  EXPECT_EQ(table.Words(2, &words, &nodes), State::kUnknown);
}

TEST(GraphAccessTableTest, StaleUntilRememberedAgainAndForgottenOnDestroy) {
  GraphAccessTable table;
  table.Remember(5, {{0x10, {0x1000}}});
  EXPECT_TRUE(table.MarkStale(5));
  EXPECT_FALSE(table.MarkStale(5));  // said once
  std::vector<uint64_t> words;
  size_t nodes = 0;
  EXPECT_EQ(table.Words(5, &words, &nodes), State::kStale);
  EXPECT_TRUE(words.empty());
  table.Remember(5, {{0x10, {0x4000}}});  // re-read after cuGraphExecUpdate
  ASSERT_EQ(table.Words(5, &words, &nodes), State::kKnown);
  EXPECT_EQ(words, std::vector<uint64_t>{0x4000});
  table.Forget(5);
  EXPECT_EQ(table.Words(5, &words, &nodes), State::kUnknown);
  EXPECT_EQ(table.size(), 0u);
}

TEST(CaptureTrackerTest, KnowsWhichStreamsCaptureInEveryMode) {
  CaptureTracker tracker;
  int a = 0, b = 0;
  EXPECT_FALSE(tracker.IsCapturing(&a));
  tracker.OnBegin(&a, CaptureTracker::kRelaxed);
  EXPECT_TRUE(tracker.IsCapturing(&a));
  EXPECT_FALSE(tracker.IsCapturing(&b));
  EXPECT_FALSE(tracker.ActiveForThisThread());  // relaxed captures concern no allocation
  std::thread([&] { tracker.OnBegin(&b, CaptureTracker::kThreadLocal); }).join();
  EXPECT_TRUE(tracker.IsCapturing(&b));
  tracker.OnBegin(&a, CaptureTracker::kGlobal);  // begun again: still one capture of `a`
  tracker.OnEnd(&a);
  EXPECT_FALSE(tracker.IsCapturing(&a));
  tracker.OnEnd(&b);
  tracker.OnEnd(&b);  // unknown by now: ignored
  EXPECT_FALSE(tracker.IsCapturing(&b));
}

}  // namespace
}  // namespace spillway::interpose
