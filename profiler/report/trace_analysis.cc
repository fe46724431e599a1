// The computations behind the report: a sweep over allocation events for memory over time and
// the peak, period detection over the launch sequence, working sets, idle gaps and UVM totals.
#include "profiler/report/trace_analysis.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cost_model.h"
#include "common/step_slack.h"
#include "profiler/report/report_svg.h"

namespace spillway::report {
namespace {

// Host allocations (pinned host memory) are not device memory; every other kind is.
bool CountsAsDeviceMemory(const Allocation& a) { return a.kind != AllocKind::kHost; }

// One allocation or free, in the order the sweep applies them.
struct MemoryEvent {
  uint64_t time_ns;
  bool is_free;
  uint64_t alloc;  // index into TraceModel::allocations
};

// Frees before allocations at the same time, so a peak is never overstated.
std::vector<MemoryEvent> MemoryEvents(const TraceModel& model) {
  std::vector<MemoryEvent> events;
  events.reserve(model.allocations.size() * 2);
  for (uint64_t i = 0; i < model.allocations.size(); ++i) {
    const Allocation& a = model.allocations[i];
    if (!CountsAsDeviceMemory(a)) continue;
    events.push_back({a.alloc_ns, false, i});
    if (a.free_ns != kNoTime) events.push_back({a.free_ns, true, i});
  }
  std::stable_sort(events.begin(), events.end(), [](const MemoryEvent& x, const MemoryEvent& y) {
    if (x.time_ns != y.time_ns) return x.time_ns < y.time_ns;
    return x.is_free && !y.is_free;
  });
  return events;
}

uint32_t SiteOf(const TraceModel& model, uint64_t alloc) {
  const uint32_t site = model.allocations[alloc].site;
  return site < model.sites.size() ? site : static_cast<uint32_t>(model.sites.size());
}

// Sites ordered by the most bytes each held live at once, largest first.
std::vector<uint32_t> SitesByMaxLive(const TraceModel& model,
                                     const std::vector<MemoryEvent>& events) {
  const size_t n = model.sites.size() + 1;  // + allocations with an unknown site
  std::vector<uint64_t> live(n, 0), max_live(n, 0);
  for (const MemoryEvent& e : events) {
    const uint32_t s = SiteOf(model, e.alloc);
    const uint64_t bytes = model.allocations[e.alloc].bytes;
    if (e.is_free) {
      live[s] -= std::min(live[s], bytes);
    } else {
      live[s] += bytes;
      max_live[s] = std::max(max_live[s], live[s]);
    }
  }
  std::vector<uint32_t> order;
  for (uint32_t s = 0; s < n; ++s) {
    if (max_live[s] > 0) order.push_back(s);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return max_live[a] > max_live[b]; });
  return order;
}

MemoryTimeline BuildTimeline(const TraceModel& model, const std::vector<MemoryEvent>& events,
                             uint64_t start_ns, uint64_t end_ns, const AnalysisOptions& options) {
  MemoryTimeline timeline;
  const std::vector<uint32_t> ranked = SitesByMaxLive(model, events);
  const size_t shown = std::min(ranked.size(), options.timeline_sites);
  timeline.series_sites.assign(ranked.begin(), ranked.begin() + shown);
  timeline.has_other = ranked.size() > shown || (shown == 0 && !events.empty());
  const size_t num_series = shown + (timeline.has_other ? 1 : 0);
  std::vector<size_t> series_of_site(model.sites.size() + 1, num_series == 0 ? 0 : num_series - 1);
  for (size_t i = 0; i < shown; ++i) series_of_site[ranked[i]] = i;

  const size_t points = std::max<size_t>(options.timeline_points, 2);
  const double span = static_cast<double>(std::max<uint64_t>(end_ns - start_ns, 1));
  std::vector<uint64_t> live(num_series, 0);
  uint64_t total = 0;
  size_t next = 0;
  for (size_t p = 0; p < points; ++p) {
    const uint64_t bucket_end =
        start_ns + static_cast<uint64_t>(span * static_cast<double>(p + 1) / points);
    // The state at the bucket's start, then the highest state reached inside it.
    const uint64_t bucket_start =
        start_ns + static_cast<uint64_t>(span * static_cast<double>(p) / points);
    uint64_t best_total = total, best_time = bucket_start;
    std::vector<uint64_t> best = live;
    while (next < events.size() && (events[next].time_ns < bucket_end || p + 1 == points)) {
      const MemoryEvent& e = events[next++];
      const uint64_t bytes = model.allocations[e.alloc].bytes;
      uint64_t& series = live[series_of_site[SiteOf(model, e.alloc)]];
      if (e.is_free) {
        series -= std::min(series, bytes);
        total -= std::min(total, bytes);
      } else {
        series += bytes;
        total += bytes;
      }
      if (total > best_total) {
        best_total = total;
        best_time = e.time_ns;
        best = live;
      }
    }
    best_time = std::clamp(best_time, bucket_start, std::max(bucket_start, bucket_end));
    timeline.time_ns.push_back(best_time);
    timeline.total.push_back(best_total);
    timeline.by_series.push_back(best);
  }
  if (!model.resident.empty()) {
    size_t r = 0;
    for (const uint64_t t : timeline.time_ns) {
      while (r + 1 < model.resident.size() && model.resident[r + 1].time_ns <= t) ++r;
      timeline.managed_resident.push_back(model.resident[r].time_ns <= t ? model.resident[r].bytes
                                                                         : 0);
    }
  }
  return timeline;
}

// Fraction of positions i in [from, n - period) where the sequence repeats one period later.
double MatchFraction(const std::vector<uint32_t>& seq, size_t period, size_t from) {
  const size_t n = seq.size();
  if (period == 0 || from + period >= n) return 0;
  size_t matches = 0;
  for (size_t i = from; i + period < n; ++i) matches += seq[i] == seq[i + period] ? 1 : 0;
  return static_cast<double>(matches) / static_cast<double>(n - period - from);
}

// The fraction of launches from `from` on that repeat within `slack` places of one period later,
// each later launch paired once (the nearest first).
double NearMatchFraction(const std::vector<uint32_t>& seq, size_t period, size_t from,
                         size_t slack) {
  const size_t n = seq.size();
  if (period == 0 || from + period >= n) return 0;
  std::vector<char> paired(n - from, 0);
  size_t matches = 0;
  for (size_t i = from; i + period < n; ++i) {
    const size_t center = i + period;
    for (size_t d = 0; d <= slack; ++d) {
      const size_t below = center - d, above = center + d;
      if (below > i && !paired[below - from] && seq[below] == seq[i]) {
        paired[below - from] = 1;
        ++matches;
        break;
      }
      if (d != 0 && above < n && !paired[above - from] && seq[above] == seq[i]) {
        paired[above - from] = 1;
        ++matches;
        break;
      }
    }
  }
  return static_cast<double>(matches) / static_cast<double>(n - period - from);
}

// Candidate periods: the gaps between consecutive launches of one function. A function launched
// once per step gives the period itself.
std::vector<size_t> CandidatePeriods(const std::vector<uint32_t>& seq, size_t max_period) {
  absl::flat_hash_map<uint32_t, size_t> last;
  std::vector<size_t> gaps;
  for (size_t i = 0; i < seq.size(); ++i) {
    auto [it, inserted] = last.try_emplace(seq[i], i);
    if (!inserted) {
      const size_t gap = i - it->second;
      if (gap <= max_period) gaps.push_back(gap);
      it->second = i;
    }
  }
  std::sort(gaps.begin(), gaps.end());
  gaps.erase(std::unique(gaps.begin(), gaps.end()), gaps.end());
  constexpr size_t kMaxCandidates = 2000;  // bounds the work on sequences with no clear period
  if (gaps.size() > kMaxCandidates) gaps.resize(kMaxCandidates);
  return gaps;
}

uint64_t Median(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

std::string Plural(uint64_t n, const char* what) {
  const absl::string_view word(what);
  if (n == 1) return absl::StrCat(n, " ", word);
  return absl::StrCat(n, " ", word, absl::EndsWith(word, "h") ? "es" : "s");
}

std::string ThreadStepLabel(const ThreadStep& t) {
  std::string label = absl::StrCat("thread ", t.thread, ": ", Plural(t.launches, "launch"), ", ");
  if (!t.step.found) return label + "no step of its own";
  absl::StrAppend(&label, "a step of ", Plural(t.step.launches_per_step, "launch"), " every ",
                  FormatDuration(t.step.median_step_ns), ", ", Plural(t.step.steps, "step"),
                  " found");
  return label;
}

std::string SiteLabel(const TraceModel& model, uint32_t site) {
  if (site >= model.sites.size() || model.sites[site].frames.empty()) return "(unknown site)";
  const Frame& f = model.sites[site].frames.front();
  if (!f.symbol.empty()) return f.symbol;
  std::string module = "?";
  if (f.module < model.modules.size()) {
    const std::string& path = model.modules[f.module].path;
    module =
        path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    if (module.empty()) module = model.modules[f.module].build_id.substr(0, 12);
  }
  return absl::StrFormat("%s+0x%x", module, f.offset);
}

Peak FindPeak(const TraceModel& model) {
  const std::vector<MemoryEvent> events = MemoryEvents(model);
  Peak peak;
  uint64_t total = 0;
  size_t peak_index = 0;
  bool any = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const uint64_t bytes = model.allocations[events[i].alloc].bytes;
    if (events[i].is_free) {
      total -= std::min(total, bytes);
    } else {
      total += bytes;
      if (!any || total > peak.bytes) {
        peak.bytes = total;
        peak.time_ns = events[i].time_ns;
        peak_index = i;
        any = true;
      }
    }
  }
  if (!any) return peak;
  // Live at the peak: allocated at or before it, not freed at or before it.
  std::vector<bool> live(model.allocations.size(), false);
  for (size_t i = 0; i <= peak_index; ++i) live[events[i].alloc] = !events[i].is_free;
  for (uint64_t a = 0; a < live.size(); ++a) {
    if (live[a]) peak.live.push_back(a);
  }
  std::stable_sort(peak.live.begin(), peak.live.end(), [&](uint64_t x, uint64_t y) {
    return model.allocations[x].bytes > model.allocations[y].bytes;
  });
  return peak;
}

namespace {

// One token per launch: the function and the sizes and offsets of what it touches, so a loop
// of one kernel over different tensors is not mistaken for a one-launch step, while the fresh
// allocations of each step (new ids, same sizes) still give the same tokens.
std::vector<uint32_t> LaunchTokens(const TraceModel& model, const std::vector<Launch>& launches) {
  absl::flat_hash_map<uint64_t, uint64_t> bytes_of;  // allocation id -> bytes
  bytes_of.reserve(model.allocations.size());
  for (const Allocation& a : model.allocations) bytes_of[a.id] = a.bytes;
  absl::flat_hash_map<uint64_t, uint32_t> token_of;  // hash of a launch -> token
  std::vector<uint32_t> tokens;
  tokens.reserve(launches.size());
  for (const Launch& launch : launches) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ launch.function;
    for (const Access& access : launch.accesses) {
      const auto it = bytes_of.find(access.alloc_id);
      for (const uint64_t v : {it == bytes_of.end() ? 0 : it->second, access.offset}) {
        h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      }
    }
    tokens.push_back(token_of.try_emplace(h, static_cast<uint32_t>(token_of.size())).first->second);
  }
  return tokens;
}

// The step of `launches` (the model's, or one thread's), the model giving allocation sizes.
Step FindStepIn(const TraceModel& model, const std::vector<Launch>& launches) {
  constexpr double kMinMatch = 0.9;
  constexpr size_t kTail = 50000;  // launches of the tail the period is checked over
  Step step;
  const size_t n = launches.size();
  if (n < 4) return step;
  const std::vector<uint32_t> seq = LaunchTokens(model, launches);

  const size_t from = n > kTail ? n - kTail : 0;
  const std::vector<size_t> candidates = CandidatePeriods(seq, (n - from) / 2);
  // Checked over the last 16 periods, so one stray launch among them costs only a few percent.
  const auto check_from = [&](size_t candidate) {
    return std::max(from, n > 16 * candidate ? n - 16 * candidate : from);
  };
  size_t period = 0;
  std::vector<double> exact(candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    exact[c] = MatchFraction(seq, candidates[c], check_from(candidates[c]));
    if (exact[c] >= kMinMatch) {
      period = candidates[c];
      break;
    }
  }
  // Else a step whose launches repeat one step later within a few places, at least half of them
  // at the same place (so a period off by a launch's move is not taken).
  size_t slack = 0;
  for (size_t c = 0; period == 0 && c < candidates.size(); ++c) {
    const size_t candidate = candidates[c];
    if (exact[c] < 0.5 || StepSlack(candidate) == 0) continue;
    const double near =
        NearMatchFraction(seq, candidate, check_from(candidate), StepSlack(candidate));
    if (near >= kMinMatch) {
      period = candidate;
      slack = StepSlack(candidate);
      step.moved_fraction = near - exact[c];
    }
  }
  if (period == 0) return step;
  // The periodic region: walk back from the end while launches repeat one period later (within
  // the slack where the order changes).
  const auto repeats_later = [&](size_t i) {
    const size_t center = i + period;
    for (size_t k = center - std::min(slack, center - i - 1); k <= center + slack && k < n; ++k) {
      if (seq[k] == seq[i]) return true;
    }
    return false;
  };
  size_t first = n - period;
  while (first > 0 && repeats_later(first - 1)) --first;
  // Phase: start steps where the launch sequence first becomes periodic.
  Step found = StepOver(launches, model.header.start_ns, first, period, (n - first) / period);
  if (!found.found) return step;
  found.moved_fraction = step.moved_fraction;
  return found;
}

}  // namespace

