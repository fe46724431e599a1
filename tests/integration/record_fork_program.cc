// A job that forks after it allocated: the parent allocates, forks, the child allocates
// (no frees or stream work: simgpu's stream threads, like a real driver's, do not survive fork,
// and its frees wait for them), exits normally, and the parent frees after waiting.
// For record mode's test that a forked child writes its own trace. Exit status 0 when all went
// well; prints the child's pid.
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

void Check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) {
    std::fprintf(stderr, "record_fork_program: %s failed (%d)\n", what, result);
    std::exit(1);
  }
}

void Allocate(size_t bytes) {
  CUdeviceptr pointer = 0;
  Check(cuMemAlloc(&pointer, bytes), "cuMemAlloc");
}

}  // namespace

int main() {
  Check(cuInit(0), "cuInit");
  CUdevice device = 0;
  Check(cuDeviceGet(&device, 0), "cuDeviceGet");
  CUcontext context = nullptr;
  Check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  Check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUdeviceptr kept = 0;
  Check(cuMemAlloc(&kept, 1 << 20), "cuMemAlloc");
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    Allocate(2 << 20);
    Allocate(3 << 20);
    std::exit(0);  // a normal exit: the child's trace is closed like any process's
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "record_fork_program: the child failed (status %d)\n", status);
    return 1;
  }
  Check(cuMemFree(kept), "cuMemFree");
  std::printf("child %d\n", static_cast<int>(child));
  return 0;
}
