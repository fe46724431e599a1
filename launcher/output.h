// What the launcher prints: to stderr or stdout, never failing. A closed or full stream must not
// stop the job from running (the bash launcher, under set -e, once did), so write errors are
// ignored and nothing here can raise SIGPIPE's default action (main ignores SIGPIPE).
#ifndef SPILLWAY_LAUNCHER_OUTPUT_H_
#define SPILLWAY_LAUNCHER_OUTPUT_H_

#include <string_view>

namespace spillway::launcher {

// Writes TEXT to stderr as it is; a failed or short write is dropped.
void SayRaw(std::string_view text);

// Writes TEXT and a newline to stderr; a failed write is dropped.
void Say(std::string_view line);

// Writes TEXT to stdout as it is (help and version texts); a failed write is dropped.
void Print(std::string_view text);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_OUTPUT_H_
