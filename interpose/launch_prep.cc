// Before a launch, a kernel's or a graph's (see launch_prep.h).
#include "interpose/launch_prep.h"

#include <atomic>

#include "interpose/backing.h"
#include "interpose/driver_device.h"
#include "interpose/log.h"
#include "interpose/record_hooks.h"
#include "interpose/recorder.h"
#include "interpose/runtime.h"

namespace spillway::interpose {

void PrepareLaunch(LaunchRequest request) {
  const bool graph = request.graph_words != nullptr;
  CUstream stream = request.stream;
  if (request.per_thread && stream == nullptr) stream = CU_STREAM_PER_THREAD;
  // None begins before the engine's calls are made. A capture beginning meanwhile (the scope not
  // admitted) holds the moves back too.
  CaptureTracker::NoCaptureScope scope(Captures());
  const bool captured = Captures().IsCapturing(stream);
  const bool held_back =
      !scope.admitted() ||
      (captured ? Captures().ActiveForThisThread()
                : Captures().HoldsBack(graph ? "the engine's moves for a graph launch"
                                             : "the engine's moves for a launch"));
  policy::ResidencyEngine* engine = held_back ? nullptr : Engine();
  if (engine == nullptr && !Recording()) return;
  // Thread-local, read by the recorder after the launch; no allocation once warm.
  policy::AccessSet& access = record_hooks::LaunchAccessSet();
  std::vector<uint64_t>& words = record_hooks::LaunchWords();
  access.clear();
  words.clear();
  if (graph) {
    if (!request.graph_words(request.key, &words)) return;
    request.pointers.words = &words;
  } else if (request.pointers.kernel_params != nullptr) {
    request.pointers.layout = ParamLayoutOf(request.function);
  }
  Front().Resolve(request.pointers, &access, &words);
  if (engine == nullptr || captured) return;
  if (EngineCallsFailed([&] { return engine->OnLaunch(access, words, stream, request.key); })) {
    static constinit std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed)) {
      ReportProblem(LogLevel::kWarn, graph ? "a prefetch or eviction before a graph launch "
                                             "failed; the graph relies on demand paging"
                                           : "a prefetch or eviction before a launch failed; "
                                             "the launch relies on demand paging");
    }
  }
}

}  // namespace spillway::interpose
