"""Turns the aten ops of a PyTorch program running on the CPU into a spillway trace.

OpRecorder is a TorchDispatchMode: it sees every aten op below autograd, with the tensors it reads
and the tensors it makes, in the order the program runs them, backward pass included. From them
it writes what a CUDA job running the same program would show a stream-ordered allocator and the
driver:

- one allocation per tensor storage when the storage comes into being, freed when PyTorch frees
  the storage (views share their base's allocation);
- one launch per op that computes, with the byte range of every storage it touches and whether
  it reads it, overwrites it or both, and the op's time under the H100 PCIe model (op_time.py);
- a context synchronize at the end of each training step (end_step()).

How a storage's end is seen: each allocation holds a weak reference to its c10::StorageImpl
(UntypedStorage._weak_ref), which expires when the last tensor of the storage goes, whoever held
it (Python, autograd's saved variables, the optimizer). The recorder checks its live allocations
before every op and at the end of each step, so a free lands between the op that dropped the
last reference and the next op, where the caching allocator would see it.

Host and device. Everything runs on the CPU, so where a tensor would live in the CUDA job is
decided by how it came to be:
- what the program makes under on_host() (the model's construction, each batch as a data loader
  makes it) is host memory until to_device() copies it (model.cuda(), batch.cuda()): an
  allocation and a launch of aten::_to_copy that writes it, timed at PCIe rates;
- what an op makes from device tensors, or from no tensors at all (zeros, randn, arange), is
  device memory;
- a storage first seen as an op's input was made outside any op (torch.tensor(), numpy): host
  memory, like the optimizer's step counters; an op reading only host tensors runs on the host
  and is not recorded, and a one-element host tensor read by a device op is a scalar argument.

Where PyTorch runs an op another way for CUDA tensors and the CUDA way also runs on the CPU, the
recorder takes it: F.dropout is the fused native_dropout while recording. The optimizer's
profiling label (record_function) is switched off: it makes host tensors only.
"""

import contextlib
import gc

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import op_time
import trace_file

STREAM = 1
THREAD = 1
ALIGNMENT = 512             # the stream-ordered pool's granule
ADDRESS_BASE = 1 << 40      # the synthetic device address space starts here
CLOCK_BASE_NS = 1_000_000_000  # the synthetic device clock starts at 1 s (0 means "not recorded")

# Ops that make a storage and run nothing on the device.
_ALLOCATE_ONLY = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                  "aten::new_empty_strided"}
# Ops that change only a tensor's metadata, even though their schema marks `self` as written.
_METADATA_ONLY = {"aten::resize_", "aten::resize_as_", "aten::set_", "aten::as_strided_",
                  "aten::squeeze_", "aten::unsqueeze_", "aten::transpose_", "aten::t_",
                  "aten::detach_", "aten::swapaxes_", "aten::swapdims_"}
# Views whose schema does not say so (they return new tensors sharing the input's storage). Any
# other op that writes nothing and returns only tensors in its inputs' storages is taken for a
# view too (OpRecorder._record_op).
_UNANNOTATED_VIEWS = {"aten::_unsafe_view", "aten::_reshape_alias", "aten::unsafe_split",
                      "aten::unsafe_split_with_sizes", "aten::unsafe_chunk"}
# A device-to-host read of one value (`.item()`): a copy and a wait, not a kernel.
_HOST_READS = {"aten::_local_scalar_dense", "aten::is_nonzero"}
# Arguments an op writes although its schema does not say so (in 1.13): batch norm in training
# updates the running mean and variance in place. Name -> (indices, the `training` argument's).
_UNDECLARED_WRITES = {"aten::native_batch_norm": ((3, 4), 5),
                      "aten::cudnn_batch_norm": ((3, 4), 5),
                      "aten::miopen_batch_norm": ((3, 4), 5)}
# Ops that read only their input's shape and type, never its elements.
_SHAPE_ONLY_INPUTS = {"aten::empty_like", "aten::zeros_like", "aten::ones_like",
                      "aten::full_like", "aten::rand_like", "aten::randn_like",
                      "aten::randint_like"}
# In-place ops that overwrite every element of `self` without reading it.
_OVERWRITE_SELF = {"aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_",
                   "aten::random_", "aten::bernoulli_", "aten::exponential_", "aten::geometric_",
                   "aten::cauchy_", "aten::log_normal_", "aten::copy_"}


def _fnv1a64(text):
    """A kernel's function handle: the same for the same op name in every trace."""
    h = 0xcbf29ce484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h or 1


