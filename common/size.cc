// Parsing and formatting of byte sizes.
#include "common/size.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace spillway {
namespace {

// Returns the multiplier of a unit, or 0 when the unit is unknown.
uint64_t UnitMultiplier(const std::string& unit) {
  const std::string u = absl::AsciiStrToLower(unit);
  constexpr uint64_t kKi = 1024;
  if (u.empty() || u == "b") return 1;
  if (u == "k" || u == "kib") return kKi;
  if (u == "m" || u == "mib") return kKi * kKi;
  if (u == "g" || u == "gib") return kKi * kKi * kKi;
  if (u == "t" || u == "tib") return kKi * kKi * kKi * kKi;
  if (u == "p" || u == "pib") return kKi * kKi * kKi * kKi * kKi;
  if (u == "kb") return 1000ull;
  if (u == "mb") return 1000ull * 1000;
  if (u == "gb") return 1000ull * 1000 * 1000;
  if (u == "tb") return 1000ull * 1000 * 1000 * 1000;
  if (u == "pb") return 1000ull * 1000 * 1000 * 1000 * 1000;
  return 0;
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(std::string_view text) {
  // Debian's Abseil has its own absl::string_view, distinct from std::string_view.
  const std::string original(text);
  const absl::string_view stripped = absl::StripAsciiWhitespace(original);
  text = std::string_view(stripped.data(), stripped.size());
  size_t pos = 0;
  bool seen_digit = false, seen_dot = false;
  while (pos < text.size() && (absl::ascii_isdigit(text[pos]) || (text[pos] == '.' && !seen_dot))) {
    seen_dot |= text[pos] == '.';
    seen_digit |= absl::ascii_isdigit(text[pos]) != 0;
    ++pos;
  }
  if (!seen_digit) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", original, "' is not a size (expected e.g. 2GiB, 512MB, 4096)"));
  }
  const std::string number(text.substr(0, pos));
  const std::string unit(absl::StripAsciiWhitespace(std::string(text.substr(pos))));
  const uint64_t multiplier = UnitMultiplier(unit);
  if (multiplier == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown unit '", unit, "' in '", original,
                     "' (use B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB, PB)"));
  }
  const long double value = std::strtold(number.c_str(), nullptr) * multiplier;
  if (!std::isfinite(value) || value >= 18446744073709551615.0L) {
    return absl::InvalidArgumentError(absl::StrCat("size '", original, "' is too large"));
  }
  return static_cast<uint64_t>(std::roundl(value));  // llround stops at 2^63
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) {
    std::snprintf(buffer, sizeof(buffer), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f %s", value, kUnits[unit]);
  }
  return buffer;
}

}  // namespace spillway
