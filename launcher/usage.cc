// Help texts (kept word for word from the bash launcher) and usage errors.
#include "launcher/usage.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "launcher/output.h"

#ifndef SPILLWAY_VERSION
#define SPILLWAY_VERSION "unknown"
#endif

namespace spillway::launcher {
namespace {

const char* const kMainUsage = R"(usage: spillway [--help] [--version] <command> [options]

commands:
  run       run a command with libspillway.so preloaded
  profile   run a command and record a trace of its memory use (record mode)
  doctor    report what the CUDA driver supports and whether the hooks resolve
  plan      turn a workload into a policy file for a device budget (spillway-plan)
  simulate  replay a workload against the policies and the lower bound (spillway-simulate)
  inspect   summarize a recorded trace in the terminal (spillway-inspect)
  report    turn a recorded trace into a self-contained HTML report (spillway-report)
  export    turn a recorded trace into a Perfetto timeline (spillway-export --perfetto)

`spillway <command> --help` describes a command.
)";

const char* const kRunUsage = R"(usage: spillway run [options] [--] COMMAND [ARGS...]

Runs COMMAND with libspillway.so appended to LD_PRELOAD (an LD_PRELOAD you set is kept). Child
processes (torchrun and mpirun ranks, data-loader workers) inherit the preload and the settings;
each process manages its own GPU and writes its own exit summary. When the command ends, one line
per process that used CUDA is printed to stderr, and the launcher ends as the command did: with its
exit status, or by the signal that killed it. Signals sent to the launcher reach the command once.

options:
  --summary PATH        write the exit summary JSON to PATH (SPILLWAY_SUMMARY; "%p" = pid)
  --mode MODE           run (default), record or off (SPILLWAY_MODE)
  --log LEVEL           error, warn (default), info or debug (SPILLWAY_LOG)
  --log-file PATH       append the log to PATH instead of stderr (SPILLWAY_LOG_FILE)
  --device-memory SIZE  device-memory budget, e.g. 8GiB (SPILLWAY_DEVICE_MEMORY)
  --host-memory SIZE    how much more than the budget the job is told the device has
                        (SPILLWAY_HOST_MEMORY)
  --policy FILE         the policy file to run (SPILLWAY_POLICY)
  --eviction NAME       eviction policy: learned (default), lru, or none (managed memory
                        that spillway never moves: the baseline) (SPILLWAY_EVICTION)
  --ballast             reserve the device memory beyond the budget, so the GPU behaves like
                        one of the budget's size (SPILLWAY_BALLAST=1; for benchmarks)
  --ballast-headroom SIZE  what the ballast leaves free beyond the budget for the memory a job
                        takes outside its allocations (default 5% of the device; needs
                        --ballast) (SPILLWAY_BALLAST_HEADROOM)
  --framework-allocator keep the frameworks' own caching allocators (their arenas are then
                        tracked per 2 MiB chunk) instead of per-tensor allocators
  -q, --quiet           print nothing of spillway's own (no allocator line, no summary lines)
  --simgpu              use the simulated GPU (puts simgpu's libcuda.so.1 on LD_LIBRARY_PATH)
  -h, --help            this text
  --version             print the version

Framework settings (not with --mode off; a variable you set yourself is always kept):
  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync   unless PYTORCH_ALLOC_CONF is set
  TF_GPU_ALLOCATOR=cuda_malloc_async                (these two not with --framework-allocator
                                                     nor on a driver before CUDA 13.0)
  XLA_PYTHON_CLIENT_ALLOCATOR=platform              (not with --framework-allocator)
  TF_FORCE_GPU_ALLOW_GROWTH=true
  XLA_PYTHON_CLIENT_PREALLOCATE=false

The `--` is needed only when COMMAND starts with '-'.
)";

const char* const kProfileUsage =
    R"(usage: spillway profile [-o TRACE] [run options] [--] COMMAND [ARGS...]

Runs COMMAND like `spillway run` (the residency engine works as usual) and records what it does
to a trace (SPILLWAY_MODE=record): allocations with their call sites, launches with the
allocations they touch, copies, fills, synchronizations, kernel times. Read the trace with
`spillway inspect`, `spillway report` or `spillway export`.

options:
  -o, --output TRACE    where the trace goes (default spillway.trace). Each process of the job
                        records on its own: when one process recorded, its trace is TRACE; when
                        several did, they are TRACE.<pid>. A TRACE containing "%p" is used as is
                        (SPILLWAY_TRACE), "%p" standing for the pid.
  --progress            print a progress line (elapsed time, trace bytes so far) every 2 s to
                        stderr even when it is not a terminal (one line each time); on a
                        terminal it is on by default, one line updated in place; -q turns it off
  every `spillway run` option but --mode (see `spillway run --help`)
)";

const char* const kDoctorUsage = R"(usage: spillway doctor [--simgpu] [--driver PATH]

Reports the driver version, the devices, whether managed memory and managed memory pools work,
whether the CUDA 13 batch prefetch/discard calls exist, and whether spillway's hooks resolve
(run with libspillway.so preloaded).

options:
  --simgpu        check the simulated GPU instead of the machine's driver
  --driver PATH   load the driver from PATH instead of libcuda.so.1
  -h, --help      this text
  --version       print the version
)";

}  // namespace

std::string_view UsageText(Command command) {
  switch (command) {
    case Command::kRun:
      return kRunUsage;
    case Command::kProfile:
      return kProfileUsage;
    case Command::kDoctor:
      return kDoctorUsage;
    case Command::kMain:
      break;
  }
  return kMainUsage;
}

std::string UsageErrorText(const std::string& message, Command command) {
  std::string name;
  switch (command) {
    case Command::kRun:
      name = "run";
      break;
    case Command::kProfile:
      name = "profile";
      break;
    case Command::kDoctor:
      name = "doctor";
      break;
    case Command::kMain:
      return absl::StrCat("spillway: ", message, "\n(spillway --help lists the commands)\n");
  }
  return absl::StrCat("spillway: ", message, "\n(spillway ", name, " --help lists its options)\n");
}

void UsageError(const std::string& message, Command command) {
  SayRaw(UsageErrorText(message, command));
  std::exit(2);
}

std::string VersionText() { return absl::StrCat("spillway ", SPILLWAY_VERSION, "\n"); }

void ExitOnHelpOrVersion(bool help, bool version, Command command) {
  if (!help && !version) return;
  Print(help ? UsageText(command) : VersionText());
  std::exit(0);
}

}  // namespace spillway::launcher
