// Size options read with ParseSize; the messages are the bash launcher's.
#include "launcher/size_check.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/size.h"

namespace spillway::launcher {

std::optional<std::string> CheckSize(const std::string& command_name, const std::string& option,
                                     const std::string& value, uint64_t least) {
  if (value.empty()) return std::nullopt;
  const absl::StatusOr<uint64_t> bytes = ParseSize(value);
  if (!bytes.ok()) {
    return absl::StrCat(command_name, ": bad ", option, " '", value,
                        "': ", bytes.status().message());
  }
  if (*bytes < least) {
    return absl::StrCat(command_name, ": bad ", option, " '", value, "': ", *bytes,
                        " B, less than one 4 KiB page");
  }
  return std::nullopt;
}

}  // namespace spillway::launcher
