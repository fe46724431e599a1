// A training-like driver-API workload for the residency engine: N layers whose weights are
// allocated once and reused every step; each step runs the forward layers in order (allocating
// one activation per layer), a loss, then the backward layers in reverse (reading each layer's
// input activation, writing its gradient into one big arena at an interior offset, freeing the
// activations as it goes) and a weight update per layer on an optimizer stream. The update kernel
// reaches its gradient through a pointer stored in device memory. Layers run on several streams
// ordered by events. At the end it prints a checksum of the final weights (computed on the host)
// and each step's time measured with events (the virtual clock on simgpu). All arithmetic is
// integer, so the checksum is the same on any device and under any residency decisions.
// --reorder launches the weight updates in an order that changes from step to step, as
// TensorFlow's executor launches the ops that are ready at once (the results stay the same).
// --interleave shuffled makes replicas on their own threads take turns at their launches in an
// order drawn from a fixed seed (examples/turnstile.h), so how their launches interleave changes
// from step to step without depending on the host's scheduler, which under load may run one
// replica's whole step before the other's.
//
//   train_like [--steps N] [--layers N] [--oversubscription F] [--memory SIZE] [--streams N]
//              [--threads N] [--alloc sync|async|mixed] [--managed] [--reorder]
//              [--interleave free|shuffled] [--fork-after-step K]
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/command_line.h"
#include "common/size.h"
#include "examples/example_util.h"
#include "examples/kernels/train_kernels.h"
#include "examples/turnstile.h"

