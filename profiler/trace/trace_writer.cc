// TraceWriter (trace_writer.h): per-thread buffers of encoded records, handed to a FIFO of full
// buffers that one writer at a time (the flusher thread, the filling thread, or Flush/Close)
// writes to the file in order, under a bounded memory budget.
#include "profiler/trace/trace_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "profiler/trace/trace_wire.h"

namespace spillway::trace {

namespace {

// Bumped in the child after fork(), so cached thread ids are looked up again there.
std::atomic<uint32_t> fork_generation{0};
void BumpForkGeneration() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

uint32_t TraceThreadId() {
  static const bool registered = pthread_atfork(nullptr, nullptr, &BumpForkGeneration) == 0;
  (void)registered;
  thread_local uint32_t tid = 0;
  thread_local uint32_t generation = ~0u;
  const uint32_t now = fork_generation.load(std::memory_order_relaxed);
  if (generation != now) {
    tid = static_cast<uint32_t>(syscall(SYS_gettid));
    generation = now;
  }
  return tid;
}

namespace {

enum State : int { kOpen = 0, kClosing = 1, kClosed = 2, kAbandoned = 3 };

// One buffer of encoded records.
struct Chunk {
  char* data = nullptr;
  size_t used = 0;
  uint64_t records = 0;
};

// A thread's current chunk; `busy` is held by the owning thread while appending and by
// Flush/Close while taking the chunk away.
struct ThreadBuffer {
  std::atomic<bool> busy{false};
  Chunk* current = nullptr;
  uint32_t tid = 0;

  void Lock() {
    while (busy.exchange(true, std::memory_order_acquire)) {
      while (busy.load(std::memory_order_relaxed)) {
      }
    }
  }
  void Unlock() { busy.store(false, std::memory_order_release); }
};

std::atomic<uint64_t> next_writer_serial{1};

// The calling thread's buffer for the writer with this serial, when it has one.
struct ThreadSlot {
  uint64_t serial = 0;
  ThreadBuffer* buffer = nullptr;
};
thread_local ThreadSlot thread_slot;

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

class TraceWriter::Impl {
 public:
  Impl(int fd, const WriterOptions& options)
      : fd_(fd),
        options_(options),
        serial_(next_writer_serial.fetch_add(1)),
        max_chunks_(std::max<size_t>(2, options.max_buffered_bytes / options.buffer_bytes)) {}

  ~Impl() {
    for (auto& [tid, buffer] : buffers_) {
      if (buffer.current != nullptr) FreeChunk(buffer.current);
    }
    for (Chunk* chunk : free_) FreeChunk(chunk);
    for (Chunk* chunk : pending_) FreeChunk(chunk);
  }

