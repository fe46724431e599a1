// File-system checks and path helpers of the launcher: where spillway's files are, and what is
// checked before a job starts (the summary's folder, the program, a preloadable folder).
#ifndef SPILLWAY_LAUNCHER_PATHS_H_
#define SPILLWAY_LAUNCHER_PATHS_H_

#include <optional>
#include <string>
#include <string_view>

namespace spillway::launcher {

// The folder part of PATH as dirname(1) has it ("." for a bare name, "/" for "/x").
std::string Dirname(std::string_view path);

// PATH made absolute against the working directory (the job may change directory).
std::string AbsolutePath(const std::string& path);

// Whether PATH is an executable regular file (a link followed).
bool IsExecutableFile(const std::string& path);

// spillway's folder (libspillway.so and the tools): next to this program, else $SPILLWAY_HOME,
// else $SPILLWAY_HOME/build/out, else <this program's folder>/../build/out, else the installed
// folder (<this program's folder>/../lib/spillway). Nothing (and the line saying where it looked
// on stderr) when there is none.
std::optional<std::string> FindLibdir();

// A failed check before the job starts: the line to print and the exit status.
struct CheckFailure {
  std::string message;
  int status;
};

// Whether the library can write the exit summary at SUMMARY (--summary): its folder exists and
// is writable, and so is the file when it exists already and has no "%p" in its name.
std::optional<CheckFailure> CheckSummaryPath(const std::string& command_name,
                                             const std::string& summary);

// Whether PROGRAM can be started as exec would start it: 127 when there is none, 126 when it is
// not an executable file, as a shell says.
std::optional<CheckFailure> CheckProgram(const std::string& command_name,
                                         const std::string& program);

// LD_PRELOAD is a list separated by spaces and colons: ld.so would skip a library whose path holds
// either, and the job would run without spillway. So such a LIBDIR is refused.
std::optional<CheckFailure> CheckPreloadable(const std::string& command_name,
                                             const std::string& libdir);

// What tells a file's contents apart over time: its inode, modification time and size (a link
// followed); "" when it does not exist.
std::string FileIdentity(const std::string& path);

// --simgpu: puts LIBDIR/simgpu (simgpu's libcuda.so.1) in front of LD_LIBRARY_PATH; exits 1 with
// a line saying so when there is none.
void UseSimgpu(const std::string& libdir);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_PATHS_H_