Step StepOver(const std::vector<Launch>& launches, uint64_t start_ns, uint64_t first_launch,
              uint64_t launches_per_step, uint64_t steps) {
  Step step;
  const uint64_t n = launches.size();
  if (launches_per_step == 0 || steps < 2 || first_launch + steps * launches_per_step > n) {
    return step;
  }
  std::vector<uint64_t> durations;
  for (uint64_t k = 0; k + 1 < steps; ++k) {
    const uint64_t t0 = launches[first_launch + k * launches_per_step].time_ns;
    const uint64_t t1 = launches[first_launch + (k + 1) * launches_per_step].time_ns;
    durations.push_back(t1 > t0 ? t1 - t0 : 0);
  }
  step.found = true;
  step.launches_per_step = launches_per_step;
  step.steps = steps;
  step.first_launch = first_launch;
  step.median_step_ns = Median(std::move(durations));
  const uint64_t first_time = launches[first_launch].time_ns;
  step.warmup_ns = first_time > start_ns ? first_time - start_ns : 0;
  step.in_steps_fraction = static_cast<double>(steps * launches_per_step) / static_cast<double>(n);
  return step;
}

Step FindStep(const TraceModel& model) { return FindStepIn(model, model.launches); }

std::vector<ThreadStep> FindThreadSteps(const TraceModel& model) {
  std::map<uint32_t, std::vector<Launch>> by_thread;
  for (const Launch& l : model.launches) by_thread[l.thread].push_back(l);
  std::vector<ThreadStep> steps;
  if (by_thread.size() < 2) return steps;
  for (const auto& [thread, launches] : by_thread) {
    steps.push_back(ThreadStep{thread, launches.size(), FindStepIn(model, launches)});
  }
  return steps;
}

