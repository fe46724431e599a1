// train_like's usage and options (train_like_args.h), read with CLI11 (common/command_line.h).
#include "examples/train_like_args.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/command_line.h"
#include "common/size.h"
#include "examples/example_util.h"

namespace spillway_train {
namespace {

void Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: train_like [--steps N] [--layers N] [--oversubscription F] [--memory SIZE]\n"
      "                  [--streams N] [--threads N] [--alloc sync|async|mixed] [--managed]\n"
      "                  [--reorder] [--interleave free|shuffled] [--fork-after-step K]\n"
      "  --steps N              training steps (4)\n"
      "  --layers N             layers (8); weights, gradients and activations are tensors of\n"
      "                         equal size, (3 x layers + 3) of them at the step's peak\n"
      "  --oversubscription F   peak working set = F x the device memory (2)\n"
      "  --memory SIZE          size from SIZE instead of the total memory cuMemGetInfo reports\n"
      "  --streams N            compute streams, layer l on stream l mod N (2), plus one\n"
      "                         optimizer stream\n"
      "  --threads N            N independent replicas on their own threads and streams, each\n"
      "                         with 1/N of the working set (1)\n"
      "  --alloc MODE           activations and backward deltas: cuMemAlloc (sync),\n"
      "                         cuMemAllocAsync (async) or alternating (mixed, default)\n"
      "  --managed              every allocation with cuMemAllocManaged (plain unified memory)\n"
      "  --reorder              launch order of the weight updates changes every step: each may\n"
      "                         wait up to 2 more backward layers, the ready ones go shuffled\n"
      "                         (as TensorFlow's executor runs ready ops); same results\n"
      "  --interleave MODE      how the replicas' launches interleave: as their threads run\n"
      "                         (free, default) or one launch a turn, each turn drawn from a\n"
      "                         fixed seed (shuffled: changes every step, same on every run)\n"
      "  --fork-after-step K    after step K the process forks; the child does host-only work\n"
      "                         and exits, the parent waits for it and goes on\n"
      "exit: 0 done, 1 error, 2 out of device memory\n");
}

[[noreturn]] void BadOption(const std::string& what) {
  spillway_demo::BadCommandLine("train_like", what, Usage);
}

int IntArg(const std::string& flag, const char* text, int min) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < min || value > 1000000) {
    BadOption(flag + ": '" + text + "' is not an integer >= " + std::to_string(min));
  }
  return static_cast<int>(value);
}

}  // namespace

Options ParseOptions(int argc, char** argv) {
  Options options;
  std::string oversubscription, memory, interleave, alloc;
  CLI::App app;
  const auto option = [&](const char* flag, std::string* value) {
    return app.add_option(flag, *value)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  app.add_flag("--managed", options.managed);
  app.add_flag("--reorder", options.reorder);
  struct Count {
    const char* flag;
    std::string text;
    int* out;
  };
  Count counts[] = {{"--steps", "", &options.steps},
                    {"--layers", "", &options.layers},
                    {"--streams", "", &options.streams},
                    {"--threads", "", &options.threads},
                    {"--fork-after-step", "", &options.fork_after_step}};
  for (Count& count : counts) option(count.flag, &count.text);
  CLI::Option* oversubscription_option = option("--oversubscription", &oversubscription);
  CLI::Option* memory_option = option("--memory", &memory);
  CLI::Option* interleave_option = option("--interleave", &interleave);
  CLI::Option* alloc_option = option("--alloc", &alloc);
  const spillway::ParsedArguments parsed = spillway::ParseArguments(
      app, {.name = "train_like", .usage = "", .unknown_option = "unknown option '{}'"}, argc,
      argv);
  spillway_demo::ExitIfHelp(parsed.help, Usage);
  if (!parsed.error.empty()) BadOption(parsed.error);
  for (const Count& count : counts) {
    if (app.count(count.flag) > 0) *count.out = IntArg(count.flag, count.text.c_str(), 1);
  }
  if (oversubscription_option->count() > 0) {
    char* end = nullptr;
    options.oversubscription = std::strtod(oversubscription.c_str(), &end);
    if (end == oversubscription.c_str() || *end != '\0' || !(options.oversubscription > 0)) {
      BadOption("--oversubscription: '" + oversubscription + "' is not a number > 0");
    }
  }
  if (memory_option->count() > 0) {
    const auto size = spillway::ParseSize(memory);
    if (!size.ok() || *size == 0) {
      BadOption("--memory: " +
                (size.ok() ? "must be positive" : std::string(size.status().message())));
    }
    options.memory = *size;
  }
  if (interleave_option->count() > 0) {
    if (interleave != "free" && interleave != "shuffled") {
      BadOption("--interleave: '" + interleave + "' is not free or shuffled");
    }
    options.shuffled_turns = interleave == "shuffled";
  }
  if (alloc_option->count() > 0) {
    if (alloc == "sync") {
      options.alloc = AllocMode::kSync;
    } else if (alloc == "async") {
      options.alloc = AllocMode::kAsync;
    } else if (alloc == "mixed") {
      options.alloc = AllocMode::kMixed;
    } else {
      BadOption("--alloc: '" + alloc + "' is not sync, async or mixed");
    }
  }
  if (options.fork_after_step > options.steps) {
    BadOption("--fork-after-step: " + std::to_string(options.fork_after_step) +
              " is after the last step (--steps " + std::to_string(options.steps) + ")");
  }
  if (options.fork_after_step > 0 && options.threads > 1) {
    BadOption("--fork-after-step works with --threads 1 only");
  }
  return options;
}

}  // namespace spillway_train