namespace spillway_train {
namespace {

using spillway_demo::Fail;
using spillway_demo::kExitError;
using spillway_demo::kExitOk;
using spillway_demo::kExitOutOfMemory;

enum class AllocMode { kSync, kAsync, kMixed };

struct Options {
  int steps = 4;
  int layers = 8;
  double oversubscription = 2.0;
  uint64_t memory = 0;  // 0: the device's total memory as cuMemGetInfo reports it
  int streams = 2;
  int threads = 1;
  AllocMode alloc = AllocMode::kMixed;
  bool managed = false;
  bool reorder = false;
  bool shuffled_turns = false;  // --interleave shuffled
  int fork_after_step = -1;
};

void Usage(FILE* out) {
  std::fprintf(
      out,
      "usage: train_like [--steps N] [--layers N] [--oversubscription F] [--memory SIZE]\n"
      "                  [--streams N] [--threads N] [--alloc sync|async|mixed] [--managed]\n"
      "                  [--reorder] [--interleave free|shuffled] [--fork-after-step K]\n"
      "  --steps N              training steps (4)\n"
      "  --layers N             layers (8); weights, gradients and activations are tensors of\n"
      "                         equal size, (3 x layers + 3) of them at the step's peak\n"
      "  --oversubscription F   peak working set = F x the device memory (2)\n"
      "  --memory SIZE          size from SIZE instead of the total memory cuMemGetInfo reports\n"
      "  --streams N            compute streams, layer l on stream l mod N (2), plus one\n"
      "                         optimizer stream\n"
      "  --threads N            N independent replicas on their own threads and streams, each\n"
      "                         with 1/N of the working set (1)\n"
      "  --alloc MODE           activations and backward deltas: cuMemAlloc (sync),\n"
      "                         cuMemAllocAsync (async) or alternating (mixed, default)\n"
      "  --managed              every allocation with cuMemAllocManaged (plain unified memory)\n"
      "  --reorder              launch order of the weight updates changes every step: each may\n"
      "                         wait up to 2 more backward layers, the ready ones go shuffled\n"
      "                         (as TensorFlow's executor runs ready ops); same results\n"
      "  --interleave MODE      how the replicas' launches interleave: as their threads run\n"
      "                         (free, default) or one launch a turn, each turn drawn from a\n"
      "                         fixed seed (shuffled: changes every step, same on every run)\n"
      "  --fork-after-step K    after step K the process forks; the child does host-only work\n"
      "                         and exits, the parent waits for it and goes on\n"
      "exit: 0 done, 1 error, 2 out of device memory\n");
}

[[noreturn]] void BadOption(const std::string& what) {
  spillway_demo::BadCommandLine("train_like", what, Usage);
}

int IntArg(const std::string& flag, const char* text, int min) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < min || value > 1000000) {
    BadOption(flag + ": '" + text + "' is not an integer >= " + std::to_string(min));
  }
  return static_cast<int>(value);
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  std::string oversubscription, memory, interleave, alloc;
  spillway::CommandLine cl(
      {.name = "train_like", .usage = "", .unknown_option = "unknown option '{}'"});
  cl.Flag("--managed", &options.managed);
  cl.Flag("--reorder", &options.reorder);
  struct Count {
    const char* flag;
    std::string text;
    int* out;
  };
  Count counts[] = {{"--steps", "", &options.steps},
                    {"--layers", "", &options.layers},
                    {"--streams", "", &options.streams},
                    {"--threads", "", &options.threads},
                    {"--fork-after-step", "", &options.fork_after_step}};
  for (Count& count : counts) cl.Option(count.flag, &count.text);
  cl.Option("--oversubscription", &oversubscription);
  cl.Option("--memory", &memory);
  cl.Option("--interleave", &interleave);
  cl.Option("--alloc", &alloc);
  const spillway::ParsedArguments parsed = cl.Parse(argc, argv);
  spillway_demo::ExitIfHelp(parsed.help, Usage);
  if (!parsed.error.empty()) BadOption(parsed.error);
  for (const Count& count : counts) {
    if (cl.Given(count.flag)) *count.out = IntArg(count.flag, count.text.c_str(), 1);
  }
  if (cl.Given("--oversubscription")) {
    char* end = nullptr;
    options.oversubscription = std::strtod(oversubscription.c_str(), &end);
    if (end == oversubscription.c_str() || *end != '\0' || !(options.oversubscription > 0)) {
      BadOption("--oversubscription: '" + oversubscription + "' is not a number > 0");
    }
  }
  if (cl.Given("--memory")) {
    const auto size = spillway::ParseSize(memory);
    if (!size.ok() || *size == 0) {
      BadOption("--memory: " +
                (size.ok() ? "must be positive" : std::string(size.status().message())));
    }
    options.memory = *size;
  }
  if (cl.Given("--interleave")) {
    if (interleave != "free" && interleave != "shuffled") {
      BadOption("--interleave: '" + interleave + "' is not free or shuffled");
    }
    options.shuffled_turns = interleave == "shuffled";
  }
  if (cl.Given("--alloc")) {
    if (alloc == "sync") {
      options.alloc = AllocMode::kSync;
    } else if (alloc == "async") {
      options.alloc = AllocMode::kAsync;
    } else if (alloc == "mixed") {
      options.alloc = AllocMode::kMixed;
    } else {
      BadOption("--alloc: '" + alloc + "' is not sync, async or mixed");
    }
  }
  if (options.fork_after_step > options.steps) {
    BadOption("--fork-after-step: " + std::to_string(options.fork_after_step) +
              " is after the last step (--steps " + std::to_string(options.steps) + ")");
  }
  if (options.fork_after_step > 0 && options.threads > 1) {
    BadOption("--fork-after-step works with --threads 1 only");
  }
  return options;
}

struct Kernels {
  CUfunction fill, forward, loss, backward, update;
};

Kernels LoadKernels(CUdevice device, CUmodule* module) {
  *module = spillway_demo::LoadKernels(device, "train_kernels");
  using spillway_demo::GetKernel;
  return {GetKernel(*module, "tl_fill"), GetKernel(*module, "tl_forward"),
          GetKernel(*module, "tl_loss"), GetKernel(*module, "tl_backward"),
          GetKernel(*module, "tl_update")};
}

