// The residency engine's side of planned schedules (policy files, policy/plan/planned_policy.h):
// when the policy's schedule decides a launch, its moves replace the engine's own eviction,
// prefetch and lookahead for that launch. The schedule executor (policy/engine/schedule_executor.h)
// plans them under the engine's lock; here the engine asks the device's free memory when following
// begins (with its lock released) and issues the planned calls once the lock is released.
#include <mutex>
#include <vector>

#include "policy/engine/residency_engine.h"

namespace spillway::policy {

bool ResidencyEngine::adherence(ScheduleAdherence* out) const {
  std::lock_guard lock(mutex_);
  const ScheduleAdherence* a = Adherence();
  if (a == nullptr) return false;
  *out = *a;
  out->unscheduled_load_bytes = unscheduled_load_bytes_.load(std::memory_order_relaxed);
  return true;
}

void ResidencyEngine::TrimRoomIfFollowingBegins(std::unique_lock<EngineMutex>& lock,
                                                std::vector<uint64_t>* ids) {
  if (schedule_.active()) return;
  // Following begins (again): the ledger keeps at most the device's free memory now. Its room
  // was made by the learned policy, and what the ledger does not see (demand faults) may have
  // taken it since: a chunk the schedule brought into such room would not wait for the room it
  // really takes, and the device would go over the budget and evict by itself (`train_like` at
  // 4x: a third of the weights, every step). The oldest room goes first; a chunk that finds the
  // ledger empty waits for the newest eviction. The device is asked without the lock; another
  // thread may free what this launch uses meanwhile.
  lock.unlock();
  uint64_t free = 0, total = 0;
  const bool known = device_->MemoryInfo(&free, &total) == kDeviceOk;
  lock.lock();
  schedule_.DropFreed(tracked_, ids);
  room_.Trim(order_seq_, kOrderEvents / 2, known ? free : UINT64_MAX);
}

int ResidencyEngine::IssueScheduled(Stream stream) {
  int failures = 0;
  // Without side streams the executor planned the evict and side ops for the launch stream.
  const bool side = lookahead_.ready();
  const Stream streams[3] = {stream, side ? lookahead_.evict() : stream,
                             side ? lookahead_.side() : stream};
  for (const ScheduleOp& op : ScheduleExecutor::PlannedOps()) {
    const Stream on = op.on == ScheduleOp::On::kOther ? op.other : streams[static_cast<int>(op.on)];
    DeviceResult result = kDeviceOk;
    switch (op.type) {
      case ScheduleOp::Type::kRecord:
        if (RecordOrderEvent(op.seq, on) != kDeviceOk) ++failures;
        continue;
      case ScheduleOp::Type::kWait:
        if (device_->StreamWaitEvent(on, OrderEvent(op.seq)) != kDeviceOk) ++failures;
        continue;
      // A plan's discard (dead data) and populate (not yet written) are decided from the kernels
      // alone: a host copy or fill the plan does not see (cuMemcpy*, cuMemset* on the job's
      // streams) may still read or have written the data, and dropping it would change the job's
      // results. So they are executed as a write-back and a plain prefetch; on a page that holds
      // no data the prefetch populates it on the device without a copy, as a populate would.
      case ScheduleOp::Type::kToHost:
        result = device_->PrefetchToHost(op.address, op.bytes, on);
        if (result == kDeviceOk) evict_bytes_.fetch_add(op.bytes, std::memory_order_relaxed);
        break;
      case ScheduleOp::Type::kToDevice:
        result = device_->PrefetchToDevice(op.address, op.bytes, on);
        if (result == kDeviceOk) prefetch_bytes_.fetch_add(op.bytes, std::memory_order_relaxed);
        break;
    }
    if (result != kDeviceOk) {
      // As in Issue: a move whose allocation was freed meanwhile lost nothing.
      std::lock_guard lock(mutex_);
      if (tracked_.contains(op.id)) ++failures;
    }
  }
  return failures;
}

}  // namespace spillway::policy