std::vector<KernelWorkingSet> KernelWorkingSets(const TraceModel& model) {
  absl::flat_hash_map<uint64_t, uint64_t> bytes_of;  // allocation id -> bytes
  for (const Allocation& a : model.allocations) bytes_of[a.id] = a.bytes;
  std::vector<KernelWorkingSet> sets(model.functions.size());
  std::vector<uint64_t> sum_bytes(model.functions.size(), 0);
  for (uint32_t f = 0; f < sets.size(); ++f) sets[f].function = f;
  for (const Launch& l : model.launches) {
    if (l.function >= sets.size()) continue;
    KernelWorkingSet& k = sets[l.function];
    uint64_t bytes = 0;
    for (const Access& a : l.accesses) {
      if (a.bytes != 0) {
        bytes += a.bytes;
      } else if (auto it = bytes_of.find(a.alloc_id); it != bytes_of.end()) {
        bytes += it->second;
      }
    }
    ++k.launches;
    k.max_bytes = std::max(k.max_bytes, bytes);
    k.max_allocations = std::max<uint64_t>(k.max_allocations, l.accesses.size());
    sum_bytes[l.function] += bytes;
    if (l.kernel_start_ns != kNoTime && l.kernel_end_ns != kNoTime &&
        l.kernel_end_ns > l.kernel_start_ns) {
      k.kernel_ns += l.kernel_end_ns - l.kernel_start_ns;
    }
  }
  for (KernelWorkingSet& k : sets) {
    if (k.launches > 0) k.mean_bytes = sum_bytes[k.function] / k.launches;
  }
  std::erase_if(sets, [](const KernelWorkingSet& k) { return k.launches == 0; });
  std::stable_sort(sets.begin(), sets.end(),
                   [](const auto& a, const auto& b) { return a.max_bytes > b.max_bytes; });
  return sets;
}

