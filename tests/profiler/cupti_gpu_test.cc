// The CUPTI recorder on a real GPU (ctest label `gpu`; not run in CI): a kernel that touches
// host-resident managed memory must come back with its device times on the trace clock under the
// caller's correlation id, together with the GPU page faults and host-to-device migrations it
// caused, and a memcpy with its own id. The driver is reached with dlopen so the test builds
// against simgpu, which lacks cuModuleLoadData.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/cupti/cupti_recorder.h"

namespace spillway::cupti {
namespace {

// Writes one word in each 4 KiB page of p[0, n).
constexpr char kPtx[] = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry touch_pages(.param .u64 p, .param .u64 n) {
  .reg .pred %done;
  .reg .b32 %r<5>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [n];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.s32 %r4, %r1, %r2, %r3;
  cvt.u64.u32 %rd3, %r4;
  shl.b64 %rd3, %rd3, 12;
  setp.ge.u64 %done, %rd3, %rd2;
  @%done bra END;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r4;
END:
  ret;
}
)";

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

class CollectingSink : public CuptiSink {
 public:
  void OnKernelTime(const trace::KernelTimeRecord& record, const KernelDetails*) override {
    std::lock_guard<std::mutex> lock(mu);
    times.push_back(record);
  }
  void OnUvmCounter(const trace::UvmCounterRecord& record) override {
    std::lock_guard<std::mutex> lock(mu);
    uvm.push_back(record);
  }
  std::mutex mu;
  std::vector<trace::KernelTimeRecord> times;
  std::vector<trace::UvmCounterRecord> uvm;
};

struct Driver {
  template <typename Fn>
  void Get(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(dlsym(handle, name));
    ASSERT_NE(fn, nullptr) << name;
  }
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*CtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*CtxSynchronize)() = nullptr;
  CUresult (*ModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*MemAllocManaged)(CUdeviceptr*, size_t, unsigned) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void**, void**) = nullptr;
};

TEST(CuptiGpu, KernelTimesAndUvmCountersReachTheSink) {
  Driver d;
  ASSERT_NE(d.handle, nullptr) << dlerror();
  d.Get(d.Init, "cuInit");
  d.Get(d.DeviceGet, "cuDeviceGet");
  d.Get(d.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  d.Get(d.CtxSetCurrent, "cuCtxSetCurrent");
  d.Get(d.CtxSynchronize, "cuCtxSynchronize");
  d.Get(d.ModuleLoadData, "cuModuleLoadData");
  d.Get(d.ModuleGetFunction, "cuModuleGetFunction");
  d.Get(d.MemAllocManaged, "cuMemAllocManaged");
  d.Get(d.MemAlloc, "cuMemAlloc_v2");
  d.Get(d.MemcpyHtoD, "cuMemcpyHtoD_v2");
  d.Get(d.LaunchKernel, "cuLaunchKernel");
  ASSERT_EQ(d.Init(0), CUDA_SUCCESS);

  CollectingSink sink;
  std::vector<std::string> lines;
  CuptiRecorderOptions options;
  options.sink = &sink;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  ASSERT_TRUE(StartCuptiRecorder(options).ok()) << (lines.empty() ? "" : lines[0]);

  CUdevice device;
  CUcontext context;
  ASSERT_EQ(d.DeviceGet(&device, 0), CUDA_SUCCESS);
  ASSERT_EQ(d.PrimaryCtxRetain(&context, device), CUDA_SUCCESS);
  ASSERT_EQ(d.CtxSetCurrent(context), CUDA_SUCCESS);
  CUmodule module;
  CUfunction function;
  ASSERT_EQ(d.ModuleLoadData(&module, kPtx), CUDA_SUCCESS);
  ASSERT_EQ(d.ModuleGetFunction(&function, module, "touch_pages"), CUDA_SUCCESS);

  constexpr size_t kBytes = size_t{64} << 20;
  CUdeviceptr managed;
  ASSERT_EQ(d.MemAllocManaged(&managed, kBytes, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  std::memset(reinterpret_cast<void*>(managed), 1, kBytes);  // resident on the host now

  const uint64_t before = NowNs();
  {
    CuptiCorrelationScope scope(4242);
    uint64_t n = kBytes;
    void* params[] = {&managed, &n};
    const unsigned pages = static_cast<unsigned>(kBytes >> 12);
    ASSERT_EQ(
        d.LaunchKernel(function, (pages + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
        CUDA_SUCCESS);
  }
  ASSERT_EQ(d.CtxSynchronize(), CUDA_SUCCESS);
  CUdeviceptr device_buffer;
  std::vector<char> host(1 << 20, 3);
  ASSERT_EQ(d.MemAlloc(&device_buffer, host.size()), CUDA_SUCCESS);
  {
    CuptiCorrelationScope scope(4343);
    ASSERT_EQ(d.MemcpyHtoD(device_buffer, host.data(), host.size()), CUDA_SUCCESS);
  }
  ASSERT_EQ(d.CtxSynchronize(), CUDA_SUCCESS);
  const uint64_t after = NowNs();
  ASSERT_TRUE(StopCuptiRecorder(absl::Seconds(10)).ok());

  const trace::KernelTimeRecord* kernel = nullptr;
  const trace::KernelTimeRecord* copy = nullptr;
  for (const trace::KernelTimeRecord& t : sink.times) {
    if (t.correlation_id == 4242 && t.activity == trace::Activity::kKernel) kernel = &t;
    if (t.correlation_id == 4343 && t.activity == trace::Activity::kMemcpy) copy = &t;
  }
  ASSERT_NE(kernel, nullptr) << sink.times.size() << " device records, none for the launch";
  EXPECT_LT(kernel->start_ns, kernel->end_ns);
  EXPECT_GE(kernel->start_ns, before);  // on the trace clock (CLOCK_MONOTONIC)
  EXPECT_LE(kernel->end_ns, after);
  ASSERT_NE(copy, nullptr);
  EXPECT_LE(kernel->end_ns, copy->start_ns);

  size_t faults = 0, migrated = 0;
  for (const trace::UvmCounterRecord& u : sink.uvm) {
    const bool inside = u.address >= managed && u.address < managed + kBytes;
    if (u.kind == trace::UvmKind::kGpuPageFault && inside) ++faults;
    if (u.kind == trace::UvmKind::kMigrateToDevice && inside) migrated += u.bytes;
  }
  EXPECT_GT(faults, 0u) << sink.uvm.size() << " UVM records" << (lines.empty() ? "" : lines[0]);
  EXPECT_GT(migrated, 0u);
  EXPECT_TRUE(GetCuptiRecorderStats().uvm_enabled);
}

}  // namespace
}  // namespace spillway::cupti
