// Replayer (replayer.h): the stretches in order, each event translated to the run's tensors.
#include "workloads/replay/replayer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace spillway::replay {
namespace {

using spillway_replay::AccessUnits;
using spillway_replay::kMaxSlots;
using spillway_replay::kModeRead;
using spillway_replay::kModeWrite;
using spillway_replay::PackExtent;
using spillway_replay::PackKey;
using spillway_replay::ReplaySlot;

}  // namespace

Replayer::Replayer(const ReplayTrace& trace, const ReplayPlanOptions& options)
    : trace_(trace), options_(options) {
  const uint32_t recorded = static_cast<uint32_t>(trace.steps.size());
  const uint32_t total =
      static_cast<uint32_t>(std::max(options.steps, 0)) + (trace.first_is_prologue ? 1 : 0);
  for (uint32_t i = 0; i < total; ++i) stretches_.push_back(std::min(i, recorded - 1));
}

std::string Replayer::Refusal() const {
  if (options_.steps < 1) return "--steps must be at least 1";
  const uint32_t recorded = static_cast<uint32_t>(trace_.steps.size());
  if (stretches_.size() <= recorded) return "";
  const uint32_t last = recorded - 1;
  if (trace_.recorded_steps() < 2) {
    return absl::StrCat(trace_.path, ": cannot repeat the last step to run ", options_.steps,
                        " steps: the trace has ", trace_.recorded_steps(),
                        " training step and a step is repeated only after one like it");
  }
  const std::string difference = StepDifference(trace_, last - 1, last);
  if (difference.empty()) return "";
  return absl::StrCat(trace_.path, ": cannot repeat the last recorded step to run ", options_.steps,
                      " steps: its last two steps differ (", difference, ")");
}

uint64_t Replayer::Resolve(TensorRef ref, uint32_t run, uint32_t recorded) {
  if (ref.step == recorded) return Key(run, ref.index);
  if (ref.step + 1 == recorded) return Key(run - 1, ref.index);
  return Key(ref.step, ref.index);
}

std::string Replayer::Where(const ReplayEvent& event, uint32_t run, uint32_t recorded) const {
  const char* what = event.kind == ReplayEvent::Kind::kAlloc  ? "allocation"
                     : event.kind == ReplayEvent::Kind::kFree ? "free"
                                                              : "launch";
  std::string where = absl::StrCat(trace_.path, ": record ", event.record, " (", what);
  if (event.kind == ReplayEvent::Kind::kLaunch) {
    absl::StrAppend(&where, " of '", trace_.names[event.name], "'");
  }
  if (run != recorded) absl::StrAppend(&where, ", in the last step run again as stretch ", run + 1);
  absl::StrAppend(&where, ")");
  return where;
}

absl::Status Replayer::Run(ReplayDevice* device) {
  if (const std::string refusal = Refusal(); !refusal.empty()) {
    return absl::InvalidArgumentError(refusal);
  }
  for (uint32_t run = 0; run < stretches_.size(); ++run) {
    if (absl::Status s = RunStretch(device, run); !s.ok()) return s;
    if (absl::Status s = device->EndStretch(static_cast<int>(run)); !s.ok()) return s;
  }
  if (absl::Status s = FinalSweep(device); !s.ok()) return s;
  if (options_.flip_after_launch != 0 && counts_.flipped.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--flip-after-launch ",
                                                   options_.flip_after_launch, ": the run has ",
                                                   sequence_, " launches"));
  }
  std::vector<uint64_t> keys;
  for (const auto& [key, tensor] : live_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (const uint64_t key : keys) {
    const LiveTensor& tensor = live_[key];
    if (absl::Status s = device->Free(tensor.address, tensor.bytes); !s.ok()) return s;
  }
  live_.clear();
  live_bytes_ = 0;
  return absl::OkStatus();
}