// Prints the plain out-of-memory message and exits with code 2.
[[noreturn]] void OutOfMemory(const char* what, uint64_t bytes, uint64_t live, uint64_t peak) {
  std::printf(
      "out of memory: %s of %s returned CUDA_ERROR_OUT_OF_MEMORY with %s of the workload's %s "
      "peak allocated\n",
      what, spillway::FormatSize(bytes).c_str(), spillway::FormatSize(live).c_str(),
      spillway::FormatSize(peak).c_str());
  std::fflush(stdout);
  std::exit(kExitOutOfMemory);
}

// One replica of the model: its tensors, streams and events, driven by one host thread.
class Replica {
 public:
  // `turnstile` (or null: launch freely) orders this replica's launches, as replica `seed` - 1.
  Replica(const Options& options, const Kernels& kernels, uint64_t tensor_bytes, uint32_t seed,
          spillway_demo::Turnstile* turnstile)
      : options_(options),
        kernels_(kernels),
        turnstile_(turnstile),
        bytes_(tensor_bytes),
        count_(tensor_bytes / sizeof(uint32_t)),
        seed_(seed),
        layers_(static_cast<size_t>(options.layers)),
        peak_(tensor_bytes * (3 * layers_ + 3)) {}

  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Streams, events, weights (filled), the gradient arena and its pointer table.
  void Init();
  // Runs one step; its events are timed by StepMilliseconds after Finish.
  void Step(int step);
  // Waits for all work. Then the host checksum of the final weights.
  uint64_t Finish();
  float StepMilliseconds(int step) const;
  // Frees everything (after Finish).
  void Release();

 private:
  CUstream Stream(size_t layer) const { return streams_[layer % streams_.size()]; }
  CUdeviceptr Alloc(const char* what, bool async, CUstream stream);
  void Free(CUdeviceptr pointer, bool async, CUstream stream);
  bool AsyncActivation(size_t index) const {
    if (options_.managed) return false;
    return options_.alloc == AllocMode::kAsync ||
           (options_.alloc == AllocMode::kMixed && index % 2 == 1);
  }
  bool AsyncDelta() const { return !options_.managed && options_.alloc != AllocMode::kSync; }
  CUdeviceptr GradSlice(size_t layer) const { return grad_arena_ + layer * bytes_; }
  void Launch(CUfunction function, CUstream stream, void** params);

  const Options& options_;
  const Kernels& kernels_;
  spillway_demo::Turnstile* const turnstile_;
  const uint64_t bytes_;
  const uint64_t count_;
  const uint32_t seed_;
  const size_t layers_;
  const uint64_t peak_;
  uint64_t live_ = 0;
  std::vector<CUstream> streams_;
  CUstream optimizer_ = nullptr;
  std::vector<CUdeviceptr> weights_;
  CUdeviceptr grad_arena_ = 0;  // layers_ gradients, each an interior slice
  CUdeviceptr grad_table_ = 0;  // device memory holding the address of each gradient slice
  std::vector<CUevent> forward_done_, backward_done_, update_done_;
  std::vector<CUevent> step_start_, step_end_;
};

CUdeviceptr Replica::Alloc(const char* what, bool async, CUstream stream) {
  CUdeviceptr pointer = 0;
  CUresult result;
  if (options_.managed) {
    result = cuMemAllocManaged(&pointer, bytes_, CU_MEM_ATTACH_GLOBAL);
  } else if (async) {
    result = cuMemAllocAsync(&pointer, bytes_, stream);
  } else {
    result = cuMemAlloc(&pointer, bytes_);
  }
  if (result == CUDA_ERROR_OUT_OF_MEMORY) OutOfMemory(what, bytes_, live_, peak_);
  if (result != CUDA_SUCCESS) Fail(what, result);
  live_ += bytes_;
  return pointer;
}

