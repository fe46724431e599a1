// Finds the job's exit summaries and prints their lines.
#include "launcher/summary_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher/output.h"
#include "launcher/paths.h"
#include "launcher/summary.h"

namespace spillway::launcher {
namespace {

// The names in DIR (no dot files, as a shell's * has them), sorted.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  DIR* folder = opendir(dir.c_str());
  if (folder == nullptr) return names;
  while (const dirent* entry = readdir(folder)) {
    if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
  }
  closedir(folder);
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void PrintSummaries(const std::string& pattern, std::optional<time_t> written_after,
                    const JobEnd& job_end) {
  const std::string dir = Dirname(pattern);
  const size_t slash = pattern.find_last_of('/');
  const std::string base = slash == std::string::npos ? pattern : pattern.substr(slash + 1);
  bool any = false;
  for (const std::string& name : Names(dir)) {
    if (!MatchesPidPattern(base, name)) continue;
    const std::string file = absl::StrCat(dir, "/", name);
    struct stat info {};
    if (stat(file.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    // Newer than a marker made a second before the job started.
    if (written_after && !(info.st_mtim.tv_sec > *written_after ||
                           (info.st_mtim.tv_sec == *written_after && info.st_mtim.tv_nsec > 0))) {
      continue;
    }
    const std::optional<std::vector<std::string>> lines = SummaryLines(ReadFile(file));
    if (!lines) continue;
    any = true;
    for (const std::string& line : *lines) Say(line);
    if (written_after) Say(absl::StrCat("spillway:   summary: ", file));
  }
  if (any) return;
  // Say only what is known: a job killed by a signal wrote none (the summary is written at exit);
  // otherwise either nothing called CUDA or the summary could not be written (its own line said
  // so).
  if (job_end.signaled) {
    Say(absl::StrCat("spillway: no exit summary: the job was ended by signal ", job_end.number,
                     " (SIG", SignalName(job_end.number), ") before it could write one"));
  } else {
    Say("spillway: no process of the job made a CUDA call through spillway, or none could write "
        "its exit summary");
  }
}

}  // namespace spillway::launcher
