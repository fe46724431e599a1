// Replays the TraceReader fuzz target (profiler/trace/trace_reader_fuzz.cc) over seed traces and a
// deterministic stream of mutations of them (bytes flipped, cut, inserted, duplicated, lengths
// overwritten), so its invariants are checked in every CI run even without libFuzzer.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "profiler/trace/trace_wire.h"
#include "profiler/trace/trace_writer.h"
#include "tests/profiler/trace_test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace spillway::trace {
namespace {

void Replay(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

// Seeds: a trace with every record kind, a trace with only a header, and broken beginnings.
std::vector<std::string> Seeds() {
  testing::TempPath path("fuzz_seed.trace");
  std::vector<std::string> seeds;
  {
    auto writer = TraceWriter::Open(path.path(), testing::TestHeader());
    EXPECT_TRUE(writer.ok());
    const ModuleId module = (*writer)->InternModule("00ff", "/lib/a.so");
    const Frame frames[] = {{module, 1}, {module, 2}};
    const CallSiteId site = (*writer)->InternCallSite(frames);
    const StringId name = (*writer)->InternString("kernel");
    for (const Record& r : testing::OneOfEachKind(name, site)) testing::WriteRecord(**writer, r);
    EXPECT_TRUE((*writer)->Close().ok());
    seeds.push_back(testing::ReadFile(path.path()));
  }
  {
    auto writer = TraceWriter::Open(path.path(), HeaderRecord{});
    EXPECT_TRUE(writer.ok());
    EXPECT_TRUE((*writer)->Close().ok());
    seeds.push_back(testing::ReadFile(path.path()));
  }
  seeds.push_back("");
  seeds.push_back("SPWTRACE");
  seeds.push_back(seeds[1].substr(0, wire::kPreambleBytes));
  return seeds;
}

TEST(TraceReaderFuzzReplay, Seeds) {
  for (const std::string& seed : Seeds()) Replay(seed);
}

TEST(TraceReaderFuzzReplay, Mutations) {
  const std::vector<std::string> seeds = Seeds();
  std::mt19937 random(20261123);
  for (int i = 0; i < 50000; ++i) {
    std::string input = seeds[random() % 2];
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits && !input.empty(); ++e) {
      const size_t at = random() % input.size();
      switch (random() % 6) {
        case 0:  // flip bits
          input[at] = static_cast<char>(input[at] ^ (1 << (random() % 8)));
          break;
        case 1:  // set a byte
          input[at] = static_cast<char>(random());
          break;
        case 2:  // cut the tail
          input.resize(at);
          break;
        case 3:  // insert bytes
          input.insert(at, std::string(1 + random() % 8, static_cast<char>(random())));
          break;
        case 4: {  // duplicate a piece (records repeated)
          const size_t n = std::min<size_t>(input.size() - at, 1 + random() % 64);
          input.insert(random() % input.size(), input.substr(at, n));
          break;
        }
        case 5: {  // overwrite 4 bytes with a boundary value (a length, a count)
          static constexpr uint32_t kValues[] = {
              0, 1, 0xff, 0xffff, 0x7fffffff, 0xffffffff, wire::kMaxPayloadBytes, 64, 65};
          const uint32_t v = kValues[random() % 9];
          if (at + 4 <= input.size()) std::memcpy(input.data() + at, &v, 4);
          break;
        }
      }
    }
    Replay(input);
  }
}

}  // namespace
}  // namespace spillway::trace
