// A small synthetic training job written as a spillway trace (TraceWriter), for the replayer's
// tests: `layers` weights allocated and initialized first; each step loads an input (two halves
// by two ops), runs the layers forward (one activation each), a loss, the layers backward (a
// weight-gradient op and an input-gradient op per layer, activations and deltas freed as they
// die) and an optimizer op per layer (its state made lazily in step 1). Gradients are freed at
// the start of the next step, as zero_grad(set_to_none=True) does, so a step frees what the step
// before it made. Each step ends with a context synchronize.
#ifndef SPILLWAY_TESTS_WORKLOADS_REPLAY_TEST_TRACE_H_
#define SPILLWAY_TESTS_WORKLOADS_REPLAY_TEST_TRACE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace spillway::replay::testing {

struct TestTraceOptions {
  int layers = 6;
  int steps = 4;
  uint64_t tensor_bytes = 2 << 20;  // weights, gradients, optimizer state, activations
  // The bytes of each tensor the ops touch, from its start (0: all). Fewer keep the tests fast
  // (each fresh page the host touches costs a page fault) while the tensors, and so the
  // oversubscription, stay as large.
  uint64_t touch_bytes = 0;
  bool modes = true;               // access modes (format 1.2); else unknown
  bool prologue_sync = false;      // a context synchronize after the weights' initialization
  bool foreach_optimizer = false;  // one optimizer op over every layer (3 accesses a layer)
  bool last_step_differs = false;  // the last step launches one op more
  uint64_t op_ns = 100000;         // each op's recorded time
};

// The peak of live bytes the trace written with `options` has.
uint64_t TestTracePeakBytes(const TestTraceOptions& options);

// Writes the trace to `path`.
absl::Status WriteTestTrace(const std::string& path, const TestTraceOptions& options);

}  // namespace spillway::replay::testing

#endif  // SPILLWAY_TESTS_WORKLOADS_REPLAY_TEST_TRACE_H_