  // Writes the preamble and the header; starts the flusher.
  absl::Status Start(const std::string& path, const HeaderRecord& header) {
    char preamble[wire::kPreambleBytes];
    wire::EncodePreamble(preamble);
    std::string record = Encode(header);
    if (!WriteAll(fd_, preamble, sizeof(preamble)) ||
        !WriteAll(fd_, record.data(), record.size())) {
      return absl::InternalError(absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
    }
    records_written_ = 1;
    if (options_.flush == WriterOptions::Flush::kBackground) {
      if (pthread_create(&flusher_, nullptr, &Impl::FlusherMain, this) == 0) {
        flusher_running_ = true;
        // The thread's own start-up (its allocations included) is over before the writer is
        // handed out: a fork() right after, in the middle of it, could leave the child an
        // allocator lock nobody releases (ASan's allocator has no fork handlers in GCC 12; seen as
        // an intermittent hang of a forked child's flusher in profile_launcher_test).
        absl::MutexLock lock(&queue_mu_);
        queue_mu_.Await(absl::Condition(&flusher_started_));
      } else {
        options_.flush = WriterOptions::Flush::kInline;
      }
    }
    return absl::OkStatus();
  }

  template <typename RecordT>
  void Append(const RecordT& record) {
    if (state_.load(std::memory_order_acquire) != kOpen) return;
    const size_t payload = wire::PayloadBytes(record);
    const size_t need = wire::kFrameBytes + payload;
    ThreadBuffer* buffer = LocalBuffer();
    if (buffer == nullptr || need > options_.buffer_bytes) return Drop();
    buffer->Lock();
    Chunk* chunk = buffer->current;
    bool handed_off = false;
    if (chunk == nullptr || chunk->used + need > options_.buffer_bytes) {
      if (chunk != nullptr) {
        HandOff(chunk);
        handed_off = true;
      }
      chunk = buffer->current = TakeFreeChunk();
      if (chunk == nullptr) {
        buffer->Unlock();
        if (handed_off) AfterHandOff();
        if (state_.load(std::memory_order_acquire) == kOpen) Drop();
        return;
      }
    }
    wire::EncodeRecord(record, payload, chunk->data + chunk->used);
    chunk->used += need;
    ++chunk->records;
    buffer->Unlock();
    if (handed_off) AfterHandOff();
  }

  // Writes a definition record straight to the file.
  void WriteDefinition(const std::string& encoded) {
    absl::MutexLock lock(&file_mu_);
    WriteToFile(encoded.data(), encoded.size(), 1);
  }

  template <typename RecordT>
  static std::string Encode(const RecordT& record) {
    const size_t payload = wire::PayloadBytes(record);
    std::string out(wire::kFrameBytes + payload, '\0');
    wire::EncodeRecord(record, payload, out.data());
    return out;
  }

  absl::Status Flush() {
    if (state_.load(std::memory_order_acquire) == kAbandoned) return absl::OkStatus();
    std::vector<ThreadBuffer*> buffers;
    {
      absl::MutexLock lock(&registry_mu_);
      for (auto& [tid, buffer] : buffers_) buffers.push_back(&buffer);
    }
    for (ThreadBuffer* buffer : buffers) {
      buffer->Lock();
      Chunk* chunk = buffer->current;
      if (chunk != nullptr && chunk->used > 0) {
        buffer->current = nullptr;
        HandOff(chunk);
      }
      buffer->Unlock();
    }
    WritePending();
    absl::MutexLock lock(&file_mu_);
    return status_;
  }

  absl::Status Close(const std::string& path) {
    int expected = kOpen;
    if (!state_.compare_exchange_strong(expected, kClosing)) return absl::OkStatus();
    StopFlusher();
    absl::Status status = Flush();
    absl::MutexLock lock(&file_mu_);
    EndRecord end;
    end.end_ns = TraceClockNs();
    end.records_written = records_written_;
    end.records_dropped = dropped_.load();
    const std::string encoded = Encode(end);
    WriteToFile(encoded.data(), encoded.size(), 1);
    if (::close(fd_) != 0 && status_.ok()) {
      status_ = absl::InternalError(absl::StrCat(path, ": close: ", std::strerror(errno)));
    }
    fd_ = -1;
    state_.store(kClosed, std::memory_order_release);
    return status_.ok() ? status : status_;
  }

  void LockForFork() ABSL_NO_THREAD_SAFETY_ANALYSIS { file_mu_.Lock(); }
  void UnlockAfterForkInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS { file_mu_.Unlock(); }

  void AbandonInChild() {
    state_.store(kAbandoned, std::memory_order_release);
    flusher_running_ = false;  // the flusher thread does not exist in the child
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool abandoned() const { return state_.load(std::memory_order_acquire) == kAbandoned; }
  bool open() const { return state_.load(std::memory_order_acquire) == kOpen; }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  // Interning state, guarded by intern_mu_.
  absl::Mutex intern_mu_;
  absl::flat_hash_map<std::string, StringId> strings_ ABSL_GUARDED_BY(intern_mu_);
  absl::flat_hash_map<std::string, ModuleId> modules_ ABSL_GUARDED_BY(intern_mu_);
  std::vector<std::string> module_build_ids_ ABSL_GUARDED_BY(intern_mu_);  // by id - 1
  absl::flat_hash_map<CallSiteId, std::vector<Frame>> sites_ ABSL_GUARDED_BY(intern_mu_);

  // Hashes (build-id, offset) pairs; the module ids must be known.
  CallSiteId HashSite(absl::Span<const Frame> frames) ABSL_EXCLUSIVE_LOCKS_REQUIRED(intern_mu_) {
    return HashCallSite(frames, [this](ModuleId module) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return module >= 1 && module <= module_build_ids_.size()
                 ? absl::string_view(module_build_ids_[module - 1])
                 : absl::string_view();
    });
  }

 private:
  void Drop() { dropped_.fetch_add(1, std::memory_order_relaxed); }

  ThreadBuffer* LocalBuffer() {
    ThreadSlot& slot = thread_slot;
    if (slot.serial == serial_) return slot.buffer;
    const uint32_t tid = TraceThreadId();
    absl::MutexLock lock(&registry_mu_);
    ThreadBuffer& buffer = buffers_[tid];  // a node map: the buffer never moves
    buffer.tid = tid;
    slot.serial = serial_;
    slot.buffer = &buffer;
    return &buffer;
  }

  Chunk* TakeFreeChunk() {
    absl::MutexLock lock(&queue_mu_);
    if (state_.load(std::memory_order_acquire) != kOpen) return nullptr;
    if (!free_.empty()) {
      Chunk* chunk = free_.back();
      free_.pop_back();
      return chunk;
    }
    if (chunks_ >= max_chunks_) return nullptr;
    auto* chunk = new (std::nothrow) Chunk;
    if (chunk == nullptr) return nullptr;
    chunk->data = static_cast<char*>(std::malloc(options_.buffer_bytes));
    if (chunk->data == nullptr) {
      delete chunk;
      return nullptr;
    }
    ++chunks_;
    return chunk;
  }

  static void FreeChunk(Chunk* chunk) {
    std::free(chunk->data);
    delete chunk;
  }

  // Queues a filled chunk (called with the thread buffer locked, so it only queues).
  void HandOff(Chunk* chunk) {
    absl::MutexLock lock(&queue_mu_);
    pending_.push_back(chunk);
  }

  // After a hand-off, outside the thread buffer's lock: write inline or let the flusher know.
  void AfterHandOff() {
    switch (options_.flush) {
      case WriterOptions::Flush::kInline:
        WritePending();
        break;
      case WriterOptions::Flush::kBackground: {
        absl::MutexLock lock(&queue_mu_);
        wake_ = true;
        break;
      }
      case WriterOptions::Flush::kManual:
        break;
    }
  }

  // Writes every queued chunk in FIFO order; holding file_mu_ while taking them keeps the order.
  void WritePending() {
    absl::MutexLock file_lock(&file_mu_);
    std::deque<Chunk*> batch;
    {
      absl::MutexLock lock(&queue_mu_);
      batch.swap(pending_);
    }
    for (Chunk* chunk : batch) {
      WriteToFile(chunk->data, chunk->used, chunk->records);
      chunk->used = 0;
      chunk->records = 0;
    }
    absl::MutexLock lock(&queue_mu_);
    for (Chunk* chunk : batch) free_.push_back(chunk);
  }

  void WriteToFile(const char* data, size_t size, uint64_t records)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(file_mu_) {
    if (fd_ < 0 || !status_.ok() || !WriteAll(fd_, data, size)) {
      if (status_.ok() && fd_ >= 0) {
        status_ = absl::InternalError(absl::StrCat("write: ", std::strerror(errno)));
      }
      dropped_.fetch_add(records, std::memory_order_relaxed);
      return;
    }
    records_written_ += records;
  }

  static void* FlusherMain(void* arg) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    auto* self = static_cast<Impl*>(arg);
    {
      absl::MutexLock lock(&self->queue_mu_);
      self->flusher_started_ = true;
    }
    while (true) {
      bool stop;
      {
        absl::MutexLock lock(&self->queue_mu_);
        self->queue_mu_.AwaitWithTimeout(absl::Condition(&self->wake_), absl::Milliseconds(100));
        self->wake_ = false;
        stop = self->stop_;
      }
      self->WritePending();
      if (stop) return nullptr;
    }
  }

