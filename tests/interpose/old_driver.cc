// A driver from before CUDA 12 as far as symbol lookup goes, for no_driver_test: a libcuda.so.1
// that exports cuInit, cuDriverGetVersion (11.8) and cuGetProcAddress (which finds nothing), and
// none of the later entry points spillway hooks (cuCtxSynchronize_v2, cuLibraryUnload, ...).
extern "C" {

__attribute__((visibility("default"))) int cuInit(unsigned int flags) {
  return flags == 0 ? 0 : 1;  // CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE
}

__attribute__((visibility("default"))) int cuDriverGetVersion(int* version) {
  if (version == nullptr) return 1;
  *version = 11080;
  return 0;
}

__attribute__((visibility("default"))) int cuGetProcAddress(const char*, void** pfn, int,
                                                            unsigned long long) {
  if (pfn != nullptr) *pfn = nullptr;
  return 500;  // CUDA_ERROR_NOT_FOUND
}

}  // extern "C"