void Replica::Free(CUdeviceptr pointer, bool async, CUstream stream) {
  if (async) {
    DEMO_CHECK(cuMemFreeAsync(pointer, stream));
  } else {
    DEMO_CHECK(cuMemFree(pointer));
  }
  live_ -= bytes_;
}

void Replica::Launch(CUfunction function, CUstream stream, void** params) {
  if (turnstile_ != nullptr) turnstile_->Await(seed_ - 1);
  DEMO_CHECK(cuLaunchKernel(function, 1024, 1, 1, 256, 1, 1, 0, stream, params, nullptr));
  if (turnstile_ != nullptr) turnstile_->Pass();
}

void Replica::Init() {
  streams_.resize(static_cast<size_t>(options_.streams));
  for (CUstream& stream : streams_) DEMO_CHECK(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
  DEMO_CHECK(cuStreamCreate(&optimizer_, CU_STREAM_DEFAULT));
  for (auto* events : {&forward_done_, &backward_done_, &update_done_}) {
    events->resize(layers_);
    for (CUevent& event : *events) DEMO_CHECK(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  }
  for (auto* events : {&step_start_, &step_end_}) {
    events->resize(static_cast<size_t>(options_.steps));
    for (CUevent& event : *events) DEMO_CHECK(cuEventCreate(&event, CU_EVENT_DEFAULT));
  }

  weights_.resize(layers_);
  for (size_t l = 0; l < layers_; ++l) {
    weights_[l] = Alloc("cuMemAlloc (weights)", false, nullptr);
    uint64_t out = weights_[l], count = count_;
    uint32_t seed = seed_ * 1000u + static_cast<uint32_t>(l), unused = 0;
    void* params[] = {&out, &count, &seed, &unused};
    Launch(kernels_.fill, Stream(l), params);
    DEMO_CHECK(cuEventRecord(update_done_[l], Stream(l)));
  }
  // One arena for all gradients, as a caching allocator carves tensors out of one segment.
  CUresult result = options_.managed
                        ? cuMemAllocManaged(&grad_arena_, bytes_ * layers_, CU_MEM_ATTACH_GLOBAL)
                        : cuMemAlloc(&grad_arena_, bytes_ * layers_);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    OutOfMemory("cuMemAlloc (gradient arena)", bytes_ * layers_, live_, peak_);
  }
  if (result != CUDA_SUCCESS) Fail("cuMemAlloc (gradient arena)", result);
  live_ += bytes_ * layers_;
  std::vector<uint64_t> table(layers_);
  for (size_t l = 0; l < layers_; ++l) table[l] = GradSlice(l);
  const size_t table_bytes = table.size() * sizeof(uint64_t);
  result = options_.managed ? cuMemAllocManaged(&grad_table_, table_bytes, CU_MEM_ATTACH_GLOBAL)
                            : cuMemAlloc(&grad_table_, table_bytes);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    OutOfMemory("cuMemAlloc (gradient table)", table_bytes, live_, peak_);
  }
  if (result != CUDA_SUCCESS) Fail("cuMemAlloc (gradient table)", result);
  DEMO_CHECK(cuMemcpyHtoD(grad_table_, table.data(), table_bytes));
}

