"""The CUDA driver API by ctypes, for the GPU check's measuring scripts (gpu_bandwidth.py,
gpu_call_costs.py): libcuda.so.1 itself, no framework and no wrapper's deprecated forms. Each call
that fails raises DriverError naming the call and the driver's error name."""

import ctypes

CU_MEM_ATTACH_GLOBAL = 1
CU_STREAM_NON_BLOCKING = 1
CU_MEMHOSTALLOC_PORTABLE = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_LOCATION_TYPE_HOST = 2
CU_DEVICE_CPU = -1
CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3
CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION = 4


class DriverError(Exception):
    pass


class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


def location(to_device):
    """Device 0, or the host."""
    return CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE if to_device else CU_MEM_LOCATION_TYPE_HOST, 0)


class Driver:
    """The few driver calls the scripts need. Raises OSError when libcuda.so.1 cannot be loaded."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.version = 0

    def has(self, name):
        return hasattr(self.lib, name)

    def call(self, name, *args):
        result = getattr(self.lib, name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(text))
            raise DriverError(f"{name}: {text.value.decode() if text.value else result}")

    def start(self):
        """cuInit, device 0's primary context made current, and a non-blocking stream."""
        self.call("cuInit", 0)
        version = ctypes.c_int()
        self.call("cuDriverGetVersion", ctypes.byref(version))
        self.version = version.value
        device = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(device), 0)
        context = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        self.call("cuCtxSetCurrent", context)
        stream = ctypes.c_void_p()
        self.call("cuStreamCreate", ctypes.byref(stream), CU_STREAM_NON_BLOCKING)
        return stream

    def sync(self, stream):
        self.call("cuStreamSynchronize", stream)

    def free_memory(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        return free.value

    def alloc_managed(self, size):
        pointer = ctypes.c_uint64()
        self.call("cuMemAllocManaged", ctypes.byref(pointer), ctypes.c_size_t(size),
                  CU_MEM_ATTACH_GLOBAL)
        return pointer.value

    def free(self, pointer):
        self.call("cuMemFree_v2", ctypes.c_uint64(pointer))

    def fill(self, pointer, size, stream):
        """Writes every byte on the device (cuMemsetD8Async): every page exists and holds data."""
        self.call("cuMemsetD8Async", ctypes.c_uint64(pointer), ctypes.c_ubyte(1),
                  ctypes.c_size_t(size), stream)

    def prefetch(self, pointer, size, to_device, stream):
        """Managed memory to device 0 or to the host: the CUmemLocation form (CUDA 12.2+), else the
        one with a device ordinal."""
        if self.version >= 12020 and self.has("cuMemPrefetchAsync_v2"):
            self.call("cuMemPrefetchAsync_v2", ctypes.c_uint64(pointer), ctypes.c_size_t(size),
                      location(to_device), ctypes.c_uint(0), stream)
        else:
            self.call("cuMemPrefetchAsync", ctypes.c_uint64(pointer), ctypes.c_size_t(size),
                      ctypes.c_int(0 if to_device else CU_DEVICE_CPU), stream)
