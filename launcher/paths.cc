// Path helpers and the launcher's checks of paths before a job starts.
#include "launcher/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/program_dir.h"
#include "launcher/output.h"

namespace spillway::launcher {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool Exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

// FOLDER as `cd FOLDER && pwd` prints it: absolute, "." and ".." resolved by name.
std::string Normalized(const std::string& folder) {
  std::string path = std::filesystem::path(AbsolutePath(folder)).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

std::string Dirname(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  path = path.substr(0, slash);
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path.empty() ? "/" : std::string(path);
}

std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  // $PWD as the shell keeps it (links not resolved) when it is this directory, else getcwd.
  const char* pwd = std::getenv("PWD");
  struct stat named {
  }, here{};
  if (pwd != nullptr && pwd[0] == '/' && stat(pwd, &named) == 0 && stat(".", &here) == 0 &&
      named.st_dev == here.st_dev && named.st_ino == here.st_ino) {
    return absl::StrCat(pwd, "/", path);
  }
  std::error_code error;
  const std::filesystem::path cwd = std::filesystem::current_path(error);
  return absl::StrCat(error ? "." : cwd.string(), "/", path);
}

bool IsExecutableFile(const std::string& path) {
  return IsRegularFile(path) && access(path.c_str(), X_OK) == 0;
}

std::optional<std::string> FindLibdir() {
  const std::string self_dir = ProgramDir();
  std::vector<std::string> candidates = {self_dir};
  const char* home = std::getenv("SPILLWAY_HOME");
  if (home != nullptr && home[0] != '\0') {
    candidates.push_back(home);
    candidates.push_back(absl::StrCat(home, "/build/out"));
  }
  candidates.push_back(self_dir + "/../build/out");
  // Installed (cmake --install): the folder under lib/ that holds libspillway.so and the tools.
  candidates.push_back(absl::StrCat(self_dir, "/", SPILLWAY_BUNDLE_FROM_BIN));
  for (const std::string& candidate : candidates) {
    if (IsRegularFile(candidate + "/libspillway.so")) return Normalized(candidate);
  }
  Say(absl::StrCat("spillway: cannot find libspillway.so (looked next to ", self_dir,
                   "/spillway, in $SPILLWAY_HOME, in ", Normalized(self_dir + "/.."),
                   "/build/out and in ", Normalized(self_dir + "/" + SPILLWAY_BUNDLE_FROM_BIN),
                   "); build it with scripts/build.sh"));
  return std::nullopt;
}

std::optional<CheckFailure> CheckSummaryPath(const std::string& command_name,
                                             const std::string& summary) {
  const std::string path = AbsolutePath(summary);
  const std::string dir = Dirname(path);
  if (!IsDirectory(dir) || access(dir.c_str(), W_OK) != 0) {
    return CheckFailure{absl::StrCat("spillway: ", command_name, ": cannot write the summary into ",
                                     dir, " (--summary ", summary, ")"),
                        2};
  }
  if (path.find("%p") == std::string::npos && Exists(path) && access(path.c_str(), W_OK) != 0) {
    return CheckFailure{absl::StrCat("spillway: ", command_name, ": cannot write the summary to ",
                                     path, " (--summary ", summary, ")"),
                        2};
  }
  return std::nullopt;
}

std::optional<CheckFailure> CheckProgram(const std::string& command_name,
                                         const std::string& program) {
  if (program.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
      const std::string candidate =
          absl::StrCat(dir.empty() ? absl::string_view(".") : dir, "/", program);
      if (IsExecutableFile(candidate)) return std::nullopt;
    }
    return CheckFailure{absl::StrCat("spillway: ", command_name, ": command not found: ", program),
                        127};
  }
  if (IsExecutableFile(program)) return std::nullopt;
  if (Exists(program)) {
    return CheckFailure{absl::StrCat("spillway: ", command_name, ": cannot run ", program,
                                     ": not an executable file"),
                        126};
  }
  return CheckFailure{absl::StrCat("spillway: ", command_name, ": no such file: ", program), 127};
}

std::optional<CheckFailure> CheckPreloadable(const std::string& command_name,
                                             const std::string& libdir) {
  if (libdir.find_first_of(" :") == std::string::npos) return std::nullopt;
  return CheckFailure{
      absl::StrCat("spillway: ", command_name, ": cannot preload '", libdir,
                   "/libspillway.so': LD_PRELOAD cannot hold a path with a space or a colon; put "
                   "spillway in a folder without them"),
      2};
}

std::string FileIdentity(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) return "";
  return absl::StrCat(info.st_ino, " ", info.st_mtim.tv_sec, ".", info.st_mtim.tv_nsec, " ",
                      info.st_size);
}

void UseSimgpu(const std::string& libdir) {
  const std::string folder = libdir + "/simgpu";
  if (!Exists(folder + "/libcuda.so.1")) {
    Say(absl::StrCat("spillway: --simgpu: no simulated driver in ", folder));
    std::exit(1);
  }
  const char* path = std::getenv("LD_LIBRARY_PATH");
  const std::string value =
      path == nullptr || path[0] == '\0' ? folder : absl::StrCat(folder, ":", path);
  setenv("LD_LIBRARY_PATH", value.c_str(), 1);
}

}  // namespace spillway::launcher
