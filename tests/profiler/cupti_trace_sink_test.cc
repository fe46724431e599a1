// CuptiTraceSink (profiler/cupti/cupti_trace_sink.h): what reaches the trace with record mode's
// options (times and UVM counters only) and with the injection library's (launches, memory too).
#include "profiler/cupti/cupti_trace_sink.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "profiler/trace/trace_reader.h"

namespace spillway::cupti {
namespace {

// Feeds one kernel, one UVM counter and an allocation + release through a sink with `options`,
// and returns the records of the resulting trace after the header.
std::vector<trace::Record> RoundTrip(CuptiTraceSink::Options options,
                                     std::vector<std::string>& strings) {
  const std::string path =
      ::testing::TempDir() + "cupti_trace_sink_test." + std::to_string(getpid()) + ".trace";
  trace::HeaderRecord header;
  header.job = "cupti_trace_sink_test";
  auto writer =
      trace::TraceWriter::Open(path, header, {.flush = trace::WriterOptions::Flush::kManual});
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return {};
  {
    CuptiTraceSink sink(writer->get(), options);
    trace::KernelTimeRecord time;
    time.correlation_id = 12;
    time.start_ns = 100;
    time.end_ns = 200;
    KernelDetails details;
    details.name = "_Z4stepv";
    details.grid[0] = 8;
    details.block[0] = 256;
    sink.OnKernelTime(time, &details);
    sink.OnKernelTime(time, &details);  // the name is interned once
    trace::UvmCounterRecord uvm;
    uvm.kind = trace::UvmKind::kGpuPageFault;
    uvm.count = 2;
    sink.OnUvmCounter(uvm);
    MemoryEvent alloc{.allocation = true,
                      .kind = trace::AllocKind::kManaged,
                      .time_ns = 50,
                      .address = 0x9000,
                      .bytes = 4096};
    sink.OnMemory(alloc);
    MemoryEvent release = alloc;
    release.allocation = false;
    sink.OnMemory(release);
  }
  EXPECT_TRUE((*writer)->Close().ok());
  std::vector<trace::Record> records;
  auto reader = trace::TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  trace::Record record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (auto* s = std::get_if<trace::StringRecord>(&record)) strings.emplace_back(s->text);
    records.push_back(record);
  }
  std::remove(path.c_str());
  return records;
}

template <typename T>
int Count(const std::vector<trace::Record>& records) {
  int n = 0;
  for (const trace::Record& r : records) n += std::holds_alternative<T>(r);
  return n;
}

TEST(CuptiTraceSink, RecordModeWritesTimesAndUvmCountersOnly) {
  std::vector<std::string> strings;
  const std::vector<trace::Record> records = RoundTrip({}, strings);
  EXPECT_EQ(Count<trace::KernelTimeRecord>(records), 2);
  EXPECT_EQ(Count<trace::UvmCounterRecord>(records), 1);
  EXPECT_EQ(Count<trace::LaunchRecord>(records), 0);
  EXPECT_EQ(Count<trace::AllocRecord>(records), 0);
  EXPECT_EQ(Count<trace::FreeRecord>(records), 0);
  EXPECT_TRUE(strings.empty());
}

TEST(CuptiTraceSink, InjectionAlsoWritesLaunchesAndMemory) {
  std::vector<std::string> strings;
  const std::vector<trace::Record> records =
      RoundTrip({.write_launches = true, .write_memory = true}, strings);
  EXPECT_EQ(Count<trace::LaunchRecord>(records), 2);
  EXPECT_EQ(Count<trace::KernelTimeRecord>(records), 2);
  EXPECT_EQ(strings, std::vector<std::string>{"_Z4stepv"});
  uint64_t alloc_id = 0, freed_id = 0;
  for (const trace::Record& r : records) {
    if (auto* l = std::get_if<trace::LaunchRecord>(&r)) {
      EXPECT_EQ(l->correlation_id, 12u);
      EXPECT_EQ(l->time_ns, 100u);
      EXPECT_EQ(l->grid[0], 8u);
      EXPECT_EQ(l->block[0], 256u);
    }
    if (auto* a = std::get_if<trace::AllocRecord>(&r)) alloc_id = a->allocation_id;
    if (auto* f = std::get_if<trace::FreeRecord>(&r)) freed_id = f->allocation_id;
  }
  EXPECT_NE(alloc_id, 0u);
  EXPECT_EQ(freed_id, alloc_id);
}

}  // namespace
}  // namespace spillway::cupti
