// What the report and `spillway inspect`-style summaries compute from a TraceModel: memory over
// time (live bytes stacked by allocating site, managed resident), the peak and what is live at
// it, the training step found in the launch sequence, per-kernel working sets, swap candidates
// (sites ranked by bytes x idle time) and UVM faults per site.
#ifndef SPILLWAY_PROFILER_REPORT_TRACE_ANALYSIS_H_
#define SPILLWAY_PROFILER_REPORT_TRACE_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/report/trace_model.h"

namespace spillway::report {

// Live bytes over time, resampled to a fixed number of points for plotting.
struct MemoryTimeline {
  std::vector<uint32_t> series_sites;  // the sites plotted separately, largest first
  bool has_other = false;              // a last series sums every other site
  // One point per sample; `by_series[i]` has series_sites.size() (+1 with has_other) entries.
  // Each sample is taken where the live total is highest inside its time bucket, so the peak
  // survives resampling.
  std::vector<uint64_t> time_ns;
  std::vector<uint64_t> total;
  std::vector<std::vector<uint64_t>> by_series;
  std::vector<uint64_t> managed_resident;  // same times; empty when the trace has no samples
};

struct Peak {
  uint64_t bytes = 0;
  uint64_t time_ns = 0;
  std::vector<uint64_t> live;  // indices into TraceModel::allocations, largest first
};

// The repeating training step: the shortest period of the launch sequence (by function and the
// sizes and offsets of the allocations each launch touches) that holds over its tail.
struct Step {
  bool found = false;
  uint64_t launches_per_step = 0;
  uint64_t steps = 0;            // full repetitions found
  uint64_t first_launch = 0;     // index of the first launch of the first full step
  uint64_t median_step_ns = 0;   // median time from one step's first launch to the next's
  uint64_t warmup_ns = 0;        // from the trace start to the first full step
  double in_steps_fraction = 0;  // share of all launches that lie inside the steps found
  // Of the launches checked, those that repeat a launch of the step before only at another place
  // within a few launches of it: the launch order changes from step to step (an executor that
  // launches ready ops at once, as TensorFlow's). 0 where the step repeats in the same order.
  double moved_fraction = 0;
};

// Where the launches as a whole repeat no step but come from several threads: each thread's own
// launches and their step (replicas on their own threads launching at once interleave their
// launches differently every step).
struct ThreadStep {
  uint32_t thread = 0;  // as the trace numbers threads
  uint64_t launches = 0;
  Step step;  // over this thread's launches alone (first_launch counts them)
};

struct KernelWorkingSet {
  uint32_t function = 0;
  uint64_t launches = 0;
  uint64_t max_bytes = 0;  // largest bytes one launch touched
  uint64_t mean_bytes = 0;
  uint64_t max_allocations = 0;
  uint64_t kernel_ns = 0;  // total device time, when recorded
};

// An allocating site ranked by how much memory it holds while nothing uses it.
struct SwapCandidate {
  uint32_t site = 0;
  uint64_t allocations = 0;
  uint64_t bytes = 0;            // total allocated at this site
  uint64_t max_idle_ns = 0;      // longest gap without an access, any allocation of the site
  double byte_seconds_idle = 0;  // sum over allocations and their idle gaps of bytes x gap
};

struct SiteFaults {
  uint32_t site = 0;
  uint64_t faults = 0;
  uint64_t to_device_bytes = 0;
  uint64_t to_host_bytes = 0;
  uint64_t thrashing = 0;
};

struct Analysis {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t total_allocated_bytes = 0;
  uint64_t memcpy_bytes = 0;
  uint64_t memset_bytes = 0;
  MemoryTimeline timeline;
  Peak peak;
  Step step;
  std::vector<ThreadStep> thread_steps;        // only when `step` was not found; by thread
  std::vector<KernelWorkingSet> kernels;       // largest max_bytes first
  std::vector<SwapCandidate> swap_candidates;  // largest byte_seconds_idle first
  std::vector<SiteFaults> faults;              // most faults first; empty without UVM records
};

struct AnalysisOptions {
  size_t timeline_points = 600;  // samples in the memory timeline
  size_t timeline_sites = 8;     // sites plotted separately; the rest are "other"
};

Analysis Analyze(const TraceModel& model, const AnalysisOptions& options = {});

// The pieces, for tests and other tools.
Peak FindPeak(const TraceModel& model);
Step FindStep(const TraceModel& model);
// The Step of `steps` repetitions of `launches_per_step` launches from `first_launch` of
// `launches` (not found unless at least two fit): the median step time from the launches' times,
// the warm-up from `start_ns`. FindStep's, and the planner's step in the report tools
// (planner_step.h).
Step StepOver(const std::vector<Launch>& launches, uint64_t start_ns, uint64_t first_launch,
              uint64_t launches_per_step, uint64_t steps);
// Each launching thread's step (FindStep over its launches alone); empty when one thread launched.
std::vector<ThreadStep> FindThreadSteps(const TraceModel& model);
std::vector<KernelWorkingSet> KernelWorkingSets(const TraceModel& model);
std::vector<SwapCandidate> SwapCandidates(const TraceModel& model, uint64_t end_ns);
std::vector<SiteFaults> FaultsBySite(const TraceModel& model);

// A short name for a call site: its innermost symbolized frame, else "module+0xoffset".
std::string SiteLabel(const TraceModel& model, uint32_t site);

// "1 launch", "3 launches", "2 steps": `n` and the word, plural unless n is 1.
std::string Plural(uint64_t n, const char* what);

// One thread's launches and step, as `spillway inspect` and the report list them: "thread 7: 40
// launches, a step of 2 launches every 1.00 ms, 20 steps found" (or "..., no step of its own").
std::string ThreadStepLabel(const ThreadStep& t);

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_TRACE_ANALYSIS_H_
