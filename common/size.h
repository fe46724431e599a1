// Byte sizes as people write them ("2GiB", "512MB", "1.5G", "4096") and as they read them.
// Used for SIMGPU_MEMORY, SPILLWAY_DEVICE_MEMORY and every command-line size.
#ifndef SPILLWAY_COMMON_SIZE_H_
#define SPILLWAY_COMMON_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace spillway {

// Parses a size: a non-negative number (integer or decimal) and an optional unit: B, K/KB/KiB,
// M/MB/MiB, G/GB/GiB, T/TB/TiB, P/PB/PiB (case-insensitive). Decimal units (KB, MB...) are powers
// of 1000; binary units (KiB, K, M, G...) are powers of 1024. Whitespace between number and unit is
// allowed. Errors name what is wrong, e.g. "unknown unit 'GX' in '3GX'".
absl::StatusOr<uint64_t> ParseSize(std::string_view text);

// Formats bytes with a binary unit and up to two decimals: "1.50 GiB", "512 B".
std::string FormatSize(uint64_t bytes);

}  // namespace spillway

#endif  // SPILLWAY_COMMON_SIZE_H_
