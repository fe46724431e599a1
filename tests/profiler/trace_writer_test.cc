// Tests of the TraceWriter's concurrency and limits: many threads writing at once (every record
// arrives, each thread's order kept) in every flush mode; the dropped-record count when the
// buffer budget is tiny, and under pressure every record written or counted; a forked child that
// abandons the writer leaves the parent's trace intact; thread ids are looked up again after fork;
// records after Close are ignored; a path that cannot be created is a clear error.
#include "profiler/trace/trace_writer.h"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "profiler/trace/trace_reader.h"
#include "tests/profiler/trace_test_util.h"

namespace spillway::trace {
namespace {

using testing::TempPath;
using testing::TestHeader;

struct ReadBack {
  std::map<uint32_t, std::vector<uint64_t>> ids_by_thread;  // alloc records' ids, file order
  uint64_t records = 0;
  EndRecord end;
};

ReadBack ReadAllocs(const std::string& path) {
  ReadBack out;
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  Record record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    ++out.records;
    if (const auto* a = std::get_if<AllocRecord>(&record)) {
      out.ids_by_thread[a->thread].push_back(a->allocation_id);
    }
  }
  out.end = (*reader)->end();
  return out;
}

class TraceWriterThreads : public ::testing::TestWithParam<WriterOptions::Flush> {};

TEST_P(TraceWriterThreads, EveryRecordArrivesInThreadOrder) {
  TempPath path("threads.trace");
  WriterOptions options;
  options.flush = GetParam();
  options.buffer_bytes = 4096;  // many hand-offs
  options.max_buffered_bytes = 64 << 20;
  auto writer = TraceWriter::Open(path.path(), TestHeader(), options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr int kThreads = 8;
  constexpr uint64_t kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 1; i <= kPerThread; ++i) {
        AllocRecord r;
        r.time_ns = i;
        r.thread = static_cast<uint32_t>(t);
        r.allocation_id = i;
        r.bytes = 256;
        (*writer)->Write(r);
        if (i % 5000 == 0) (*writer)->InternString("kernel_" + std::to_string(i));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->records_dropped(), 0u);
  const ReadBack back = ReadAllocs(path.path());
  EXPECT_EQ(back.end.records_dropped, 0u);
  ASSERT_EQ(back.ids_by_thread.size(), static_cast<size_t>(kThreads));
  for (const auto& [thread, ids] : back.ids_by_thread) {
    ASSERT_EQ(ids.size(), kPerThread) << "thread " << thread;
    for (uint64_t i = 0; i < kPerThread; ++i) {
      ASSERT_EQ(ids[i], i + 1) << "thread " << thread << " out of order at " << i;
    }
  }
  EXPECT_EQ(back.records, kThreads * kPerThread + 4);  // + strings kernel_5000 ... kernel_20000
}

INSTANTIATE_TEST_SUITE_P(FlushModes, TraceWriterThreads,
                         ::testing::Values(WriterOptions::Flush::kBackground,
                                           WriterOptions::Flush::kInline,
                                           WriterOptions::Flush::kManual),
                         [](const auto& info) {
                           switch (info.param) {
                             case WriterOptions::Flush::kBackground:
                               return "Background";
                             case WriterOptions::Flush::kInline:
                               return "Inline";
                             case WriterOptions::Flush::kManual:
                               return "Manual";
                           }
                           return "Unknown";
                         });

TEST(TraceWriter, DropsAndCountsWhatDoesNotFitTheBudget) {
  TempPath path("drops.trace");
  WriterOptions options;
  options.flush = WriterOptions::Flush::kManual;  // nothing is written until Close
  options.buffer_bytes = 4096;
  options.max_buffered_bytes = 8192;  // two buffers
  auto writer = TraceWriter::Open(path.path(), TestHeader(), options);
  ASSERT_TRUE(writer.ok());
  constexpr uint64_t kRecords = 10000;
  for (uint64_t i = 1; i <= kRecords; ++i) {
    AllocRecord r;
    r.allocation_id = i;
    (*writer)->Write(r);
  }
  // A record larger than a buffer is dropped too.
  std::vector<AccessRecord> accesses(1000);
  LaunchRecord big;
  big.accesses = accesses;
  (*writer)->Write(big);
  const uint64_t dropped = (*writer)->records_dropped();
  ASSERT_TRUE((*writer)->Close().ok());
  const ReadBack back = ReadAllocs(path.path());
  EXPECT_EQ(back.end.records_dropped, dropped);
  ASSERT_EQ(back.ids_by_thread.size(), 1u);
  const std::vector<uint64_t>& ids = back.ids_by_thread.begin()->second;
  EXPECT_EQ(ids.size() + dropped, kRecords + 1);
  EXPECT_GT(ids.size(), 100u);  // the two buffers' worth arrived...
  EXPECT_LT(ids.size(), 300u);  // ...and no more: 8 KiB of 61-byte records
  for (uint64_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], i + 1);  // the first ones, in order
}

