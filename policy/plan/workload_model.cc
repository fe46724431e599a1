// The workload model's checks and fingerprint (see workload_model.h).
#include "policy/plan/workload_model.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spillway::policy {
namespace {

// FNV-1a, 64-bit: stable across runs and machines (a policy file keeps it).
class Fnv {
 public:
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 1099511628211ull;
  }
  void Add(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    Add(b, 8);
  }
  void Add(const std::string& s) {
    Add(s.size());
    Add(s.data(), s.size());
  }
  uint64_t hash() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

}  // namespace

size_t Workload::num_launches() const {
  return static_cast<size_t>(std::count_if(step.begin(), step.end(), [](const StepEvent& e) {
    return e.kind == StepEvent::Kind::kLaunch;
  }));
}

double Workload::compute_seconds() const {
  double total = 0;
  for (const StepEvent& e : step) {
    if (e.kind == StepEvent::Kind::kLaunch) total += e.launch.compute_seconds;
  }
  return total;
}

uint64_t Workload::persistent_bytes() const {
  uint64_t total = 0;
  for (const WorkloadAllocation& a : allocations) {
    if (a.persistent) total += FootprintOf(a.bytes);
  }
  return total;
}

uint64_t Workload::peak_live_bytes() const {
  uint64_t live = persistent_bytes();
  uint64_t peak = live;
  for (const StepEvent& e : step) {
    if (e.kind == StepEvent::Kind::kLaunch) continue;
    const uint64_t bytes = FootprintOf(allocation(e.alloc_id).bytes);
    if (e.kind == StepEvent::Kind::kAlloc) {
      live += bytes;
      peak = std::max(peak, live);
    } else {
      live -= bytes;
    }
  }
  return peak;
}

Workload::LargestLaunch Workload::largest_launch() const {
  LargestLaunch largest;
  size_t position = 0;
  std::vector<std::pair<uint64_t, uint32_t>> chunks;
  for (const StepEvent& e : step) {
    if (e.kind != StepEvent::Kind::kLaunch) continue;
    chunks.clear();
    for (const ChunkRange& r : e.launch.accesses) {
      for (uint32_t k = r.first_chunk; k < r.first_chunk + r.num_chunks; ++k) {
        chunks.emplace_back(r.alloc_id, k);
      }
    }
    std::sort(chunks.begin(), chunks.end());
    chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
    uint64_t bytes = 0;
    for (const auto& [id, k] : chunks) bytes += ChunkFootprint(allocation(id).bytes, k);
    if (bytes > largest.bytes) largest = LargestLaunch{position, e.launch.kernel, bytes};
    ++position;
  }
  return largest;
}

absl::Status CheckWorkloadSizes(const Workload& w) {
  uint64_t chunks = 0;
  for (const WorkloadAllocation& a : w.allocations) {
    if (a.bytes > kMaxAllocationBytes) {
      return absl::InvalidArgumentError(absl::StrCat("allocation ", a.id, " has ", a.bytes,
                                                     " bytes, more than the 1 TiB one may have"));
    }
    chunks += ChunksOf(a.bytes);
  }
  if (chunks > kMaxWorkloadChunks) {
    return absl::InvalidArgumentError(
        absl::StrCat("its allocations span ", chunks, " 2 MiB chunks, more than the ",
                     kMaxWorkloadChunks, " (16 TiB) a workload may span"));
  }
  return absl::OkStatus();
}

