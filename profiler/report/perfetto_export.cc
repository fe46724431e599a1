// Chrome trace-event JSON from a TraceModel, and its gzip compression with zlib.
#include "profiler/report/perfetto_export.h"

#include <zlib.h>

#include <algorithm>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_writer.h"
#include "common/output_file.h"

namespace spillway::report {
namespace {

constexpr int kPid = 1;
constexpr uint64_t kHostTid = 1;  // launches, as the host issued them
constexpr uint64_t kFirstStreamTid = 100;

// Trace-event times are microseconds.
double Us(uint64_t ns, uint64_t start_ns) {
  return static_cast<double>(ns - std::min(ns, start_ns)) / 1e3;
}

// Streams in order of first appearance get tids 100, 101, ...
class StreamTracks {
 public:
  uint64_t Tid(uint64_t stream) {
    auto [it, inserted] = tids_.try_emplace(stream, kFirstStreamTid + order_.size());
    if (inserted) order_.push_back(stream);
    return it->second;
  }
  const std::vector<uint64_t>& streams() const { return order_; }

 private:
  absl::flat_hash_map<uint64_t, uint64_t> tids_;
  std::vector<uint64_t> order_;
};

// The traceEvents array, handed to a sink in pieces of about 4 MiB so a long trace is never
// held whole as text.
class EventStream {
 public:
  explicit EventStream(const std::function<void(std::string_view)>& sink) : sink_(sink) {
    writer_.BeginArray();
  }
  // The writer for the next event(s); flushes what was written so far once it is large.
  JsonWriter& Next() {
    if (writer_.str().size() >= kFlushBytes) Flush();
    return writer_;
  }
  // Hands everything written to the sink: the events, comma-separated, without brackets.
  void Flush() {
    const std::string_view events = std::string_view(writer_.str()).substr(1);  // after '['
    if (events.empty()) return;
    if (any_) sink_(",");
    sink_(events);
    any_ = true;
    writer_ = JsonWriter();
    writer_.BeginArray();
  }

