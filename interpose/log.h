// The shim's log: one line per message, prefixed "spillway: ", written with a single write(2)
// from a stack buffer (no allocation, no stdio locks), to stderr or SPILLWAY_LOG_FILE.
#ifndef SPILLWAY_INTERPOSE_LOG_H_
#define SPILLWAY_INTERPOSE_LOG_H_

#include <string>
#include <vector>

#include "interpose/config.h"

namespace spillway::interpose {

// Where lines go and which levels are written. Default: stderr, warn.
void SetLogSink(LogLevel level, int fd);

bool LogEnabled(LogLevel level);

// Formats a line (truncated to about 1 KiB) and writes it when `level` is enabled.
void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Logs `format` at `level` and keeps the message (up to 255 bytes) for the exit summary's
// `errors` list: fixed slots, appended without a lock or an allocation.
void ReportProblem(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// The problems kept so far, in order; a last line says so when more were reported than kept.
std::vector<std::string> KeptProblems();

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_LOG_H_