absl::Status ValidateWorkload(const Workload& w) {
  for (size_t i = 0; i < w.allocations.size(); ++i) {
    if (w.allocations[i].id != i + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation #", i, " has id ", w.allocations[i].id, ", expected ", i + 1));
    }
    if (w.allocations[i].bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat("allocation ", i + 1, " has 0 bytes"));
    }
  }
  if (absl::Status s = CheckWorkloadSizes(w); !s.ok()) return s;
  std::vector<char> live(w.allocations.size() + 1, 0);
  for (const WorkloadAllocation& a : w.allocations) live[a.id] = a.persistent ? 1 : 0;
  for (size_t pos = 0; pos < w.step.size(); ++pos) {
    const StepEvent& e = w.step[pos];
    const std::string where = absl::StrCat("step event ", pos);
    if (e.kind == StepEvent::Kind::kLaunch) {
      for (const ChunkRange& r : e.launch.accesses) {
        if (r.alloc_id == 0 || r.alloc_id > w.allocations.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": access to unknown allocation ", r.alloc_id));
        }
        if (!live[r.alloc_id]) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": access to allocation ", r.alloc_id, " that is not live"));
        }
        if (r.num_chunks == 0 ||
            uint64_t{r.first_chunk} + r.num_chunks > ChunksOf(w.allocation(r.alloc_id).bytes)) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": chunks [", r.first_chunk, ", +",
                                                         r.num_chunks, ") outside allocation ",
                                                         r.alloc_id));
        }
      }
      if (!(e.launch.compute_seconds >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": negative compute time"));
      }
      continue;
    }
    if (e.alloc_id == 0 || e.alloc_id > w.allocations.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown allocation ", e.alloc_id));
    }
    if (w.allocation(e.alloc_id).persistent) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": persistent allocation ", e.alloc_id, " allocated or freed"));
    }
    const bool alloc = e.kind == StepEvent::Kind::kAlloc;
    if (live[e.alloc_id] == alloc) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, alloc ? ": allocation " : ": free of ", e.alloc_id,
                       alloc ? " allocated twice" : " that is not live"));
    }
    live[e.alloc_id] = alloc ? 1 : 0;
  }
  for (const WorkloadAllocation& a : w.allocations) {
    if (!a.persistent && live[a.id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("allocation ", a.id, " is still live at the end of the step"));
    }
  }
  return absl::OkStatus();
}

Workload NumberCanonically(Workload w) {
  std::vector<uint64_t> new_id(w.allocations.size() + 1, 0);
  uint64_t next = 1;
  for (const WorkloadAllocation& a : w.allocations) {
    if (a.persistent) new_id[a.id] = next++;
  }
  for (const StepEvent& e : w.step) {
    if (e.kind == StepEvent::Kind::kAlloc && e.alloc_id < new_id.size() &&
        new_id[e.alloc_id] == 0) {
      new_id[e.alloc_id] = next++;
    }
  }
  for (uint64_t id = 1; id < new_id.size(); ++id) {
    if (new_id[id] == 0) new_id[id] = next++;  // never allocated in the step (invalid anyway)
  }
  std::vector<WorkloadAllocation> allocations(w.allocations.size());
  for (WorkloadAllocation& a : w.allocations) {
    const uint64_t id = new_id[a.id];
    a.id = id;
    allocations[id - 1] = std::move(a);
  }
  w.allocations = std::move(allocations);
  auto renumber = [&new_id](uint64_t id) { return id < new_id.size() ? new_id[id] : id; };
  for (StepEvent& e : w.step) {
    if (e.kind != StepEvent::Kind::kLaunch) {
      e.alloc_id = renumber(e.alloc_id);
      continue;
    }
    for (ChunkRange& r : e.launch.accesses) r.alloc_id = renumber(r.alloc_id);
  }
  return w;
}

uint64_t WorkloadFingerprint(const Workload& w) {
  Fnv f;
  for (const WorkloadAllocation& a : w.allocations) {
    f.Add(a.bytes);
    f.Add(a.persistent ? 1 : 0);
  }
  for (const StepEvent& e : w.step) {
    f.Add(static_cast<uint64_t>(e.kind));
    if (e.kind == StepEvent::Kind::kLaunch) {
      f.Add(e.launch.kernel);
      for (const ChunkRange& r : e.launch.accesses) f.Add(r.alloc_id);
    } else {
      f.Add(e.alloc_id);
    }
  }
  return f.hash();
}

std::string CallSiteName(uint64_t call_site) {
  return call_site == 0 ? "" : absl::StrFormat("%016x", call_site);
}

}  // namespace spillway::policy
