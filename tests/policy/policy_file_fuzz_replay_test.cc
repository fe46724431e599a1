// Replays the policy-file fuzz target over seeds (valid files and near misses) and a deterministic
// stream of generated inputs, so its invariants are checked in every CI run.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace spillway::policy {
namespace {

void Replay(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

const std::vector<std::string>& Seeds() {
  static const std::vector<std::string> seeds = {
      "",
      "version = 1\n[budget]\ndevice_memory = \"8GiB\"\n",
      "version = 1\n[model]\nname = \"m\"\nfingerprint = \"00112233aabbccdd\"\nlaunches = 4\n"
      "allocations = 3\n[budget]\ndevice_memory = 4096\n[[rule]]\ncall_site = "
      "\"9c1d2e3f4a5b6c7d\"\n"
      "module = 'libtorch.so'\nmin_size = \"1MiB\"\nmax_size = \"2GiB\"\norder = [1, 2]\n"
      "action = \"host\"\n[[step]]\nposition = 0\nprefetch = [\"1:0-3\", \"2:5\"]\n"
      "[[step]]\nposition = 2\nevict = [\n  \"1:0\", # c\n]\ndiscard = []\npopulate = [\"3:1\"]\n",
      "version = 1\n[budget]\ndevice_memory = \"8GiB\"\n[[step]]\nposition = 1\n"
      "evict = [\"1:2-1\"]\n",
      "version = 2\n",
      "[budget]\n",
      "version = 1\nversion = 1\n",
      "a.b = 1\n",
      "x = {}\n",
      "x = \"\"\"\n",
      "x = 1.5\n",
      "x = [1, \"a\"]\n",
      "x = [[1]]\n",
      "[[a]]\n[a]\n",
      "[[[1]]]\n",  // toml++ 3.3 asserted on a header's first key character (tomlplusplus.h)
      "version = 1\n[?or\n",
      "version = 1\xd0\x81\n",  // toml++ 3.3 reached an unreachable point
                                // (policy/plan/tomlplusplus.h)
      "version = 99999999999999999999\n",
      "v = \"\\q\"\n",
      "v = \"\\\n",
      "version = 1\n[model]\nstep_events = 4194305\n",
      "version = 1\n[[rule]]\ncall_site = \"9C1D2E3F4A5B6C7D\"\n",
      // Nested far deeper than a recursive parser's stack holds.
      "x = " + std::string(200000, '[') + std::string(200000, ']') + "\n",
  };
  return seeds;
}

TEST(PolicyFileFuzzReplay, Seeds) {
  for (const std::string& seed : Seeds()) Replay(seed);
}

// Mutations of the seeds: byte flips, insertions of TOML punctuation, truncations.
TEST(PolicyFileFuzzReplay, GeneratedInputs) {
  static constexpr char kAlphabet[] = "[]=\"'#,.:-_ \n\t0123456789abcdefruleposition";
  std::mt19937 random(20261123);
  for (int i = 0; i < 50000; ++i) {
    std::string input = Seeds()[random() % Seeds().size()];
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = input.empty() ? 0 : random() % (input.size() + 1);
      const char c = kAlphabet[random() % (sizeof(kAlphabet) - 1)];
      switch (random() % 3) {
        case 0:
          input.insert(at, 1, c);
          break;
        case 1:
          if (at < input.size()) input[at] = c;
          break;
        case 2:
          input.resize(at);
          break;
      }
    }
    Replay(input);
  }
}

}  // namespace
}  // namespace spillway::policy
