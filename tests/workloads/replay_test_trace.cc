// The synthetic training job of replay_test_trace.h: its events are made once, then either
// written as a trace or counted for the peak.
#include "tests/workloads/replay_test_trace.h"

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "profiler/trace/trace_writer.h"

namespace spillway::replay::testing {
namespace {

struct Access {
  uint64_t id;
  uint64_t offset;
  uint64_t bytes;  // 0: the whole allocation
  uint8_t mode;    // 1 read, 2 write, 3 read-write
};

struct Event {
  enum Kind { kAlloc, kFree, kLaunch, kSync } kind;
  uint64_t id = 0;     // kAlloc, kFree
  uint64_t bytes = 0;  // kAlloc
  std::string name;    // kLaunch
  std::vector<Access> accesses;
};

constexpr uint8_t kRead = 1;
constexpr uint8_t kWrite = 2;
constexpr uint8_t kReadWrite = 3;

class Job {
 public:
  explicit Job(const TestTraceOptions& o) : o_(o) {}

  std::vector<Event> Events() {
    const int layers = o_.layers;
    const uint64_t tb = o_.tensor_bytes;
    const uint64_t touched = o_.touch_bytes == 0 ? tb : o_.touch_bytes;
    whole_ = o_.touch_bytes == 0 ? 0 : o_.touch_bytes;
    std::vector<uint64_t> weights, state, grads;
    for (int l = 0; l < layers; ++l) {
      weights.push_back(Alloc(tb));
      Launch("init_weight", {{weights.back(), 0, 0, kWrite}});
    }
    if (o_.prologue_sync) Sync();
    for (int s = 1; s <= o_.steps; ++s) {
      for (const uint64_t g : grads) Free(g);  // zero_grad(set_to_none=True)
      grads.assign(static_cast<size_t>(layers), 0);
      std::vector<uint64_t> acts = {Alloc(tb)};
      Launch("load_lo", {{acts[0], 0, touched / 2, kWrite}});
      Launch("load_hi", {{acts[0], touched / 2, touched - touched / 2, kWrite}});
      for (int l = 0; l < layers; ++l) {
        acts.push_back(Alloc(tb));
        Launch("forward",
               {{acts[l], 0, 0, kRead}, {weights[l], 0, 0, kRead}, {acts.back(), 0, 0, kWrite}});
      }
      const uint64_t loss = Alloc(4);
      Launch("loss", {{acts.back(), 4099, std::min<uint64_t>(100000, touched - 4099), kRead},
                      {loss, 0, 0, kWrite}});
      uint64_t delta = Alloc(tb);
      Launch("loss_backward",
             {{loss, 0, 0, kRead}, {acts.back(), 0, 0, kRead}, {delta, 0, 0, kWrite}});
      Free(acts.back());
      Free(loss);
      for (int l = layers - 1; l >= 0; --l) {
        grads[l] = Alloc(tb);
        Launch("grad_weight",
               {{delta, 0, 0, kRead}, {acts[l], 0, 0, kRead}, {grads[l], 0, 0, kWrite}});
        const uint64_t next = Alloc(tb);
        Launch("grad_input",
               {{delta, 0, 0, kRead}, {weights[l], 0, 0, kRead}, {next, 0, 0, kWrite}});
        Free(delta);
        Free(acts[l]);
        delta = next;
      }
      Free(delta);
      if (s == 1) {  // the optimizer's state, made at its first step
        for (int l = 0; l < layers; ++l) {
          state.push_back(Alloc(tb));
          Launch("zeros_like", {{state.back(), 0, 0, kWrite}});
        }
      }
      if (o_.foreach_optimizer) {
        std::vector<Access> all;
        for (int l = 0; l < layers; ++l) {
          all.push_back({weights[l], 0, 0, kReadWrite});
          all.push_back({state[l], 0, 0, kReadWrite});
          all.push_back({grads[l], 0, 0, kRead});
        }
        Launch("foreach_adam", all);
      } else {
        for (int l = 0; l < layers; ++l) {
          Launch("adam", {{weights[l], 0, 0, kReadWrite},
                          {state[l], 0, 0, kReadWrite},
                          {grads[l], 0, 0, kRead}});
        }
      }
      if (o_.last_step_differs && s == o_.steps) Launch("extra", {{weights[0], 0, 0, kRead}});
      Sync();
    }
    return std::move(events_);
  }

