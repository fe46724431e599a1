// Replays the ParseSize fuzz target over hand-picked seeds and a deterministic stream of generated
// inputs, so the fuzz invariants are checked in every CI run even without libFuzzer.
#include <cstdint>
#include <random>
#include <string>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace spillway {
namespace {

void Replay(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(SizeFuzzReplay, Seeds) {
  for (const char* seed : {"", "0", "1", "1023", "1025", "2GiB", "1.5G", " 7k ", "3 MB", "9.99TB",
                           "18446744073709551615", "99999999999TiB", ".", "1..2", "1e9", "-1",
                           "0x10", "1.0000000000000000000001KiB", "\t8\tMiB\n"}) {
    Replay(seed);
  }
}

TEST(SizeFuzzReplay, GeneratedInputs) {
  static constexpr char kAlphabet[] = "0123456789. \tkKmMgGtTbBiIxX-+e\n";
  std::mt19937 random(20261123);
  for (int i = 0; i < 50000; ++i) {
    std::string input(random() % 14, ' ');
    for (char& c : input) c = kAlphabet[random() % (sizeof(kAlphabet) - 1)];
    Replay(input);
  }
}

}  // namespace
}  // namespace spillway
