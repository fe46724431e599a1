// LaunchTimer: kernel and transfer intervals from timing events, read without blocking.
#include "policy/engine/launch_timer.h"

#include <algorithm>

namespace spillway::policy {

bool LaunchTimer::ReadyLocked() {
  if (!tried_) {
    tried_ = true;
    for (Entry& entry : entries_) {
      if (device_->CreateTimingEvent(&entry.start) != kDeviceOk ||
          device_->CreateTimingEvent(&entry.end) != kDeviceOk) {
        usable_ = false;
        break;
      }
    }
    for (Mark& mark : marks_) {
      if (!usable_ || device_->CreateTimingEvent(&mark.event) != kDeviceOk) usable_ = false;
    }
  }
  return usable_;
}

int LaunchTimer::OpenLocked(Kind kind, uint64_t key) {
  int chosen = -1, oldest = -1;
  for (size_t i = 0; i < kEntries; ++i) {
    const Entry& entry = entries_[i];
    if (entry.state == State::kFree) {
      chosen = static_cast<int>(i);
      break;
    }
    if (oldest < 0 || entry.sequence < entries_[static_cast<size_t>(oldest)].sequence) {
      oldest = static_cast<int>(i);
    }
  }
  if (chosen < 0) {
    // All in flight: the job's launches run ahead of the device. Their samples are kept (this
    // one is not timed), unless that has gone on so long that one may never complete.
    if (++refused_ < kMaxRefused) return -1;
    chosen = oldest;
  }
  refused_ = 0;
  if (chosen == open_kernel_) open_kernel_ = -1;
  Entry& entry = entries_[static_cast<size_t>(chosen)];
  entry.state = State::kOpen;
  entry.kind = kind;
  entry.key = key;
  entry.sequence = ++sequence_;
  return chosen;
}

void LaunchTimer::Poll(std::vector<Sample>* out) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !tried_ || !usable_) return;
  PollMarksLocked(out);
  for (int harvested = 0; harvested < kMaxHarvest;) {
    Entry* oldest = nullptr;
    for (Entry& entry : entries_) {
      if (entry.state == State::kClosed &&
          (oldest == nullptr || entry.sequence < oldest->sequence)) {
        oldest = &entry;
      }
    }
    if (oldest == nullptr) return;
    const DeviceResult end = device_->QueryEvent(oldest->end);
    if (end == kDeviceNotReady) return;  // the rest was recorded later: not done either
    const DeviceResult start = end == kDeviceOk ? device_->QueryEvent(oldest->start) : end;
    if (start == kDeviceNotReady) return;
    float ms = 0;
    if (start == kDeviceOk &&
        device_->ElapsedMilliseconds(oldest->start, oldest->end, &ms) == kDeviceOk) {
      const double seconds = static_cast<double>(ms) * 1e-3;
      if (oldest->kind == Kind::kKernel) {
        out->push_back(Sample{Kind::kKernel, oldest->key, std::max(seconds, 0.0)});
        ++harvested;
      } else if (seconds > 0) {
        out->push_back(Sample{oldest->kind, oldest->key, seconds});
        ++harvested;
      }
    }
    oldest->state = State::kFree;  // read, or unreadable: either way done with
  }
}

void LaunchTimer::PollMarksLocked(std::vector<Sample>* out) {
  for (;;) {
    // The two oldest marks: a step's start and, once recorded, its end.
    Mark *first = nullptr, *second = nullptr;
    for (Mark& mark : marks_) {
      if (mark.tag == 0) continue;
      if (first == nullptr || mark.tag < first->tag) {
        second = first;
        first = &mark;
      } else if (second == nullptr || mark.tag < second->tag) {
        second = &mark;
      }
    }
    if (second == nullptr) return;
    const DeviceResult end = device_->QueryEvent(second->event);
    if (end == kDeviceNotReady) return;
    const DeviceResult start = end == kDeviceOk ? device_->QueryEvent(first->event) : end;
    if (start == kDeviceNotReady) return;
    float ms = 0;
    if (start == kDeviceOk && second->tag == first->tag + 1 &&
        device_->ElapsedMilliseconds(first->event, second->event, &ms) == kDeviceOk && ms > 0) {
      out->push_back(Sample{Kind::kStep, first->tag, static_cast<double>(ms) * 1e-3});
    }
    first->tag = 0;  // the second is the next step's start
  }
}

void LaunchTimer::StepMark(uint64_t tag, Stream stream) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || tag == 0 || !ReadyLocked()) return;
  Mark* slot = nullptr;
  for (Mark& mark : marks_) {
    if (mark.tag == 0) {
      slot = &mark;
      break;
    }
    if (slot == nullptr || mark.tag < slot->tag) slot = &mark;  // all in flight: the oldest goes
  }
  slot->tag = device_->RecordEvent(slot->event, stream) == kDeviceOk ? tag : 0;
}

void LaunchTimer::LaunchArrived(uint64_t stamp, Stream stream) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || open_kernel_ < 0) return;
  Entry& entry = entries_[static_cast<size_t>(open_kernel_)];
  open_kernel_ = -1;
  if (entry.key + 1 != stamp || device_->RecordEvent(entry.end, stream) != kDeviceOk) {
    entry.state = State::kFree;  // another launch came between (another thread): no sample
    return;
  }
  entry.state = State::kClosed;
}

void LaunchTimer::KernelReady(uint64_t stamp, Stream stream) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !ReadyLocked()) return;
  if (open_kernel_ >= 0) entries_[static_cast<size_t>(open_kernel_)].state = State::kFree;
  const int index = OpenLocked(Kind::kKernel, stamp);
  if (index < 0) {
    open_kernel_ = -1;
    return;
  }
  Entry& entry = entries_[static_cast<size_t>(index)];
  if (device_->RecordEvent(entry.start, stream) != kDeviceOk) {
    entry.state = State::kFree;
    open_kernel_ = -1;
    return;
  }
  open_kernel_ = index;
}

int LaunchTimer::BeginTransfer(Stream stream) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !ReadyLocked()) return -1;
  const int index = OpenLocked(Kind::kToDevice, 0);
  if (index < 0) return -1;
  Entry& entry = entries_[static_cast<size_t>(index)];
  if (device_->RecordEvent(entry.start, stream) != kDeviceOk) {
    entry.state = State::kFree;
    return -1;
  }
  return index;
}

void LaunchTimer::EndTransfer(int handle, uint64_t bytes, bool to_device, Stream stream) {
  if (handle < 0 || static_cast<size_t>(handle) >= kEntries) return;
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the entry stays open until it is the oldest and reused
  Entry& entry = entries_[static_cast<size_t>(handle)];
  if (entry.state != State::kOpen || entry.kind == Kind::kKernel) return;  // reused meanwhile
  if (device_->RecordEvent(entry.end, stream) != kDeviceOk) {
    entry.state = State::kFree;
    return;
  }
  entry.key = bytes;
  entry.kind = to_device ? Kind::kToDevice : Kind::kToHost;
  entry.state = State::kClosed;
}

}  // namespace spillway::policy
