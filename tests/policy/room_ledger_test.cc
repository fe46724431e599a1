// RoomLedger: freed room is taken oldest first after the room free all along, each take names the
// events of the room it took, and old or no longer free room drops out.
#include "policy/engine/room_ledger.h"

#include <vector>

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

Stream const kA = reinterpret_cast<Stream>(0xa);
Stream const kB = reinterpret_cast<Stream>(0xb);

std::vector<uint64_t> Seqs(const std::vector<RoomLedger::Room>& rooms) {
  std::vector<uint64_t> out;
  for (const RoomLedger::Room& room : rooms) out.push_back(room.seq);
  return out;
}

TEST(RoomLedgerTest, TakesRoomFreeAllAlongFirstThenTheOldest) {
  RoomLedger ledger;
  ledger.Add(1, kA, 4);
  ledger.Add(2, kB, 4);
  ledger.Add(2, kB, 2);  // more room after the same event
  EXPECT_EQ(ledger.bytes(), 10u);
  std::vector<RoomLedger::Room> taken;
  ledger.Take(3, 3, &taken);  // all of it free already: no event to wait for
  EXPECT_TRUE(taken.empty());
  ledger.Take(6, 1, &taken);  // 1 free already, then 4 of event 1 and 1 of event 2
  EXPECT_EQ(Seqs(taken), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(taken[0].stream, kA);
  EXPECT_EQ(taken[1].stream, kB);
  EXPECT_EQ(taken[1].bytes, 1u);
  EXPECT_EQ(ledger.bytes(), 5u);
  taken.clear();
  ledger.Take(9, 0, &taken);  // more than it holds: the rest is not its to give
  EXPECT_EQ(Seqs(taken), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(ledger.empty());
}

TEST(RoomLedgerTest, TrimDropsOldRoomAndTheOldestBeyondWhatIsFree) {
  RoomLedger ledger;
  ledger.Add(1, kA, 4);
  ledger.Add(5, kA, 4);
  ledger.Add(9, kB, 4);
  ledger.Trim(10, 8, 100);  // event 1 is 9 events old: long complete
  EXPECT_EQ(ledger.bytes(), 8u);
  ledger.Trim(10, 8, 6);  // only 6 bytes free: the oldest room was taken by what it cannot see
  EXPECT_EQ(ledger.bytes(), 6u);
  std::vector<RoomLedger::Room> taken;
  ledger.Take(6, 0, &taken);
  EXPECT_EQ(Seqs(taken), (std::vector<uint64_t>{5, 9}));
  EXPECT_EQ(taken[0].bytes, 2u);
  ledger.Add(12, kA, 4);
  ledger.Trim(12, 8, 0);
  EXPECT_TRUE(ledger.empty());
}

}  // namespace
}  // namespace spillway::policy
