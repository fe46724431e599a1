// The shim's log: one line per message, prefixed "spillway: ", written with a single write(2)
// from a stack buffer (no allocation, no stdio locks), to stderr or SPILLWAY_LOG_FILE.
#ifndef SPILLWAY_INTERPOSE_LOG_H_
#define SPILLWAY_INTERPOSE_LOG_H_

#include "interpose/config.h"

namespace spillway::interpose {

// Where lines go and which levels are written. Default: stderr, warn.
void SetLogSink(LogLevel level, int fd);

bool LogEnabled(LogLevel level);

// Formats a line (truncated to about 1 KiB) and writes it when `level` is enabled.
void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_LOG_H_
