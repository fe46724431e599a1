// The check of a size option's value (--device-memory, --host-memory, --ballast-headroom) before
// the job starts: read by the library's own parser (common/size.h), so the launcher refuses
// exactly what libspillway.so would.
#ifndef SPILLWAY_LAUNCHER_SIZE_CHECK_H_
#define SPILLWAY_LAUNCHER_SIZE_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spillway::launcher {

// The usage error for VALUE of OPTION given to COMMAND_NAME ("run", "profile"), or nothing when
// VALUE is empty (not set) or a size of at least LEAST bytes, e.g.
// "run: bad --device-memory '3GX': unknown unit 'GX' in '3GX'" or
// "run: bad --device-memory '0': 0 B, less than one 4 KiB page".
std::optional<std::string> CheckSize(const std::string& command_name, const std::string& option,
                                     const std::string& value, uint64_t least);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_SIZE_CHECK_H_
