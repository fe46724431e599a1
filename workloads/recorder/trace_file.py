"""Writes a spillway trace (docs/trace-format.md, version 1.2) from Python.

The byte layout of the records the recorder needs: header, interned strings, stream-ordered
allocations and frees, kernel launches with their accesses and access modes, kernel times,
synchronizations and the end record. Little-endian, no padding, each record framed as
(kind u16, flags u16, payload length u32). A path ending in ".gz" is written gzip-compressed
(with no timestamp in the gzip header, so the same recording gives the same bytes).
"""

import gzip
import struct

FORMAT_MAJOR = 1
FORMAT_MINOR = 2
MAGIC = b"SPWTRACE"
MAX_PAYLOAD_BYTES = 16 << 20

KIND_HEADER = 1
KIND_STRING = 2
KIND_ALLOC = 5
KIND_FREE = 6
KIND_LAUNCH = 7
KIND_SYNCHRONIZE = 10
KIND_KERNEL_TIME = 13
KIND_END = 16

ALLOC_ASYNC = 2          # alloc kind: stream-ordered (cuMemAllocAsync)
SYNC_CONTEXT = 0         # synchronize what: the whole context (cuCtxSynchronize)
ACTIVITY_KERNEL = 0      # kernel time activity
SOURCE_EVENTS = 1        # kernel time source: timed by events, not CUPTI

MODE_READ = 1
MODE_WRITE = 2           # overwritten without being read
MODE_READ_WRITE = 3

# Fixed-width parts of the payloads, in field order ("<": little-endian, no padding).
_FRAME = struct.Struct("<HHI")
_ALLOC = struct.Struct("<QIBQQQQQ")     # time, thread, kind, address, bytes, stream, site, id
_FREE = struct.Struct("<QIQQQ")         # time, thread, address, allocation id, stream
_LAUNCH_HEAD = struct.Struct("<QIQQI3I3IIQ")  # ... shared-memory bytes, correlation id
_ACCESS = struct.Struct("<QQQ")         # allocation id, offset, bytes
_SYNC = struct.Struct("<QQIBQ")         # time, end, thread, what, handle
_KERNEL_TIME = struct.Struct("<QQQIQBB")  # correlation, start, end, device, stream, activity, src
_END = struct.Struct("<QQQ")            # end time, records written before, records dropped
_U32 = struct.Struct("<I")
_FLUSH_BYTES = 1 << 20  # records are gathered and written in pieces of about this size


def _str(text):
    data = text.encode("utf-8")
    return _U32.pack(len(data)) + data


class TraceFile:
    """A trace being written: call the record methods in file order, then close().

    Counts the records it writes, so the end record carries the count the reader checks.
    """

    def __init__(self, path, compress=None):
        """compress: gzip the file; None: if the path ends in ".gz"."""
        self._raw = open(path, "wb")
        if compress is None:
            compress = str(path).endswith(".gz")
        if compress:
            self._out = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, mtime=0)
        else:
            self._out = self._raw
        self._records = 0
        self._pending = bytearray(MAGIC + struct.pack("<HHI", FORMAT_MAJOR, FORMAT_MINOR, 16))

    def _record(self, kind, payload):
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"a kind {kind} record of {len(payload)} bytes is over the 16 MiB "
                             "payload limit")
        self._pending += _FRAME.pack(kind, 0, len(payload))
        self._pending += payload
        self._records += 1
        if len(self._pending) >= _FLUSH_BYTES:
            self._out.write(self._pending)
            self._pending.clear()

    def header(self, job, device_name, spillway_version, device_memory_bytes=0, start_ns=0,
               start_unix_ns=0, pid=0, cuda_version="", driver_version=""):
        payload = b"".join([_str(job), _str(device_name), _str(cuda_version),
                            _str(driver_version), _str(spillway_version),
                            struct.pack("<QQQI", device_memory_bytes, start_ns, start_unix_ns,
                                        pid)])
        self._record(KIND_HEADER, payload)

    def string(self, string_id, text):
        self._record(KIND_STRING, _U32.pack(string_id) + _str(text))

    def alloc(self, time_ns, thread, address, nbytes, stream, allocation_id, kind=ALLOC_ASYNC,
              call_site=0):
        self._record(KIND_ALLOC, _ALLOC.pack(time_ns, thread, kind, address, nbytes, stream,
                                             call_site, allocation_id))

    def free(self, time_ns, thread, address, allocation_id, stream):
        self._record(KIND_FREE, _FREE.pack(time_ns, thread, address, allocation_id, stream))

    def launch(self, time_ns, thread, stream, function, function_name, correlation_id,
               accesses, modes, grid=(1, 1, 1), block=(1, 1, 1), shared_memory_bytes=0):
        """accesses: (allocation id, offset, bytes) triples; modes: one MODE_* per access."""
        if len(modes) != len(accesses):
            raise ValueError(f"{len(modes)} access modes for {len(accesses)} accesses")
        parts = [_LAUNCH_HEAD.pack(time_ns, thread, stream, function, function_name, *grid,
                                   *block, shared_memory_bytes, correlation_id),
                 _U32.pack(len(accesses))]
        parts.extend(_ACCESS.pack(*access) for access in accesses)
        parts.append(_U32.pack(len(modes)) + bytes(modes))
        self._record(KIND_LAUNCH, b"".join(parts))

    def kernel_time(self, correlation_id, start_ns, end_ns, stream, device=0,
                    activity=ACTIVITY_KERNEL, source=SOURCE_EVENTS):
        self._record(KIND_KERNEL_TIME, _KERNEL_TIME.pack(correlation_id, start_ns, end_ns, device,
                                                         stream, activity, source))

    def synchronize(self, time_ns, end_ns, thread, what=SYNC_CONTEXT, handle=0):
        self._record(KIND_SYNCHRONIZE, _SYNC.pack(time_ns, end_ns, thread, what, handle))

    def close(self, end_ns, dropped=0):
        """Writes the end record (the count of every record before it) and closes the file."""
        self._pending += _FRAME.pack(KIND_END, 0, _END.size)
        self._pending += _END.pack(end_ns, self._records, dropped)
        self._out.write(self._pending)
        self._pending.clear()
        if self._out is not self._raw:
            self._out.close()
        self._raw.close()

    def abandon(self):
        """Closes the file without an end record (the caller removes it)."""
        if self._out is not self._raw:
            self._out.close()
        self._raw.close()

    @property
    def records_written(self):
        return self._records
