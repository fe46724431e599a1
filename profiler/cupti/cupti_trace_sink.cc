// Writing the CUPTI recorder's records to a trace (cupti_trace_sink.h).
#include "profiler/cupti/cupti_trace_sink.h"

namespace spillway::cupti {

CuptiTraceSink::CuptiTraceSink(trace::TraceWriter* writer, Options options)
    : writer_(writer), options_(options) {}

void CuptiTraceSink::OnKernelTime(const trace::KernelTimeRecord& record,
                                  const KernelDetails* details) {
  if (options_.write_launches && details != nullptr) {
    trace::LaunchRecord launch;
    launch.time_ns = record.start_ns;
    launch.stream = record.stream;
    launch.function_name = NameId(details->name);
    for (int i = 0; i < 3; ++i) {
      launch.grid[i] = static_cast<uint32_t>(details->grid[i]);
      launch.block[i] = static_cast<uint32_t>(details->block[i]);
    }
    launch.shared_memory_bytes = details->shared_memory_bytes;
    launch.correlation_id = record.correlation_id;
    writer_->Write(launch);
  }
  writer_->Write(record);
}

void CuptiTraceSink::OnUvmCounter(const trace::UvmCounterRecord& record) { writer_->Write(record); }

void CuptiTraceSink::OnMemory(const MemoryEvent& event) {
  if (!options_.write_memory) return;
  if (event.allocation) {
    trace::AllocRecord alloc;
    alloc.time_ns = event.time_ns;
    alloc.kind = event.kind;
    alloc.address = event.address;
    alloc.bytes = event.bytes;
    alloc.stream = event.stream;
    alloc.allocation_id = ++next_allocation_id_;
    live_[event.address] = alloc.allocation_id;
    writer_->Write(alloc);
    return;
  }
  trace::FreeRecord free;
  free.time_ns = event.time_ns;
  free.address = event.address;
  free.stream = event.stream;
  if (auto it = live_.find(event.address); it != live_.end()) {
    free.allocation_id = it->second;
    live_.erase(it);
  }
  writer_->Write(free);
}

trace::StringId CuptiTraceSink::NameId(const char* name) {
  if (name == nullptr) return 0;
  auto [it, inserted] = names_.try_emplace(name, 0);
  if (inserted) it->second = writer_->InternString(name);
  return it->second;
}

}  // namespace spillway::cupti