 private:
  uint64_t Alloc(uint64_t bytes) {
    bytes_[next_id_] = bytes;
    events_.push_back({Event::kAlloc, next_id_, bytes, "", {}});
    return next_id_++;
  }
  void Free(uint64_t id) { events_.push_back({Event::kFree, id, 0, "", {}}); }
  // Accesses with bytes 0 (whole tensors) touch `whole_` bytes where it is not 0.
  void Launch(const std::string& name, std::vector<Access> accesses) {
    for (Access& a : accesses) {
      if (a.bytes == 0 && whole_ != 0) a.bytes = std::min(whole_, bytes_[a.id]);
    }
    events_.push_back({Event::kLaunch, 0, 0, name, std::move(accesses)});
  }
  void Sync() { events_.push_back({Event::kSync, 0, 0, "", {}}); }

  const TestTraceOptions& o_;
  std::vector<Event> events_;
  uint64_t next_id_ = 1;
  uint64_t whole_ = 0;
  std::map<uint64_t, uint64_t> bytes_;  // allocation id -> size
};

}  // namespace

uint64_t TestTracePeakBytes(const TestTraceOptions& options) {
  std::vector<std::pair<uint64_t, uint64_t>> live;  // id, bytes
  uint64_t bytes = 0, peak = 0;
  for (const Event& e : Job(options).Events()) {
    if (e.kind == Event::kAlloc) {
      live.push_back({e.id, e.bytes});
      bytes += e.bytes;
      peak = std::max(peak, bytes);
    } else if (e.kind == Event::kFree) {
      const auto it = std::find_if(live.begin(), live.end(),
                                   [&](const auto& entry) { return entry.first == e.id; });
      bytes -= it->second;
      live.erase(it);
    }
  }
  return peak;
}

absl::Status WriteTestTrace(const std::string& path, const TestTraceOptions& options) {
  trace::HeaderRecord header;
  header.job = "replay test job";
  header.device_name = "test";
  trace::WriterOptions writer_options;
  writer_options.flush = trace::WriterOptions::Flush::kManual;
  absl::StatusOr<std::unique_ptr<trace::TraceWriter>> writer =
      trace::TraceWriter::Open(path, header, writer_options);
  if (!writer.ok()) return writer.status();
  trace::TraceWriter& w = **writer;
  uint64_t now = 1000, correlation = 0;
  for (const Event& e : Job(options).Events()) {
    now += 1000;
    switch (e.kind) {
      case Event::kAlloc:
        w.Write(
            trace::AllocRecord{now, 1, trace::AllocKind::kAsync, e.id << 32, e.bytes, 1, 0, e.id});
        break;
      case Event::kFree:
        w.Write(trace::FreeRecord{now, 1, e.id << 32, e.id, 1});
        break;
      case Event::kLaunch: {
        std::vector<trace::AccessRecord> accesses;
        std::vector<uint8_t> modes;
        for (const Access& a : e.accesses) {
          accesses.push_back({a.id, a.offset, a.bytes});
          modes.push_back(a.mode);
        }
        trace::LaunchRecord launch;
        launch.time_ns = now;
        launch.thread = 1;
        launch.stream = 1;
        launch.function = 0x1000;
        launch.function_name = w.InternString(e.name);
        launch.correlation_id = ++correlation;
        launch.accesses = accesses;
        if (options.modes) launch.access_modes = modes;
        w.Write(launch);
        w.Write(trace::KernelTimeRecord{correlation, now, now + options.op_ns, 0, 1,
                                        trace::Activity::kKernel,
                                        trace::KernelTimeRecord::kEvents});
        break;
      }
      case Event::kSync:
        w.Write(trace::SynchronizeRecord{now, now + 10, 1, trace::SyncWhat::kContext, 0});
        break;
    }
  }
  return w.Close();
}

}  // namespace spillway::replay::testing