void Replica::Step(int step) {
  const size_t s = static_cast<size_t>(step);
  // Every stream starts the step after the previous one ended (step_end_ is on stream 0).
  if (step > 0) {
    for (CUstream stream : streams_) DEMO_CHECK(cuStreamWaitEvent(stream, step_end_[s - 1], 0));
  }
  DEMO_CHECK(cuEventRecord(step_start_[s], streams_[0]));

  // Forward: act[0] is the step's input, act[l + 1] = layer l's output.
  std::vector<CUdeviceptr> act(layers_ + 1);
  act[0] = Alloc("cuMemAlloc (input)", AsyncActivation(0), Stream(0));
  {
    uint64_t out = act[0], count = count_;
    uint32_t seed = seed_ * 1000003u + static_cast<uint32_t>(step) + 17u, unused = 0;
    void* params[] = {&out, &count, &seed, &unused};
    Launch(kernels_.fill, Stream(0), params);
  }
  for (size_t l = 0; l < layers_; ++l) {
    const CUstream stream = Stream(l);
    if (l > 0) DEMO_CHECK(cuStreamWaitEvent(stream, forward_done_[l - 1], 0));
    DEMO_CHECK(cuStreamWaitEvent(stream, update_done_[l], 0));  // last step's weight update
    act[l + 1] = Alloc("cuMemAlloc (activation)", AsyncActivation(l + 1), stream);
    uint64_t in = act[l], weight = weights_[l], out = act[l + 1], count = count_;
    void* params[] = {&in, &weight, &out, &count};
    Launch(kernels_.forward, stream, params);
    DEMO_CHECK(cuEventRecord(forward_done_[l], stream));
  }

  // Loss: the first delta from the last activation, which is then dead.
  const CUstream top = Stream(layers_ - 1);
  CUdeviceptr delta = Alloc("cuMemAlloc (delta)", AsyncDelta(), top);
  {
    uint64_t in = act[layers_], out = delta, count = count_;
    uint32_t seed = seed_ + 7u, unused = 0;
    void* params[] = {&in, &out, &count, &seed, &unused};
    Launch(kernels_.loss, top, params);
  }
  Free(act[layers_], AsyncActivation(layers_), top);

  // Backward in reverse; the optimizer stream updates each layer's weights once its gradient is
  // written. With --reorder an update waits 0-2 more backward layers and the updates that are due
  // together launch in a shuffled order, both drawn anew each step (each update touches only its
  // own layer's weights, so any order computes the same).
  struct PendingUpdate {
    size_t layer;
    size_t due;  // launched after the backward at this index (0: the last layer's); the last
                 // backward's index at most, so every update of the step is launched in it
    uint32_t rank;
  };
  std::vector<PendingUpdate> pending;
  size_t last_update = 0;
  const auto launch_due = [&](size_t index) {
    std::vector<PendingUpdate> due;
    std::erase_if(pending, [&](const PendingUpdate& u) {
      if (u.due > index) return false;
      due.push_back(u);
      return true;
    });
    std::sort(due.begin(), due.end(),
              [](const PendingUpdate& a, const PendingUpdate& b) { return a.rank < b.rank; });
    for (const PendingUpdate& u : due) {
      DEMO_CHECK(cuStreamWaitEvent(optimizer_, backward_done_[u.layer], 0));
      uint64_t w = weights_[u.layer], n = count_, table = grad_table_, index_in = u.layer;
      void* update_params[] = {&w, &n, &table, &index_in};
      Launch(kernels_.update, optimizer_, update_params);
      DEMO_CHECK(cuEventRecord(update_done_[u.layer], optimizer_));
      last_update = u.layer;
    }
  };
  for (size_t l = layers_; l-- > 0;) {
    const CUstream stream = Stream(l);
    if (l + 1 < layers_) DEMO_CHECK(cuStreamWaitEvent(stream, backward_done_[l + 1], 0));
    const CUdeviceptr delta_out = Alloc("cuMemAlloc (delta)", AsyncDelta(), stream);
    uint64_t a = act[l], weight = weights_[l], din = delta, dout = delta_out;
    uint64_t grad = GradSlice(l), count = count_;
    void* params[] = {&a, &weight, &din, &dout, &grad, &count};
    Launch(kernels_.backward, stream, params);
    DEMO_CHECK(cuEventRecord(backward_done_[l], stream));
    Free(act[l], AsyncActivation(l), stream);
    Free(delta, AsyncDelta(), stream);
    delta = delta_out;

    const size_t index = layers_ - 1 - l;
    const uint32_t draw = Hash(s * 1000003u + l, seed_ + 99u);
    const size_t delay = options_.reorder ? draw % 3 : 0;
    pending.push_back({l, std::min(index + delay, layers_ - 1), draw >> 2});
    launch_due(index);
  }
  Free(delta, AsyncDelta(), streams_[0]);  // after backward of layer 0, on the same stream

  // The step ends when the last update is done (the optimizer stream runs them in order).
  DEMO_CHECK(cuStreamWaitEvent(streams_[0], update_done_[last_update], 0));
  DEMO_CHECK(cuEventRecord(step_end_[s], streams_[0]));
}