class _OpInfo:
    """What the recorder needs to know of one aten overload, worked out once from its schema."""

    def __init__(self, func):
        schema = func._schema
        self.name = schema.name
        self.reads_inputs = self.name not in _SHAPE_ONLY_INPUTS
        self.arguments = list(schema.arguments)
        # (argument index, overwritten without being read) for every argument the op writes.
        self.written = []
        for index, argument in enumerate(self.arguments):
            alias = argument.alias_info
            if alias is not None and alias.is_write:
                overwrite = argument.kwarg_only or (index == 0 and self.name in _OVERWRITE_SELF)
                self.written.append((index, overwrite))
        self.undeclared_writes = _UNDECLARED_WRITES.get(self.name)
        returns_view = any(r.alias_info is not None and not r.alias_info.is_write
                           for r in schema.returns)
        if self.name in _ALLOCATE_ONLY:
            self.kind = "allocate"
        elif self.name in _HOST_READS:
            self.kind = "host"
        elif self.name in _METADATA_ONLY or self.name in _UNANNOTATED_VIEWS or (
                returns_view and not self.written):
            self.kind = "view"
        else:
            self.kind = "compute"

    def positional(self, args, kwargs):
        """Every schema argument's value, in schema order (kwargs and defaults filled in)."""
        values = list(args)
        for argument in self.arguments[len(args):]:
            if argument.name in kwargs:
                values.append(kwargs[argument.name])
            else:
                values.append(getattr(argument, "default_value", None))
        return values


class _Allocation:
    """A storage the recorder knows: a device allocation (id not 0), or host memory or a device
    storage of no bytes (id 0, no records)."""

    __slots__ = ("id", "address", "nbytes", "weak", "host")

    def __init__(self, allocation_id, address, nbytes, weak, host):
        self.id = allocation_id
        self.address = address
        self.nbytes = nbytes
        self.weak = weak
        self.host = host


def tensors_in(value):
    """The tensors in a value of nested tuples, lists and dicts."""
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _span(t):
    """(byte offset of t's first element in its storage, bytes from there to its last element,
    whether those bytes are all t's own: no gaps, no element twice)."""
    itemsize = t.element_size()
    if t.numel() == 0:
        return t.storage_offset() * itemsize, 0, True
    extent = 1
    for size, stride in zip(t.shape, t.stride()):
        extent += (size - 1) * stride
    return t.storage_offset() * itemsize, extent * itemsize, extent == t.numel()


class StepStats:
    """What one training step (or, as step 0, the model's move to the device) recorded."""

    def __init__(self, step):
        self.step = step
        self.allocs = 0
        self.frees = 0
        self.launches = 0
        self.op_time_ns = 0
        self.peak_live_bytes = 0

    @property
    def events(self):
        """Allocations, frees and launches: what the engine's step finder counts."""
        return self.allocs + self.frees + self.launches


class _NoRecordFunction(contextlib.nullcontext):
    """Stands in for torch.autograd.profiler.record_function while recording: the optimizer's
    profiling label makes host tensors (a handle and a zeros(1)) that are no device work."""

    def __init__(self, name, args=None):
        super().__init__()


_cpu_dropout = torch.nn.functional.dropout


def _cuda_dropout(input, p=0.5, training=True, inplace=False):
    """F.dropout as it runs on a CUDA tensor: one fused native_dropout with a one-byte mask
    (at::dropout takes that path for CUDA tensors; on the CPU it draws a float mask with
    bernoulli_, scales it and multiplies: three ops and four bytes an element)."""
    if training and not inplace and 0 < p < 1 and input.numel() > 0:
        return torch.native_dropout(input, p, True)[0]
    return _cpu_dropout(input, p, training, inplace)


# What the recorder replaces while it records: (module, attribute, stand-in).
_STAND_INS = [(torch.autograd.profiler, "record_function", _NoRecordFunction),
              (torch.nn.functional, "dropout", _cuda_dropout)]