std::vector<SwapCandidate> SwapCandidates(const TraceModel& model, uint64_t end_ns) {
  const CostModel cost;
  absl::flat_hash_map<uint64_t, size_t> index_of;
  for (size_t i = 0; i < model.allocations.size(); ++i) index_of[model.allocations[i].id] = i;
  // When each allocation was last touched; gaps are accounted as accesses arrive.
  std::vector<uint64_t> last_touch(model.allocations.size());
  for (size_t i = 0; i < model.allocations.size(); ++i) {
    last_touch[i] = model.allocations[i].alloc_ns;
  }
  std::vector<SwapCandidate> by_site(model.sites.size() + 1);
  for (uint32_t s = 0; s < by_site.size(); ++s) by_site[s].site = s;
  const auto account_gap = [&](size_t alloc, uint64_t until) {
    const Allocation& a = model.allocations[alloc];
    if (until <= last_touch[alloc]) return;
    const uint64_t gap = until - last_touch[alloc];
    SwapCandidate& c = by_site[SiteOf(model, alloc)];
    c.max_idle_ns = std::max(c.max_idle_ns, gap);
    // Only a gap longer than moving the data out and back in is worth swapping over.
    const double gap_s = static_cast<double>(gap) * 1e-9;
    if (gap_s > H2DSeconds(cost, a.bytes) + D2HSeconds(cost, a.bytes)) {
      c.byte_seconds_idle += static_cast<double>(a.bytes) * gap_s;
    }
  };
  for (const Launch& l : model.launches) {
    for (const Access& access : l.accesses) {
      auto it = index_of.find(access.alloc_id);
      if (it == index_of.end()) continue;
      account_gap(it->second, l.time_ns);
      last_touch[it->second] = std::max(last_touch[it->second], l.time_ns);
    }
  }
  for (size_t i = 0; i < model.allocations.size(); ++i) {
    const Allocation& a = model.allocations[i];
    if (!CountsAsDeviceMemory(a)) continue;
    account_gap(i, a.free_ns == kNoTime ? end_ns : a.free_ns);
    SwapCandidate& c = by_site[SiteOf(model, i)];
    ++c.allocations;
    c.bytes += a.bytes;
  }
  std::erase_if(by_site, [](const SwapCandidate& c) { return c.byte_seconds_idle <= 0; });
  std::stable_sort(by_site.begin(), by_site.end(), [](const auto& a, const auto& b) {
    return a.byte_seconds_idle > b.byte_seconds_idle;
  });
  return by_site;
}

