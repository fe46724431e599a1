// Access-set resolution over both launch-parameter forms.
#include "policy/engine/access_set.h"

#include <cstring>

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

class AccessSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = registry_.Insert(0x10000, 0x1000, Backing::kManaged, false, true);
    b_ = registry_.Insert(0x20000, 0x1000, Backing::kManaged, false, true);
    c_ = registry_.Insert(0x30000, 0x1000, Backing::kDevice, true, false);
  }
  static std::vector<uint64_t> Ids(const AccessSet& set) {
    std::vector<uint64_t> ids;
    for (const Allocation& allocation : set) ids.push_back(allocation.id);
    return ids;
  }
  AllocationRegistry registry_;
  Allocation a_, b_, c_;
};

// kernel(float* x, uint32_t n, uint32_t pad, uint64_t count, float* y_interior, float* x_again)
TEST_F(AccessSetTest, KernelParamsFormFindsPointersIncludingInteriorOnes) {
  uint64_t x = 0x10000;
  uint32_t n = 7, pad = 0;
  uint64_t count = 0x20000 + 5;  // looks like a pointer: by value it is one (a false positive)
  uint64_t y = 0x30010;          // interior pointer into c
  uint64_t x_again = 0x10ff8;
  void* params[] = {&x, &n, &pad, &count, &y, &x_again};
  const std::vector<ParamInfo> layout = {{0, 8}, {8, 4}, {12, 4}, {16, 8}, {24, 8}, {32, 8}};
  AccessSet set;
  ResolveFromKernelParams(registry_, layout, params, &set);
  EXPECT_EQ(Ids(set), (std::vector<uint64_t>{a_.id, b_.id, c_.id}));
}

TEST_F(AccessSetTest, HandsBackThePointerWordsForArenas) {
  uint64_t x = 0x10000, y = 0x30010;
  uint32_t n = 7, pad = 0;
  void* params[] = {&x, &n, &pad, &y};
  const std::vector<ParamInfo> layout = {{0, 8}, {8, 4}, {12, 4}, {16, 8}};
  AccessSet set;
  std::vector<uint64_t> words = {99};  // cleared first
  ResolveFromKernelParams(registry_, layout, params, &set, &words);
  EXPECT_EQ(words, (std::vector<uint64_t>{0x10000, 0x30010}));  // 4-byte parameters form none
  // The extra form: the packed buffer's words.
  struct {
    uint64_t p;
    uint64_t q;
  } buffer = {0x20008, 0};
  size_t size = sizeof(buffer);
  void* extra[] = {reinterpret_cast<void*>(1), &buffer, reinterpret_cast<void*>(2), &size, nullptr};
  set.clear();
  EXPECT_TRUE(ResolveFromExtra(registry_, extra, &set, &words));
  EXPECT_EQ(words, (std::vector<uint64_t>{0x20008}));
  EXPECT_EQ(Ids(set), (std::vector<uint64_t>{b_.id}));
}

TEST_F(AccessSetTest, NonPointersAreIgnored) {
  uint64_t small = 42, past_end = 0x11000, zero = 0;
  double real = 3.5;
  void* params[] = {&small, &past_end, &zero, &real};
  const std::vector<ParamInfo> layout = {{0, 8}, {8, 8}, {16, 8}, {24, 8}};
  AccessSet set;
  ResolveFromKernelParams(registry_, layout, params, &set);
  EXPECT_TRUE(set.empty());
  ResolveFromKernelParams(registry_, layout, nullptr, &set);
  EXPECT_TRUE(set.empty());
}

TEST_F(AccessSetTest, FourByteParamsDoNotFormWords) {
  // Two 4-byte halves of a pointer at offsets 4 and 8: not an 8-byte-aligned word.
  uint32_t lead = 0, low = 0x20000, high = 0;
  void* params[] = {&lead, &low, &high};
  const std::vector<ParamInfo> layout = {{0, 4}, {4, 4}, {8, 4}};
  AccessSet set;
  ResolveFromKernelParams(registry_, layout, params, &set);
  EXPECT_TRUE(set.empty());
}

TEST_F(AccessSetTest, ExtraBufferForm) {
  unsigned char buffer[32] = {};
  const uint64_t b_interior = 0x20800, value = 12345;
  const uint32_t four = 0x10000;  // at offset 4: not aligned, ignored
  std::memcpy(buffer + 4, &four, 4);
  std::memcpy(buffer + 8, &b_interior, 8);
  std::memcpy(buffer + 16, &value, 8);
  std::memcpy(buffer + 24, &b_interior, 8);
  size_t size = sizeof(buffer);
  void* extra[] = {reinterpret_cast<void*>(1), buffer, reinterpret_cast<void*>(2), &size,
                   reinterpret_cast<void*>(0)};
  AccessSet set;
  EXPECT_TRUE(ResolveFromExtra(registry_, extra, &set));
  EXPECT_EQ(Ids(set), (std::vector<uint64_t>{b_.id}));

  void* no_size[] = {reinterpret_cast<void*>(1), buffer, reinterpret_cast<void*>(0)};
  AccessSet none;
  EXPECT_FALSE(ResolveFromExtra(registry_, no_size, &none));
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace spillway::policy
