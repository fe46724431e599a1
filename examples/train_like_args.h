// train_like's options and their parser (train_like_args.cc reads them with CLI11, apart from the
// workload in train_like.cc so that editing it does not compile CLI11 again).
#ifndef SPILLWAY_EXAMPLES_TRAIN_LIKE_ARGS_H_
#define SPILLWAY_EXAMPLES_TRAIN_LIKE_ARGS_H_

#include <cstdint>

namespace spillway_train {

enum class AllocMode { kSync, kAsync, kMixed };

struct Options {
  int steps = 4;
  int layers = 8;
  double oversubscription = 2.0;
  uint64_t memory = 0;  // 0: the device's total memory as cuMemGetInfo reports it
  int streams = 2;
  int threads = 1;
  AllocMode alloc = AllocMode::kMixed;
  bool managed = false;
  bool reorder = false;
  bool shuffled_turns = false;  // --interleave shuffled
  int fork_after_step = -1;
};

// The options in argv. --help prints the usage and exits 0; a bad argument prints one line naming
// it and the usage on stderr and exits 1 (kExitError).
Options ParseOptions(int argc, char** argv);

}  // namespace spillway_train

#endif  // SPILLWAY_EXAMPLES_TRAIN_LIKE_ARGS_H_