 private:
  static constexpr size_t kFlushBytes = size_t{4} << 20;
  const std::function<void(std::string_view)>& sink_;
  JsonWriter writer_;
  bool any_ = false;
};

void Meta(JsonWriter& w, std::string_view what, uint64_t tid, std::string_view name) {
  w.BeginObject().Key("ph").String("M").Key("pid").Int(kPid).Key("tid").Uint(tid);
  w.Key("name").String(what).Key("args").BeginObject().Key("name").String(name).EndObject();
  w.EndObject();
}

void Slice(JsonWriter& w, std::string_view name, std::string_view cat, uint64_t tid, double ts,
           double dur) {
  w.BeginObject().Key("ph").String("X").Key("pid").Int(kPid).Key("tid").Uint(tid);
  w.Key("name").String(name).Key("cat").String(cat).Key("ts").Double(ts).Key("dur").Double(dur);
}

// Kernel slices: recorded device times, else estimated as running from the launch (or the end of
// the previous kernel on its stream) to the next launch on that stream.
void KernelEvents(EventStream& s, const TraceModel& model, StreamTracks& tracks, uint64_t start) {
  absl::flat_hash_map<uint64_t, uint64_t> busy_until;  // stream -> end of its last kernel
  std::vector<uint64_t> next_on_stream(model.launches.size(), kNoTime);
  absl::flat_hash_map<uint64_t, size_t> last_index;
  for (size_t i = 0; i < model.launches.size(); ++i) {
    auto [it, inserted] = last_index.try_emplace(model.launches[i].stream, i);
    if (!inserted) {
      next_on_stream[it->second] = model.launches[i].time_ns;
      it->second = i;
    }
  }
  for (size_t i = 0; i < model.launches.size(); ++i) {
    JsonWriter& w = s.Next();
    const Launch& l = model.launches[i];
    const std::string& name =
        l.function < model.functions.size() ? model.functions[l.function] : std::string("?");
    const bool timed = l.kernel_start_ns != kNoTime && l.kernel_end_ns != kNoTime &&
                       l.kernel_end_ns >= l.kernel_start_ns;
    uint64_t begin = l.kernel_start_ns, end = l.kernel_end_ns;
    if (!timed) {
      begin = std::max(l.time_ns, busy_until[l.stream]);
      end = next_on_stream[i] != kNoTime ? std::max(next_on_stream[i], begin + 1000) : begin + 1000;
    }
    busy_until[l.stream] = end;
    const uint64_t tid = tracks.Tid(l.stream);
    // The launch on the host track, the flow from it to the kernel on its stream's track.
    Slice(w, name, "launch", kHostTid, Us(l.time_ns, start), 1);
    w.EndObject();
    w.BeginObject().Key("ph").String("s").Key("pid").Int(kPid).Key("tid").Uint(kHostTid);
    w.Key("name").String("launch").Key("cat").String("launch").Key("id").Uint(i + 1);
    w.Key("ts").Double(Us(l.time_ns, start)).EndObject();
    Slice(w, name, "kernel", tid, Us(begin, start), static_cast<double>(end - begin) / 1e3);
    w.Key("args")
        .BeginObject()
        .Key("launch")
        .Uint(i)
        .Key("allocations_touched")
        .Uint(l.accesses.size())
        .Key("estimated_time")
        .Bool(!timed)
        .EndObject();
    w.EndObject();
    w.BeginObject().Key("ph").String("f").Key("bp").String("e").Key("pid").Int(kPid);
    w.Key("tid").Uint(tid).Key("name").String("launch").Key("cat").String("launch");
    w.Key("id").Uint(i + 1).Key("ts").Double(Us(begin, start)).EndObject();
  }
}

void CopyEvents(EventStream& s, const TraceModel& model, StreamTracks& tracks, uint64_t start) {
  for (const Copy& c : model.copies) {
    JsonWriter& w = s.Next();
    const bool memcpy = c.kind == Copy::Kind::kMemcpy;
    const uint64_t end = c.end_ns != kNoTime && c.end_ns >= c.time_ns ? c.end_ns : c.time_ns + 1000;
    Slice(w, memcpy ? absl::StrCat("memcpy ", c.direction) : "memset", memcpy ? "memcpy" : "memset",
          tracks.Tid(c.stream), Us(c.time_ns, start), static_cast<double>(end - c.time_ns) / 1e3);
    w.Key("args").BeginObject().Key("bytes").Uint(c.bytes).EndObject().EndObject();
  }
}

// Live bytes (and managed resident, where sampled) as counter events at each change.
void MemoryCounter(EventStream& s, const TraceModel& model, uint64_t start) {
  std::vector<std::pair<uint64_t, int64_t>> deltas;
  for (const Allocation& a : model.allocations) {
    if (a.kind == AllocKind::kHost) continue;
    deltas.emplace_back(a.alloc_ns, static_cast<int64_t>(a.bytes));
    if (a.free_ns != kNoTime) deltas.emplace_back(a.free_ns, -static_cast<int64_t>(a.bytes));
  }
  std::stable_sort(deltas.begin(), deltas.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  int64_t live = 0;
  for (size_t i = 0; i < deltas.size(); ++i) {
    live += deltas[i].second;
    if (i + 1 < deltas.size() && deltas[i + 1].first == deltas[i].first) continue;
    JsonWriter& w = s.Next();
    w.BeginObject().Key("ph").String("C").Key("pid").Int(kPid).Key("name").String("device memory");
    w.Key("ts").Double(Us(deltas[i].first, start)).Key("args").BeginObject();
    w.Key("live MiB").Double(static_cast<double>(std::max<int64_t>(live, 0)) / (1 << 20));
    w.EndObject().EndObject();
  }
  for (const ResidentSample& r : model.resident) {
    JsonWriter& w = s.Next();
    w.BeginObject().Key("ph").String("C").Key("pid").Int(kPid).Key("name").String(
        "managed resident");
    w.Key("ts").Double(Us(r.time_ns, start)).Key("args").BeginObject();
    w.Key("resident MiB").Double(static_cast<double>(r.bytes) / (1 << 20));
    w.EndObject().EndObject();
  }
}

void AllocationLifetimes(EventStream& s, const TraceModel& model, uint64_t start, uint64_t end) {
  for (const Allocation& a : model.allocations) {
    JsonWriter& w = s.Next();
    const std::string name =
        absl::StrFormat("%s %s", AllocKindName(a.kind), absl::StrCat(a.bytes >> 20, " MiB"));
    const std::string id = absl::StrFormat("0x%x", a.id);
    w.BeginObject().Key("ph").String("b").Key("pid").Int(kPid).Key("cat").String("allocation");
    w.Key("name").String(name).Key("id").String(id).Key("ts").Double(Us(a.alloc_ns, start));
    w.Key("args").BeginObject().Key("bytes").Uint(a.bytes).Key("site").Uint(a.site);
    w.Key("address").String(absl::StrFormat("0x%x", a.address)).EndObject().EndObject();
    w.BeginObject().Key("ph").String("e").Key("pid").Int(kPid).Key("cat").String("allocation");
    w.Key("name").String(name).Key("id").String(id);
    w.Key("ts").Double(Us(a.free_ns == kNoTime ? end : a.free_ns, start)).EndObject();
  }
}

}  // namespace

void WriteChromeTrace(const TraceModel& model, const std::function<void(std::string_view)>& sink) {
  const uint64_t start = model.header.start_ns;
  const uint64_t end = std::max(model.EndTime(), start);
  JsonWriter head;
  head.BeginObject().Key("displayTimeUnit").String("ms");
  head.Key("metadata").BeginObject().Key("job").String(model.header.job);
  head.Key("device").String(model.header.device).Key("cuda").String(model.header.cuda_version);
  head.Key("driver").String(model.header.driver_version);
  head.Key("spillway").String(model.header.spillway_version);
  head.Key("dropped_records").Uint(model.header.dropped_records).EndObject();
  head.Key("traceEvents");
  sink(head.str());
  sink("[");
  EventStream s(sink);
  StreamTracks tracks;
  MemoryCounter(s, model, start);
  KernelEvents(s, model, tracks, start);
  CopyEvents(s, model, tracks, start);
  AllocationLifetimes(s, model, start, end);
  Meta(s.Next(), "process_name", 0, model.header.job.empty() ? "spillway trace" : model.header.job);
  Meta(s.Next(), "thread_name", kHostTid, "host: launches");
  for (const uint64_t stream : tracks.streams()) {
    Meta(s.Next(), "thread_name", tracks.Tid(stream),
         stream == 0 ? std::string("stream 0 (default)") : absl::StrFormat("stream 0x%x", stream));
  }
  s.Flush();
  sink("]}");
}

std::string ChromeTraceJson(const TraceModel& model) {
  std::string json;
  WriteChromeTrace(model, [&json](std::string_view piece) { json.append(piece); });
  return json;
}

GzipStream::GzipStream() : stream_(new z_stream{}) {
  // 15 window bits + 16: a gzip header and trailer instead of zlib's. Fastest level: the JSON
  // of a long trace is hundreds of MB and compresses well anyway.
  initialized_ =
      deflateInit2(stream_, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  ok_ = initialized_;
}

GzipStream::~GzipStream() {
  if (initialized_) deflateEnd(stream_);
  delete stream_;
}

void GzipStream::Deflate(std::string_view data, int flush) {
  constexpr size_t kChunk = size_t{1} << 20;  // zlib counts in 32 bits: feed it in pieces
  size_t consumed = 0;
  do {
    const size_t in = std::min(kChunk, data.size() - consumed);
    stream_->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + consumed));
    stream_->avail_in = static_cast<uInt>(in);
    consumed += in;
    const int mode = consumed == data.size() ? flush : Z_NO_FLUSH;
    int rc = Z_OK;
    do {  // deflate takes all the input it was given once it has room for its output
      const size_t before = out_.size();
      out_.resize(before + kChunk);
      stream_->next_out = reinterpret_cast<Bytef*>(out_.data() + before);
      stream_->avail_out = static_cast<uInt>(kChunk);
      rc = deflate(stream_, mode);
      out_.resize(before + kChunk - stream_->avail_out);
    } while (stream_->avail_out == 0 && rc != Z_STREAM_ERROR);
    if (rc == Z_STREAM_ERROR || (mode == Z_FINISH && rc != Z_STREAM_END)) ok_ = false;
  } while (consumed < data.size() && ok_);
}

void GzipStream::Append(std::string_view data) {
  if (ok_ && !finished_ && !data.empty()) Deflate(data, Z_NO_FLUSH);
}

absl::StatusOr<std::string> GzipStream::Finish() {
  if (ok_ && !finished_) Deflate("", Z_FINISH);
  finished_ = true;
  if (!ok_) return absl::InternalError("gzip: zlib failed to compress");
  return std::move(out_);
}

absl::StatusOr<std::string> Gzip(std::string_view data) {
  GzipStream gzip;
  gzip.Append(data);
  return gzip.Finish();
}

absl::Status WritePerfettoTrace(const TraceModel& model, const std::string& path) {
  GzipStream gzip;
  WriteChromeTrace(model, [&gzip](std::string_view piece) { gzip.Append(piece); });
  absl::StatusOr<std::string> compressed = gzip.Finish();
  if (!compressed.ok()) return compressed.status();
  return WriteFileAtomically(path, *compressed);
}

}  // namespace spillway::report
