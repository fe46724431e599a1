// A stand-in for the CUDA launchers in the CPU tests: counts launches so a test can prove that a
// rejected call never reached one.
#ifndef SPILLWAY_TESTS_ATTENTION_KERNELS_RECORDING_LAUNCH_H_
#define SPILLWAY_TESTS_ATTENTION_KERNELS_RECORDING_LAUNCH_H_

namespace spillway::attention::testing {

// Launches recorded since the last reset (all four kinds together).
int LaunchCount();
void ResetLaunchCount();

}  // namespace spillway::attention::testing

#endif  // SPILLWAY_TESTS_ATTENTION_KERNELS_RECORDING_LAUNCH_H_