  void StopFlusher() {
    if (!flusher_running_) return;
    {
      absl::MutexLock lock(&queue_mu_);
      stop_ = true;
      wake_ = true;
    }
    pthread_join(flusher_, nullptr);
    flusher_running_ = false;
  }

  int fd_;
  WriterOptions options_;
  const uint64_t serial_;
  const size_t max_chunks_;
  std::atomic<int> state_{kOpen};
  std::atomic<uint64_t> dropped_{0};

  absl::Mutex registry_mu_;
  absl::node_hash_map<uint32_t, ThreadBuffer> buffers_ ABSL_GUARDED_BY(registry_mu_);

  absl::Mutex queue_mu_;
  std::deque<Chunk*> pending_ ABSL_GUARDED_BY(queue_mu_);
  std::vector<Chunk*> free_ ABSL_GUARDED_BY(queue_mu_);
  size_t chunks_ ABSL_GUARDED_BY(queue_mu_) = 0;
  bool flusher_started_ ABSL_GUARDED_BY(queue_mu_) = false;  // FlusherMain has begun
  bool wake_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;

  absl::Mutex file_mu_;
  absl::Status status_ ABSL_GUARDED_BY(file_mu_);
  uint64_t records_written_ ABSL_GUARDED_BY(file_mu_) = 0;