std::vector<SiteFaults> FaultsBySite(const TraceModel& model) {
  absl::flat_hash_map<uint64_t, size_t> index_of;
  for (size_t i = 0; i < model.allocations.size(); ++i) index_of[model.allocations[i].id] = i;
  std::vector<SiteFaults> by_site(model.sites.size() + 1);
  std::vector<bool> seen(by_site.size(), false);
  for (uint32_t s = 0; s < by_site.size(); ++s) by_site[s].site = s;
  for (const UvmEvent& u : model.uvm) {
    auto it = index_of.find(u.alloc_id);
    const uint32_t site = it == index_of.end() ? static_cast<uint32_t>(model.sites.size())
                                               : SiteOf(model, it->second);
    SiteFaults& f = by_site[site];
    seen[site] = true;
    switch (u.kind) {
      case UvmEvent::Kind::kFault:
        f.faults += u.count;
        break;
      case UvmEvent::Kind::kMigrateToDevice:
        f.to_device_bytes += u.bytes;
        break;
      case UvmEvent::Kind::kMigrateToHost:
        f.to_host_bytes += u.bytes;
        break;
      case UvmEvent::Kind::kThrashing:
        f.thrashing += u.count;
        break;
    }
  }
  std::vector<SiteFaults> out;
  for (size_t s = 0; s < by_site.size(); ++s) {
    if (seen[s]) out.push_back(by_site[s]);
  }
  std::stable_sort(out.begin(), out.end(), [](const SiteFaults& a, const SiteFaults& b) {
    if (a.faults != b.faults) return a.faults > b.faults;
    return a.to_device_bytes + a.to_host_bytes > b.to_device_bytes + b.to_host_bytes;
  });
  return out;
}

Analysis Analyze(const TraceModel& model, const AnalysisOptions& options) {
  Analysis a;
  // The trace start, or the first event when one precedes it (a header written late).
  a.start_ns = model.header.start_ns;
  for (const Allocation& alloc : model.allocations)
    a.start_ns = std::min(a.start_ns, alloc.alloc_ns);
  for (const Launch& l : model.launches) a.start_ns = std::min(a.start_ns, l.time_ns);
  a.end_ns = std::max(model.EndTime(), a.start_ns);
  for (const Allocation& alloc : model.allocations) {
    if (CountsAsDeviceMemory(alloc)) a.total_allocated_bytes += alloc.bytes;
  }
  for (const Copy& c : model.copies) {
    (c.kind == Copy::Kind::kMemcpy ? a.memcpy_bytes : a.memset_bytes) += c.bytes;
  }
  a.timeline = BuildTimeline(model, MemoryEvents(model), a.start_ns, a.end_ns, options);
  a.peak = FindPeak(model);
  a.step = FindStep(model);
  if (!a.step.found) a.thread_steps = FindThreadSteps(model);
  a.kernels = KernelWorkingSets(model);
  a.swap_candidates = SwapCandidates(model, a.end_ns);
  a.faults = FaultsBySite(model);
  return a;
}

}  // namespace spillway::report