class OpRecorder(TorchDispatchMode):
    """Records the ops run under it into a TraceFile (see the module's docstring).

    Use: `with recorder:` around the whole program; on_host() around what runs on the host;
    to_device() for what the program copies to the device; end_step() after each training step;
    finish() at the end.
    """

    def __init__(self, trace):
        super().__init__()
        self._trace = trace
        self._live = {}             # StorageImpl address -> _Allocation, device and host
        self._next_id = 1
        self._next_address = ADDRESS_BASE
        self._clock = CLOCK_BASE_NS
        self._correlation = 0
        self._kernels = {}          # kernel name -> (string id, function handle)
        self._ops = {}              # OpOverload -> _OpInfo
        self._host_depth = 0
        self._saved = []
        self.live_bytes = 0
        self.peak_live_bytes = 0
        self.steps = [StepStats(0)]
        self.host_tensors_read = 0  # host tensors of more than one element read by device ops

    def __enter__(self):
        self._saved = [(module, name, getattr(module, name)) for module, name, _ in _STAND_INS]
        for module, name, stand_in in _STAND_INS:
            setattr(module, name, stand_in)
        return super().__enter__()

    def __exit__(self, *exc):
        for module, name, original in self._saved:
            setattr(module, name, original)
        return super().__exit__(*exc)

    # --- storages ---------------------------------------------------------------------------

    def _key(self, t):
        return t._storage()._cdata

    def _allocate(self, key, storage, host):
        weak = storage._weak_ref()
        nbytes = storage.nbytes()
        if host or nbytes == 0:
            # Host memory, or a device storage with no bytes yet (resize_ may give it some):
            # known, but nothing to allocate.
            self._live[key] = _Allocation(0, 0, 0, weak, host)
            return self._live[key]
        allocation = _Allocation(self._next_id, self._next_address, nbytes, weak, False)
        self._next_id += 1
        self._next_address += max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT)
        self._live[key] = allocation
        self._trace.alloc(self._clock, THREAD, allocation.address, nbytes, STREAM, allocation.id)
        self.live_bytes += nbytes
        self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        step = self.steps[-1]
        step.allocs += 1
        step.peak_live_bytes = max(step.peak_live_bytes, self.live_bytes)
        return allocation

    def _release(self, key, allocation):
        del self._live[key]
        torch.UntypedStorage._free_weak_ref(allocation.weak)
        if allocation.id == 0:
            return
        self._trace.free(self._clock, THREAD, allocation.address, allocation.id, STREAM)
        self.live_bytes -= allocation.nbytes
        self.steps[-1].frees += 1

    def _free_expired(self):
        expired = torch.UntypedStorage._expired
        gone = [(key, a) for key, a in self._live.items() if expired(a.weak)]
        for key, allocation in gone:
            self._release(key, allocation)

    def _is_host(self, t):
        """Whether t is in host memory; registers a storage not seen before as host memory."""
        key = self._key(t)
        allocation = self._live.get(key)
        if allocation is None:
            allocation = self._allocate(key, t._storage(), host=True)
        return allocation.host

    def _device_allocation(self, t):
        """The allocation of t's device storage, made now if the storage is new (an op's fresh
        result) or has been resized since; None for a host tensor or one with no bytes."""
        storage = t._storage()
        key = storage._cdata
        allocation = self._live.get(key)
        if allocation is not None and allocation.host:
            return None
        if allocation is not None and allocation.nbytes != storage.nbytes():
            self._release(key, allocation)      # resize_ grew it: a new block, as on a device
            allocation = None
        if allocation is None:
            allocation = self._allocate(key, storage, host=False)
        return allocation if allocation.id != 0 else None

    # --- host and device --------------------------------------------------------------------

    @contextlib.contextmanager
    def on_host(self):
        """Runs its body on the host: its ops are not recorded and what they make is host
        memory (until to_device())."""
        self._host_depth += 1
        try:
            yield
        finally:
            self._host_depth -= 1

    def to_device(self, tensors):
        """Copies host tensors to the device, as .cuda() does: each host storage becomes a device
        allocation written by an aten::_to_copy launch (timed at PCIe rates)."""
        self._free_expired()
        for t in tensors:
            if not self._is_host(t):
                continue
            key = self._key(t)
            self._release(key, self._live[key])
            allocation = self._allocate(key, t._storage(), host=False)
            if allocation.id != 0:
                self._emit_launch("aten::_to_copy",
                                  [(allocation.id, 0, allocation.nbytes, trace_file.MODE_WRITE)],
                                  op_time.copy_time_ns(allocation.nbytes))

    # --- ops --------------------------------------------------------------------------------

    def _info(self, func):
        info = self._ops.get(func)
        if info is None:
            info = self._ops[func] = _OpInfo(func)
        return info

    def _kernel(self, name):
        """(string id, function handle) of a kernel name; its string record on first use."""
        kernel = self._kernels.get(name)
        if kernel is None:
            kernel = self._kernels[name] = (len(self._kernels) + 1, _fnv1a64(name))
            self._trace.string(kernel[0], name)
        return kernel

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._host_depth:
            return func(*args, **kwargs)
        self._free_expired()
        info = self._info(func)
        inputs = tensors_in((args, kwargs))
        host_inputs = [t for t in inputs if self._is_host(t)]

        result = func(*args, **kwargs)
        outputs = tensors_in(result)

        if inputs and len(host_inputs) == len(inputs):
            # Only host tensors in: the op runs on the host and its results stay there.
            for t in outputs:
                self._is_host(t)
            return result
        if info.kind == "view":
            for t in outputs:
                if self._key(t) not in self._live:
                    self._device_allocation(t)  # (no view makes a storage; should one, it counts)
            return result
        if info.kind == "host":
            return result
        if info.kind == "allocate":
            for t in outputs:
                self._device_allocation(t)
            return result
        self.host_tensors_read += sum(1 for t in host_inputs if t.numel() > 1)
        self._record_op(info, args, kwargs, [t for t in inputs if not self._is_host(t)], outputs)
        return result

    def _record_op(self, info, args, kwargs, device_inputs, outputs):
        values = info.positional(args, kwargs)
        written = {}                            # id(tensor) -> overwritten without being read
        for index, overwrite in info.written:
            for t in tensors_in(values[index]):
                written[id(t)] = overwrite
        if info.undeclared_writes is not None:
            indices, training = info.undeclared_writes
            if values[training]:
                for t in tensors_in([values[i] for i in indices]):
                    written[id(t)] = False
        accesses = {}                           # allocation -> [lo, hi, mode]

        def touch(t, mode):
            allocation = self._device_allocation(t)
            if allocation is None:
                return
            offset, nbytes, dense = _span(t)
            if nbytes == 0:
                return
            if mode == trace_file.MODE_WRITE and not dense:
                mode = trace_file.MODE_READ_WRITE   # the gaps keep what they held
            entry = accesses.get(allocation)
            if entry is None:
                accesses[allocation] = [offset, offset + nbytes, mode]
            else:
                entry[0] = min(entry[0], offset)
                entry[1] = max(entry[1], offset + nbytes)
                entry[2] |= mode

        input_storages = {self._key(t) for t in device_inputs}
        if not written and outputs and all(self._key(t) in input_storages for t in outputs):
            return                  # a view by another name: no new bytes, nothing written
        input_ids = {id(t) for t in device_inputs}
        fresh = [t for t in outputs if id(t) not in input_ids and self._key(t) not in self._live]
        for t in device_inputs:
            if id(t) in written:
                touch(t, trace_file.MODE_WRITE if written[id(t)] else trace_file.MODE_READ_WRITE)
            elif info.reads_inputs:
                touch(t, trace_file.MODE_READ)
        for t in fresh:
            touch(t, trace_file.MODE_WRITE)
        if not accesses:
            return                  # nothing on the device (a 0-element op)

        nbytes = sum((hi - lo) * (2 if mode == trace_file.MODE_READ_WRITE else 1)
                     for lo, hi, mode in accesses.values())
        flops, tensor_cores = op_time.flops_of(info.name, values, outputs)
        ordered = sorted(accesses.items(), key=lambda item: item[0].id)
        self._emit_launch(info.name, [(a.id, lo, hi - lo, mode) for a, (lo, hi, mode) in ordered],
                          op_time.op_time_ns(flops, tensor_cores, nbytes))

    def _emit_launch(self, name, accesses, duration):
        """A launch of `name` touching accesses [(allocation id, offset, bytes, mode)], its
        kernel time on the synthetic device clock, and the clock moved past it."""
        self._correlation += 1
        string_id, handle = self._kernel(name)
        self._trace.launch(self._clock, THREAD, STREAM, handle, string_id, self._correlation,
                           [a[:3] for a in accesses], [a[3] for a in accesses])
        self._trace.kernel_time(self._correlation, self._clock, self._clock + duration, STREAM)
        self._clock += duration
        step = self.steps[-1]
        step.launches += 1
        step.op_time_ns += duration

    # --- steps ------------------------------------------------------------------------------

    def end_step(self, synchronize=True):
        """Ends a training step: frees what the step dropped, then a context synchronize (the
        loop's loss.item()). The next records belong to the next step. The model's setup ends
        with no synchronize (a training loop waits first at its first step's end)."""
        gc.collect()
        self._free_expired()
        if synchronize:
            self._trace.synchronize(self._clock, self._clock, THREAD)
        self.steps.append(StepStats(len(self.steps)))

    def finish(self):
        """Writes the end record. Allocations still live (the model, the optimizer's state) stay
        unfreed, as at a process's exit."""
        self.steps.pop()            # the step begun by the last end_step() has nothing in it
        for allocation in self._live.values():
            torch.UntypedStorage._free_weak_ref(allocation.weak)
        self._live.clear()
        self._trace.close(self._clock)

    @property
    def records_written(self):
        """Records in the trace so far, the header included (after finish(): the end record
        not included)."""
        return self._trace.records_written
