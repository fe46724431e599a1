// De-duplicated call-site stacks for the recorder: the calling stack (libunwind, unwinder.h)
// turned into (module, offset) frames (module_map.h) and named by a 64-bit id that is a hash of
// the frames' (module build-id, offset) pairs, so the same call site has the same id in every
// run of the same binaries despite ASLR. The first time a module or a site is seen, a sink is
// told (the recorder writes its definition records there); ids never repeat a definition.
#ifndef SPILLWAY_PROFILER_CALLSITE_CALL_SITE_TABLE_H_
#define SPILLWAY_PROFILER_CALLSITE_CALL_SITE_TABLE_H_

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "profiler/callsite/module_map.h"

namespace spillway::callsite {

// Call-site id 0 means "no stack" (libunwind missing, or nothing left after skipping).
inline constexpr uint64_t kNoCallSite = 0;

struct Frame {
  uint32_t module = 0;  // the id the sink gave the module (0: an address in no object)
  uint64_t offset = 0;  // return address minus the module's load bias (raw address for module 0)
};

// Receives definitions, each once per table (per process, or per child after ResetInChild), and
// names them: the ids it returns are what frames and Capture() use from then on (a trace writer
// returns its own ids). Called with the table's lock held: do not call back into the table.
class CallSiteSink {
 public:
  virtual ~CallSiteSink() = default;
  // Returns the module's id, not 0.
  virtual uint32_t OnModule(const ModuleInfo& info) = 0;
  // `site` is the table's hash of the frames; returns the id to use for it (e.g. `site`).
  virtual uint64_t OnCallSite(uint64_t site, std::span<const Frame> frames) = 0;
};

class CallSiteTable {
 public:
  // `max_frames`: frames kept per stack (after skipping), at most 64.
  explicit CallSiteTable(int max_frames = 24);
  CallSiteTable(const CallSiteTable&) = delete;
  CallSiteTable& operator=(const CallSiteTable&) = delete;

  // Walks the calling stack and returns its site id (the sink's), telling `sink` about new
  // modules and sites; with a null sink the table's hash is the id.
  // Leading frames inside the object that contains `skip_object_of` (e.g. the shim's own code)
  // are dropped; null keeps them all. kNoCallSite when no stack could be taken.
  uint64_t Capture(const void* skip_object_of, CallSiteSink* sink);

  // The same for return addresses already taken (innermost first); for Capture and tests.
  uint64_t Intern(void* const* pcs, int count, CallSiteSink* sink);

  // Hold the locks across fork() (from pthread_atfork's prepare / parent / child handlers). In
  // the child, every module and site counts as not yet defined again (a new trace file).
  void LockForFork();
  void UnlockInParent();
  void ResetInChild();

  ModuleMap& modules() { return modules_; }

 private:
  uint64_t InternResolved(const Location* where, int count, CallSiteSink* sink);

  int max_frames_;
  ModuleMap modules_;
  std::mutex mutex_;
  // Guarded by mutex_: the sink's id of each site defined so far, by the table's hash, and of
  // each module, by ModuleMap index (0: not defined yet).
  absl::flat_hash_map<uint64_t, uint64_t> sites_;
  std::vector<uint32_t> module_ids_;
};

}  // namespace spillway::callsite

#endif  // SPILLWAY_PROFILER_CALLSITE_CALL_SITE_TABLE_H_
