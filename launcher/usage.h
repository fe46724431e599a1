// The launcher's help texts and its usage errors ("spillway: MESSAGE", a pointer to the help, exit
// status 2), worded as the bash launcher worded them: tests and users match on them.
#ifndef SPILLWAY_LAUNCHER_USAGE_H_
#define SPILLWAY_LAUNCHER_USAGE_H_

#include <string>
#include <string_view>

namespace spillway::launcher {

// Which command a usage error or a help text belongs to.
enum class Command { kMain, kRun, kProfile, kDoctor };

// The help text of COMMAND, ending in a newline.
std::string_view UsageText(Command command);

// The two lines of a usage error: "spillway: MESSAGE" and which --help lists the options.
std::string UsageErrorText(const std::string& message, Command command);

// Prints UsageErrorText to stderr and exits with status 2.
[[noreturn]] void UsageError(const std::string& message, Command command);

// "spillway X.Y.Z", the version this launcher was built as, with a newline.
std::string VersionText();

// --help (COMMAND's text) or --version on stdout and exit status 0, when asked; else nothing.
void ExitOnHelpOrVersion(bool help, bool version, Command command);

}  // namespace spillway::launcher

#endif  // SPILLWAY_LAUNCHER_USAGE_H_