uint64_t Replica::Finish() {
  DEMO_CHECK(cuEventSynchronize(step_end_.back()));
  std::vector<uint32_t> host(count_);
  uint64_t hash = 0xCBF29CE484222325ull;  // FNV-1a over the words of every layer's weights
  for (const CUdeviceptr weight : weights_) {
    DEMO_CHECK(cuMemcpyDtoH(host.data(), weight, bytes_));
    for (const uint32_t word : host) {
      hash ^= word;
      hash *= 0x100000001B3ull;
    }
  }
  return hash;
}

float Replica::StepMilliseconds(int step) const {
  float ms = 0;
  const size_t s = static_cast<size_t>(step);
  DEMO_CHECK(cuEventElapsedTime(&ms, step_start_[s], step_end_[s]));
  return ms;
}

void Replica::Release() {
  for (const CUdeviceptr weight : weights_) DEMO_CHECK(cuMemFree(weight));
  DEMO_CHECK(cuMemFree(grad_arena_));
  DEMO_CHECK(cuMemFree(grad_table_));
  for (auto* events : {&forward_done_, &backward_done_, &update_done_, &step_start_, &step_end_}) {
    for (CUevent event : *events) DEMO_CHECK(cuEventDestroy(event));
  }
  for (CUstream stream : streams_) DEMO_CHECK(cuStreamDestroy(stream));
  DEMO_CHECK(cuStreamDestroy(optimizer_));
}

// The fork check: the child does host-only work (no CUDA) and exits; the parent waits for it.
void ForkAndWait(int step) {
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "train_like: fork failed\n");
    std::exit(kExitError);
  }
  if (child == 0) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < (1u << 20); ++i) sum += Hash(i, 5);
    ::_exit(sum == 0 ? kExitError : kExitOk);  // as Python's multiprocessing children end
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != kExitOk) {
    std::printf("fork after step %d: the child did not exit cleanly (status %d)\n", step, status);
    std::exit(kExitError);
  }
  std::printf("fork after step %d: the child exited cleanly\n", step);
}

