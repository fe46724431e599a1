// Writing a tool's or the shim's output file without destroying what the path names: a regular
// file is replaced atomically (temporary file and rename, so a reader never sees half a file); a
// symbolic link keeps being a link and its target is replaced; a device, FIFO or socket is written
// through, never replaced (so `-o /dev/null` or `/dev/full` behaves as it does for any program);
// and an output that is one of the inputs is refused before anything is written.
#ifndef SPILLWAY_COMMON_OUTPUT_FILE_H_
#define SPILLWAY_COMMON_OUTPUT_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace spillway {

// Writes `contents` to `path` as above. Errors are one line naming the path: a directory, a
// dangling symbolic link, a FIFO nobody reads, a device that refuses the bytes (`/dev/full`), a
// folder that cannot be written.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// An error naming both when `output` is the same file as `input` (the same inode, through any
// path or link); OK when they differ or `output` does not exist yet. `what` names the input in
// the error ("the trace").
absl::Status CheckOutputIsNotInput(const std::string& output, const std::string& input,
                                   std::string_view what);

}  // namespace spillway

#endif  // SPILLWAY_COMMON_OUTPUT_FILE_H_
