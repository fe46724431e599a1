// Fuzz target for ParseSize, the parser of every size a user hands in (env values, flags).
// Invariants: it never crashes, and what it accepts survives FormatSize within rounding.
// Built with libFuzzer when the compiler is clang (-DSPILLWAY_FUZZ=ON); otherwise replayed
// over seeds and generated inputs by tests/common/fuzz_replay_test.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/size.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = spillway::ParseSize(text);
  if (!parsed.ok() || *parsed == 0 || *parsed > (1ull << 62)) return 0;
  const auto again = spillway::ParseSize(spillway::FormatSize(*parsed));
  if (!again.ok()) __builtin_trap();
  const long double ratio = static_cast<long double>(*again) / static_cast<long double>(*parsed);
  if (ratio < 0.99L || ratio > 1.01L) __builtin_trap();
  return 0;
}