TEST(TraceWriter, EveryRecordIsWrittenOrCountedUnderPressure) {
  // Four threads against a 16 KiB budget and the background flusher: some records are dropped,
  // but none is lost without being counted, and each thread's records stay in order.
  TempPath path("pressure.trace");
  WriterOptions options;
  options.buffer_bytes = 4096;
  options.max_buffered_bytes = 16384;
  auto writer = TraceWriter::Open(path.path(), TestHeader(), options);
  ASSERT_TRUE(writer.ok());
  constexpr uint64_t kPerThread = 50000;
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 1; i <= kPerThread; ++i) {
        (*writer)->Write(AllocRecord{i, t, {}, 0, 0, 0, 0, i});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE((*writer)->Close().ok());
  const ReadBack back = ReadAllocs(path.path());
  EXPECT_EQ(back.records + back.end.records_dropped, 4 * kPerThread);
  EXPECT_EQ(back.end.records_dropped, (*writer)->records_dropped());
  for (const auto& [thread, ids] : back.ids_by_thread) {
    for (size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]) << "thread " << thread;
  }
}

TEST(TraceWriter, ForkedChildAbandonsTheTrace) {
  TempPath path("fork.trace");
  auto writer = TraceWriter::Open(path.path(), TestHeader());
  ASSERT_TRUE(writer.ok());
  for (uint64_t i = 1; i <= 1000; ++i) (*writer)->Write(AllocRecord{i, 1, {}, 0, 0, 0, 0, i});
  ASSERT_EQ(TraceThreadId(), static_cast<uint32_t>(syscall(SYS_gettid)));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (TraceThreadId() != static_cast<uint32_t>(getpid())) _exit(3);  // not the parent's id
    (*writer)->AbandonInChild();
    for (uint64_t i = 1; i <= 1000; ++i) (*writer)->Write(AllocRecord{i, 2, {}, 0, 0, 0, 0, i});
    (*writer)->InternString("child");
    writer->reset();  // the destructor must not write or close the parent's trace
    _exit((*writer == nullptr) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  for (uint64_t i = 1001; i <= 2000; ++i) (*writer)->Write(AllocRecord{i, 1, {}, 0, 0, 0, 0, i});
  ASSERT_TRUE((*writer)->Close().ok());
  const ReadBack back = ReadAllocs(path.path());
  ASSERT_EQ(back.ids_by_thread.size(), 1u);
  EXPECT_EQ(back.ids_by_thread.at(1).size(), 2000u);
  EXPECT_EQ(back.records, 2000u);
}

TEST(TraceWriter, RecordsAfterCloseAreIgnored) {
  TempPath path("after_close.trace");
  auto writer = TraceWriter::Open(path.path(), TestHeader());
  ASSERT_TRUE(writer.ok());
  (*writer)->Write(ResidentRecord{1, 2});
  ASSERT_TRUE((*writer)->Close().ok());
  (*writer)->Write(ResidentRecord{3, 4});
  EXPECT_EQ((*writer)->InternString("late"), 0u);
  EXPECT_TRUE((*writer)->Flush().ok());
  EXPECT_EQ(ReadAllocs(path.path()).records, 1u);
}

TEST(TraceWriter, UncreatablePathIsAClearError) {
  auto writer = TraceWriter::Open("/nonexistent/dir/x.trace", TestHeader());
  ASSERT_FALSE(writer.ok());
  EXPECT_TRUE(absl::StartsWith(writer.status().message(), "/nonexistent/dir/x.trace: "))
      << writer.status();
}

// Two writers on one path (two processes given one SPILLWAY_TRACE): the second is refused before
// it truncates or writes anything, so the first's trace stays whole; once closed, the path is free.
TEST(TraceWriter, ASecondWriterOnTheSamePathIsRefusedAndTouchesNothing) {
  TempPath path("shared.trace");
  auto first = TraceWriter::Open(path.path(), TestHeader());
  ASSERT_TRUE(first.ok()) << first.status();
  (*first)->Write(ResidentRecord{1, 2});
  ASSERT_TRUE((*first)->Flush().ok());
  auto second = TraceWriter::Open(path.path(), TestHeader());
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_EQ(second.status().message(),
            path.path() + ": another process is recording to this trace");
  ASSERT_TRUE((*first)->Close().ok());
  auto records = testing::ReadAllEncoded(path.path());
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 1u);
  auto again = TraceWriter::Open(path.path(), TestHeader());
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->Close().ok());
  records = testing::ReadAllEncoded(path.path());
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 0u);  // the old trace was replaced, not appended to
}

}  // namespace
}  // namespace spillway::trace