int Run(const Options& options) {
  const spillway_demo::OpenedDevice opened = spillway_demo::OpenDevice();
  const CUdevice device = opened.device;
  const CUcontext context = opened.context;
  const char* name = opened.name;
  const size_t free_bytes = opened.free_bytes;
  const size_t total_bytes = opened.total_bytes;
  const uint64_t memory = options.memory != 0 ? options.memory : total_bytes;

  // The step's peak: weights + gradients + (layers + 1) activations + 2 deltas, all one size.
  const uint64_t tensors_per_replica = 3ull * static_cast<uint64_t>(options.layers) + 3;
  const uint64_t tensors = tensors_per_replica * static_cast<uint64_t>(options.threads);
  const double target = options.oversubscription * static_cast<double>(memory);
  const uint64_t tensor_bytes = static_cast<uint64_t>(target / static_cast<double>(tensors)) /
                                4096 * 4096;  // whole pages, not whole 2 MiB chunks
  if (tensor_bytes == 0) {
    std::fprintf(stderr, "train_like: %gx of %s in %" PRIu64 " tensors is less than 4 KiB each\n",
                 options.oversubscription, spillway::FormatSize(memory).c_str(), tensors);
    return kExitError;
  }
  std::printf(
      "device: %s, %s of memory (%s free); workload: %d replica(s) x %d layers, tensors of %s, "
      "peak %s (%.2fx of %s); %d steps, %d streams, %s%s\n",
      name, spillway::FormatSize(total_bytes).c_str(), spillway::FormatSize(free_bytes).c_str(),
      options.threads, options.layers, spillway::FormatSize(tensor_bytes).c_str(),
      spillway::FormatSize(tensor_bytes * tensors).c_str(),
      static_cast<double>(tensor_bytes * tensors) / static_cast<double>(memory),
      spillway::FormatSize(memory).c_str(), options.steps, options.streams,
      options.alloc == AllocMode::kSync    ? "cuMemAlloc"
      : options.alloc == AllocMode::kAsync ? "cuMemAllocAsync"
                                           : "cuMemAlloc+cuMemAllocAsync",
      options.managed ? " (all cuMemAllocManaged)" : "");
  std::fflush(stdout);

  CUmodule module = nullptr;
  const Kernels kernels = LoadKernels(device, &module);
  std::vector<uint64_t> checksums(static_cast<size_t>(options.threads));
  std::vector<float> step_ms(static_cast<size_t>(options.steps));
  // The turn after `turn` goes to the launching replica this draws (--interleave shuffled).
  const spillway_demo::Turnstile::Draw draw = [](uint64_t turn, uint32_t) {
    return Hash(turn, 4242u);
  };
  std::unique_ptr<spillway_demo::Turnstile> turnstile;
  if (options.shuffled_turns) {
    turnstile =
        std::make_unique<spillway_demo::Turnstile>(static_cast<size_t>(options.threads), draw);
  }
  auto run_replica = [&](int r, bool fork_here) {
    DEMO_CHECK(cuCtxSetCurrent(context));
    Replica replica(options, kernels, tensor_bytes, static_cast<uint32_t>(r) + 1, turnstile.get());
    replica.Init();
    for (int step = 0; step < options.steps; ++step) {
      replica.Step(step);
      if (fork_here && step + 1 == options.fork_after_step) {
        DEMO_CHECK(cuCtxSynchronize());
        ForkAndWait(step + 1);
      }
    }
    if (turnstile != nullptr) turnstile->Leave(static_cast<size_t>(r));
    checksums[static_cast<size_t>(r)] = replica.Finish();
    if (r == 0) {
      for (int step = 0; step < options.steps; ++step) {
        step_ms[static_cast<size_t>(step)] = replica.StepMilliseconds(step);
      }
    }
    replica.Release();
  };
  if (options.threads == 1) {
    run_replica(0, options.fork_after_step > 0);
  } else {
    std::vector<std::thread> threads;
    for (int r = 0; r < options.threads; ++r) threads.emplace_back(run_replica, r, false);
    for (auto& thread : threads) thread.join();
  }
  DEMO_CHECK(cuModuleUnload(module));
  DEMO_CHECK(cuDevicePrimaryCtxRelease(device));

  double total_ms = 0;
  for (int step = 0; step < options.steps; ++step) {
    std::printf("step %d: %.6f ms\n", step, static_cast<double>(step_ms[step]));
    total_ms += static_cast<double>(step_ms[step]);
  }
  std::printf("mean step time: %.6f ms\n", total_ms / options.steps);
  uint64_t checksum = 0xCBF29CE484222325ull;
  for (size_t r = 0; r < checksums.size(); ++r) {
    if (checksums.size() > 1)
      std::printf("replica %zu checksum 0x%016" PRIx64 "\n", r, checksums[r]);
    checksum = (checksum ^ checksums[r]) * 0x100000001B3ull;
  }
  std::printf("checksum 0x%016" PRIx64 "\n", checksum);
  return kExitOk;
}

}  // namespace
}  // namespace spillway_train

int main(int argc, char** argv) {
  return spillway_train::Run(spillway_train::ParseOptions(argc, argv));
}
