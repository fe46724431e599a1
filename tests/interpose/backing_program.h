// What backing_program's source files share: the scenarios defined outside backing_program.cc,
// and the sum of the words the `fill` kernel writes.
#ifndef SPILLWAY_TESTS_INTERPOSE_BACKING_PROGRAM_H_
#define SPILLWAY_TESTS_INTERPOSE_BACKING_PROGRAM_H_

#include <cuda.h>

#include <cstdint>

int PerThreadStream(CUfunction fill, CUfunction sum);        // backing_program_ptsz.cc
int Copies(int total_mib, CUfunction fill, CUfunction sum);  // backing_program_copies.cc
int LegacyOrder(int total_mib, CUfunction fill);             // backing_program_copies.cc

// The sum of `words` words value, value + 1, ... (what `fill` writes with `value`).
inline uint64_t Expected(uint32_t value, uint64_t words) {
  return words * value + words * (words - 1) / 2;
}

#endif  // SPILLWAY_TESTS_INTERPOSE_BACKING_PROGRAM_H_
