// Build-id lookup in ELF notes and batch symbolization through an addr2line child process.
#include "profiler/report/symbolizer.h"

#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace spillway::report {
namespace {

constexpr size_t kBatch = 256;  // addresses per addr2line run

bool ReadAt(std::ifstream& in, uint64_t offset, void* out, size_t size) {
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(static_cast<char*>(out), static_cast<std::streamsize>(size));
  return static_cast<size_t>(in.gcount()) == size;
}

// Runs `argv` and returns its standard output; nullopt when it cannot be started or fails.
std::optional<std::string> RunAndCapture(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return std::nullopt;
  }
  std::string out;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

std::string Basename(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// "function (file:line)" from addr2line's two lines; empty when it knows neither.
std::string SymbolFrom(const std::string& function, const std::string& location) {
  const bool has_function = !function.empty() && function != "??";
  const bool has_location = !location.empty() && !absl::StartsWith(location, "??");
  if (!has_function && !has_location) return "";
  std::string where = Basename(location);
  if (const size_t paren = where.find(" ("); paren != std::string::npos) where.resize(paren);
  if (!has_function) return where;
  return has_location ? absl::StrCat(function, " (", where, ")") : std::string(function);
}

// Where the module's file is: the recorded path when its build-id matches, else the debug file.
std::optional<std::string> FindModuleFile(const Module& m) {
  std::vector<std::string> candidates = {m.path};
  if (m.build_id.size() > 2) {
    candidates.push_back(absl::StrCat("/usr/lib/debug/.build-id/", m.build_id.substr(0, 2), "/",
                                      m.build_id.substr(2), ".debug"));
  }
  for (const std::string& c : candidates) {
    if (c.empty()) continue;
    const std::optional<std::string> id = ReadBuildId(c);
    if (id && (m.build_id.empty() || *id == m.build_id)) return c;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> ReadBuildId(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  Elf64_Ehdr eh;
  if (!ReadAt(in, 0, &eh, sizeof(eh)) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr)) {
    return std::nullopt;
  }
  for (uint16_t i = 0; i < eh.e_shnum && i < 4096; ++i) {
    Elf64_Shdr sh;
    if (!ReadAt(in, eh.e_shoff + uint64_t{i} * sizeof(sh), &sh, sizeof(sh))) return std::nullopt;
    if (sh.sh_type != SHT_NOTE || sh.sh_size > (1 << 16)) continue;
    std::string notes(sh.sh_size, '\0');
    if (!ReadAt(in, sh.sh_offset, notes.data(), notes.size())) return std::nullopt;
    size_t at = 0;
    while (at + sizeof(Elf64_Nhdr) <= notes.size()) {
      Elf64_Nhdr nh;
      std::memcpy(&nh, notes.data() + at, sizeof(nh));
      const size_t name_at = at + sizeof(nh);
      const size_t desc_at = name_at + ((nh.n_namesz + 3) & ~size_t{3});
      const size_t next = desc_at + ((nh.n_descsz + 3) & ~size_t{3});
      if (next > notes.size()) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
          std::memcmp(notes.data() + name_at, "GNU", 4) == 0) {
        std::string hex;
        for (size_t b = 0; b < nh.n_descsz; ++b) {
          absl::StrAppendFormat(&hex, "%02x", static_cast<unsigned char>(notes[desc_at + b]));
        }
        return hex;
      }
      at = next;
    }
  }
  return std::nullopt;
}

SymbolizeResult Symbolize(TraceModel& model, const std::string& addr2line) {
  SymbolizeResult result;
  // Frames to fill, by module.
  absl::flat_hash_map<uint32_t, std::vector<Frame*>> by_module;
  for (CallSite& site : model.sites) {
    for (Frame& f : site.frames) {
      if (f.symbol.empty() && f.module < model.modules.size()) by_module[f.module].push_back(&f);
    }
  }
  for (auto& [module, frames] : by_module) {
    const std::optional<std::string> file = FindModuleFile(model.modules[module]);
    if (!file) {
      ++result.modules_missing;
      continue;
    }
    ++result.modules_found;
    for (size_t begin = 0; begin < frames.size() && result.addr2line_available; begin += kBatch) {
      const size_t end = std::min(frames.size(), begin + kBatch);
      std::vector<std::string> argv = {addr2line, "-f", "-C", "-e", *file};
      // A frame's offset is a return address: look up the call instruction before it.
      for (size_t i = begin; i < end; ++i) {
        argv.push_back(absl::StrFormat("0x%x", frames[i]->offset ? frames[i]->offset - 1 : 0));
      }
      const std::optional<std::string> out = RunAndCapture(argv);
      if (!out) {
        result.addr2line_available = false;
        break;
      }
      const std::vector<std::string> lines = absl::StrSplit(*out, '\n');
      for (size_t i = begin; i < end && 2 * (i - begin) + 1 < lines.size(); ++i) {
        frames[i]->symbol = SymbolFrom(lines[2 * (i - begin)], lines[2 * (i - begin) + 1]);
        if (!frames[i]->symbol.empty()) ++result.frames_symbolized;
      }
    }
  }
  return result;
}

}  // namespace spillway::report
