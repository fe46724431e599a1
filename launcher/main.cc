// spillway: runs an unmodified CUDA job with libspillway.so preloaded (`spillway run`), records a
// trace of it (`profile`), checks what this machine's driver supports (`doctor`), or hands over to
// the planning and trace tools. It finds the library next to itself first, else in $SPILLWAY_HOME,
// else in <its folder>/../build/out. It replaced a bash launcher (scripts/spillway) and kept its
// commands, options, messages and exit statuses.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "launcher/commands.h"
#include "launcher/output.h"
#include "launcher/process.h"
#include "launcher/usage.h"

int main(int argc, char** argv) {
  using namespace spillway::launcher;
  SaveStartSignalMask();
  // A closed pipe on stdout or stderr must not end the launcher (the job would not start, or be
  // left without its parent): writes fail quietly instead (launcher/output.h).
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    Say("spillway: missing command");
    SayRaw(UsageText(Command::kMain));
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "-h" || command == "--help" || command == "help") {
    Print(UsageText(Command::kMain));
    return 0;
  }
  if (command == "--version" || command == "version") {
    Print(VersionText());
    return 0;
  }
  if (command == "run") RunCommand(args);
  if (command == "profile") ProfileCommand(args);
  if (command == "doctor") DoctorCommand(args);
  for (const auto& [name, tool] : {std::pair<const char*, const char*>{"plan", "spillway-plan"},
                                   {"simulate", "spillway-simulate"},
                                   {"inspect", "spillway-inspect"},
                                   {"report", "spillway-report"},
                                   {"export", "spillway-export"}}) {
    if (command == name) ToolCommand(tool, args);
  }
  UsageError(absl::StrCat("unknown command '", command, "'"), Command::kMain);
}