absl::Status Replayer::RunStretch(ReplayDevice* device, uint32_t run) {
  const uint32_t recorded = stretches_[run];
  for (const ReplayEvent& event : trace_.steps[recorded].events) {
    switch (event.kind) {
      case ReplayEvent::Kind::kAlloc: {
        const uint64_t key = Key(run, event.tensor.index);
        if (live_.contains(key)) {
          return absl::InternalError(
              absl::StrCat(Where(event, run, recorded), ": its place is still taken"));
        }
        absl::StatusOr<uint64_t> address = device->Allocate(event.bytes);
        if (!address.ok()) {
          return absl::Status(
              address.status().code(),
              absl::StrCat(Where(event, run, recorded), ": ", address.status().message()));
        }
        LiveTensor& tensor = live_[key];
        tensor.address = *address;
        tensor.bytes = event.bytes;
        tensor.tag = counts_.allocations++;
        live_bytes_ += event.bytes;
        counts_.peak_live_bytes = std::max(counts_.peak_live_bytes, live_bytes_);
        break;
      }
      case ReplayEvent::Kind::kFree: {
        const auto found = live_.find(Resolve(event.tensor, run, recorded));
        if (found == live_.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(event, run, recorded), ": allocation ", event.allocation_id, " is not live"));
        }
        if (absl::Status s = device->Free(found->second.address, found->second.bytes); !s.ok()) {
          return s;
        }
        live_bytes_ -= found->second.bytes;
        live_.erase(found);
        break;
      }
      case ReplayEvent::Kind::kLaunch:
        if (absl::Status s = RunOp(device, event, run, recorded); !s.ok()) return s;
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status Replayer::RunOp(ReplayDevice* device, const ReplayEvent& event, uint32_t run,
                             uint32_t recorded) {
  std::vector<Piece> pieces;
  for (const ReplayAccess& access : event.accesses) {
    const uint64_t key = Resolve(access.tensor, run, recorded);
    const auto found = live_.find(key);
    if (found == live_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(Where(event, run, recorded),
                                                     ": touches allocation ", access.allocation_id,
                                                     ", which is not live"));
    }
    if ((access.mode & kModeRead) == 0) {
      pieces.push_back({key, access.offset, access.bytes, access.mode});
      continue;
    }
    found->second.written.Split(
        access.offset, access.offset + access.bytes,
        [&](uint64_t begin, uint64_t end, bool written) {
          if (!written) counts_.first_touch_bytes += end - begin;
          pieces.push_back({key, begin, end - begin, written ? access.mode : kModeWrite});
        });
  }
  for (const Piece& piece : pieces) {
    if (piece.mode & kModeWrite) {
      live_[piece.tensor_key].written.Add(piece.offset, piece.offset + piece.bytes);
    }
  }
  if (pieces.size() > static_cast<size_t>(kMaxSlots)) counts_.split_ops++;
  return LaunchPieces(device, pieces, event.time_ns, spillway_replay::kLaneOps, event.name + 1);
}

absl::Status Replayer::LaunchPieces(ReplayDevice* device, const std::vector<Piece>& pieces,
                                    uint64_t time_ns, int lane, uint32_t kernel) {
  uint64_t total_bytes = 0;
  for (const Piece& piece : pieces) total_bytes += piece.bytes;
  uint64_t time_left = time_ns;
  size_t first = 0;
  do {
    const size_t count = std::min(pieces.size() - first, static_cast<size_t>(kMaxSlots));
    ReplaySlot slots[kMaxSlots];
    uint64_t bytes = 0;
    for (size_t i = 0; i < count; ++i) {
      const Piece& piece = pieces[first + i];
      const LiveTensor& tensor = live_.at(piece.tensor_key);
      slots[i] = {tensor.address + piece.offset, PackExtent(piece.mode, piece.bytes),
                  PackKey(tensor.tag, piece.offset)};
      bytes += piece.bytes;
    }
    // The op's time shared by bytes; the last launch gets what is left.
    const bool last = first + count == pieces.size();
    const uint64_t time =
        last || total_bytes == 0
            ? time_left
            : static_cast<uint64_t>(static_cast<double>(time_ns) * static_cast<double>(bytes) /
                                    static_cast<double>(total_bytes));
    time_left -= std::min(time, time_left);
    const uint64_t sequence = ++sequence_;
    counts_.launches++;
    absl::Status s =
        device->Launch(absl::MakeConstSpan(slots, count), sequence, time, lane, kernel);
    if (!s.ok()) return s;
    if (sequence == options_.flip_after_launch) {
      if (absl::Status f = Flip(device, pieces, first, count); !f.ok()) return f;
    }
    first += count;
  } while (first < pieces.size());
  return absl::OkStatus();
}

absl::Status Replayer::Flip(ReplayDevice* device, const std::vector<Piece>& pieces, size_t first,
                            size_t count) {
  for (size_t i = first; i < first + count; ++i) {
    const Piece& piece = pieces[i];
    if ((piece.mode & kModeWrite) == 0) continue;
    // A byte the checks cover: the range's first byte (touch=all) or its first window's.
    const AccessUnits units = AccessUnits::Of(piece.offset, piece.bytes, options_.touch);
    uint64_t offset = piece.offset;
    if (!units.touch_all) {
      if (units.windows == 0) continue;
      offset = std::max(piece.offset, units.WindowStart(0));
    }
    const LiveTensor& tensor = live_.at(piece.tensor_key);
    counts_.flipped = absl::StrCat("inverted the byte at offset ", offset, " of tensor ",
                                   tensor.tag, " after launch ", sequence_);
    return device->FlipByte(tensor.address + offset);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("launch ", sequence_, " writes no byte the checks cover"));
}

absl::Status Replayer::FinalSweep(ReplayDevice* device) {
  std::vector<uint64_t> keys;
  for (const auto& [key, tensor] : live_) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  std::vector<Piece> pieces;
  for (const uint64_t key : keys) {
    for (const auto& [begin, end] : live_[key].written.ranges()) {
      pieces.push_back({key, begin, end - begin, kModeRead});
    }
  }
  if (pieces.empty()) return absl::OkStatus();
  return LaunchPieces(device, pieces, 0, spillway_replay::kLaneFinal, 0);
}

}  // namespace spillway::replay
