// Fuzz target for the policy-file parser (and toml++ under it), the parser of a file
// users write by hand. Invariants: it never crashes; every error names the file and a line; what
// it accepts survives FormatPolicyFile and a second parse unchanged.
// Built with libFuzzer when the compiler is clang (-DSPILLWAY_FUZZ=ON); otherwise replayed over
// seeds and generated inputs by tests/policy/policy_file_fuzz_replay_test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "policy/plan/policy_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = spillway::policy::ParsePolicyFile(text, "fuzz.toml");
  if (!parsed.ok()) {
    if (parsed.status().message().rfind("fuzz.toml:", 0) != 0) __builtin_trap();
    return 0;
  }
  const std::string written = spillway::policy::FormatPolicyFile(*parsed);
  const auto again = spillway::policy::ParsePolicyFile(written, "written.toml");
  if (!again.ok() || !(*again == *parsed)) __builtin_trap();
  return 0;
}