  pthread_t flusher_{};
  bool flusher_running_ = false;
};

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path,
                                                               const HeaderRecord& header,
                                                               const WriterOptions& options) {
  if (options.buffer_bytes < 256) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": trace buffers must be >= 256 bytes"));
  }
  // Not truncated before the lock is ours: another process recording to the same path (two jobs
  // given one SPILLWAY_TRACE) would otherwise have its records interleaved with ours.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return absl::AlreadyExistsError(
          absl::StrCat(path, ": another process is recording to this trace"));
    }
    return absl::UnavailableError(absl::StrCat(path, ": cannot lock: ", std::strerror(error)));
  }
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(path, ": cannot truncate: ", std::strerror(error)));
  }
  auto impl = std::make_unique<Impl>(fd, options);
  if (absl::Status status = impl->Start(path, header); !status.ok()) {
    impl->AbandonInChild();  // closes the file without writing more
    return status;
  }
  return std::unique_ptr<TraceWriter>(new TraceWriter(path, std::move(impl)));
}

TraceWriter::TraceWriter(std::string path, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}

TraceWriter::~TraceWriter() {
  if (impl_->abandoned()) {
    (void)impl_.release();  // its locks may be held by threads that do not exist in this process
    return;
  }
  (void)Close();
}

void TraceWriter::Write(const AllocRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const FreeRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const LaunchRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const MemcpyRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const MemsetRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const SynchronizeRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const GraphLaunchRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const ModuleLoadRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const KernelTimeRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const UvmCounterRecord& r) { impl_->Append(r); }
void TraceWriter::Write(const ResidentRecord& r) { impl_->Append(r); }

StringId TraceWriter::InternString(absl::string_view text) {
  if (!impl_->open()) return 0;
  absl::MutexLock lock(&impl_->intern_mu_);
  auto [it, inserted] = impl_->strings_.try_emplace(std::string(text), 0);
  if (!inserted) return it->second;
  it->second = static_cast<StringId>(impl_->strings_.size());
  impl_->WriteDefinition(Impl::Encode(StringRecord{it->second, text}));
  return it->second;
}

ModuleId TraceWriter::InternModule(absl::string_view build_id_hex, absl::string_view path) {
  if (!impl_->open()) return 0;
  absl::MutexLock lock(&impl_->intern_mu_);
  std::string key = absl::StrCat(build_id_hex, "\n", path);
  auto [it, inserted] = impl_->modules_.try_emplace(std::move(key), 0);
  if (!inserted) return it->second;
  impl_->module_build_ids_.emplace_back(build_id_hex);
  it->second = static_cast<ModuleId>(impl_->module_build_ids_.size());
  impl_->WriteDefinition(Impl::Encode(ModuleRecord{it->second, build_id_hex, path}));
  return it->second;
}

CallSiteId TraceWriter::InternCallSite(absl::Span<const Frame> frames) {
  if (frames.empty() || !impl_->open()) return 0;
  if (frames.size() > kMaxFrames) frames = frames.subspan(0, kMaxFrames);
  absl::MutexLock lock(&impl_->intern_mu_);
  CallSiteId id = impl_->HashSite(frames);
  while (true) {  // a hash collision with a different stack takes the next free id
    auto it = impl_->sites_.find(id);
    if (it == impl_->sites_.end()) break;
    if (absl::MakeConstSpan(it->second) == frames) return id;
    id = id + 1 == 0 ? 1 : id + 1;
  }
  impl_->sites_.emplace(id, std::vector<Frame>(frames.begin(), frames.end()));
  impl_->WriteDefinition(Impl::Encode(CallSiteRecord{id, frames}));
  return id;
}

absl::Status TraceWriter::Flush() {
  absl::Status status = impl_->Flush();
  return status.ok() ? status : absl::InternalError(absl::StrCat(path_, ": ", status.message()));
}

absl::Status TraceWriter::Close() {
  absl::Status status = impl_->Close(path_);
  if (status.ok() || absl::StartsWith(status.message(), path_)) return status;
  return absl::InternalError(absl::StrCat(path_, ": ", status.message()));
}

void TraceWriter::AbandonInChild() { impl_->AbandonInChild(); }

void TraceWriter::LockForFork() { impl_->LockForFork(); }

void TraceWriter::UnlockAfterForkInParent() { impl_->UnlockAfterForkInParent(); }

uint64_t TraceWriter::records_dropped() const { return impl_->dropped(); }

}  // namespace spillway::trace
