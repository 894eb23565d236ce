"""The few CUDA driver calls pycuda does not expose, through ctypes on libcuda.

pycuda (2026.1) has no way to record an event on a stream it did not create, no stream capture
(CUDA graphs), no pointer attributes and no primary-context state; the runtime needs each of them
once. The calls made on every inference (event record and wait, copies, synchronize, graph launch)
come through here too: declared once, each costs a fraction of a microsecond, pycuda's one to two. The driver library is the one pycuda itself loaded, so there is nothing more to install.
Every call is checked: a failing one raises `DriverError` with CUDA's error name.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

# CUDA driver API constants (cuda.h).
CU_EVENT_DISABLE_TIMING = 0x2
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
CU_MEMORYTYPE_HOST = 1
CU_MEMORYTYPE_DEVICE = 2
CU_MEMORYTYPE_UNIFIED = 4
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NOT_READY = 600


class DriverError(RuntimeError):
    """A CUDA driver call failed; `code` is CUresult."""

    def __init__(self, call: str, code: int, name: str):
        super().__init__(f"{call} failed: {name} ({code})")
        self.code = code


@functools.cache
def libcuda() -> ctypes.CDLL:
    """Return the CUDA driver library (libcuda.so.1), loaded once."""
    name = "libcuda.so.1"
    try:
        return ctypes.CDLL(name)
    except OSError:
        found = ctypes.util.find_library("cuda")
        if found is None:
            raise
        return ctypes.CDLL(found)


def _call(name: str, *args) -> None:
    _check(name, getattr(libcuda(), name)(*args))


def _check(name: str, code: int) -> None:
    if code != 0:
        text = ctypes.c_char_p()
        libcuda().cuGetErrorName(code, ctypes.byref(text))
        raise DriverError(name, code, (text.value or b"?").decode())


@functools.cache
def _typed(name: str, *argtypes):
    """Return libcuda's `name` declared with `argtypes`, so that the per-inference calls pass plain ints
    (building a ctypes object per argument costs about a microsecond a call). ctypes releases the GIL
    during each call."""
    function = getattr(libcuda(), name)
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


_P = ctypes.c_void_p  # a handle or a device/host address


@functools.cache
def _symbol(*names: str) -> str:
    """Return the first of `names` libcuda exports (versioned entry points first)."""
    lib = libcuda()
    for name in names:
        if hasattr(lib, name):
            return name
    raise DriverError(names[0], -1, "not exported by this driver")


# Streams and events -------------------------------------------------------------------------------

def _handle(pointer: ctypes.c_void_p) -> int:
    """Return the handle a successful driver call wrote into `pointer` (NULL reads as 0)."""
    return pointer.value or 0


def event_create() -> int:
    """Return a new CUevent without timing (the cheapest kind, for ordering only)."""
    event = ctypes.c_void_p()
    _call("cuEventCreate", ctypes.byref(event), ctypes.c_uint(CU_EVENT_DISABLE_TIMING))
    return _handle(event)


class Event:
    """A CUevent without timing, to order and wait on; `destroy()` frees it (nothing else does)."""

    def __init__(self):
        self.handle = event_create()

    def record(self, stream: int) -> None:
        event_record(self.handle, stream)

    def query(self) -> bool:
        """Whether the work before the last record has finished."""
        return event_done(self.handle)

    def synchronize(self) -> None:
        event_synchronize(self.handle)

    def destroy(self) -> None:
        event_destroy(self.handle)


def event_destroy(event: int) -> None:
    _call(_symbol("cuEventDestroy_v2", "cuEventDestroy"), ctypes.c_void_p(event))


def stream_wait(consumer: int, producer: int, event: int) -> None:
    """Make stream `consumer` wait for the work queued so far on stream `producer` (no host wait).

    `producer` may be CUDA's legacy default stream (1) or the per-thread default stream (2), as
    the CUDA Array Interface v3 names them.
    """
    event_record(event, producer)
    _check("cuStreamWaitEvent", _typed("cuStreamWaitEvent", _P, _P, ctypes.c_uint)(consumer, event, 0))


def event_record(event: int, stream: int) -> None:
    _check("cuEventRecord", _typed("cuEventRecord", _P, _P)(event, stream))


def event_done(event: int) -> bool:
    """Return whether the work before the event's last record has finished (no wait)."""
    code = _typed("cuEventQuery", _P)(event)
    if code == CUDA_ERROR_NOT_READY:
        return False
    _check("cuEventQuery", code)
    return True


def event_synchronize(event: int) -> None:
    _check("cuEventSynchronize", _typed("cuEventSynchronize", _P)(event))


def stream_synchronize(stream: int) -> None:
    _check("cuStreamSynchronize", _typed("cuStreamSynchronize", _P)(stream))


# Copies --------------------------------------------------------------------------------------------

def copy_to_device(device: int, host: int, nbytes: int, stream: int) -> None:
    """Queue a copy of `nbytes` from host address `host` (pinned, for it to be asynchronous) to `device`."""
    _check("cuMemcpyHtoDAsync", _typed(_symbol("cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync"), _P, _P, ctypes.c_size_t, _P)(
        device, host, nbytes, stream))


def copy_to_host(host: int, device: int, nbytes: int, stream: int) -> None:
    _check("cuMemcpyDtoHAsync", _typed(_symbol("cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync"), _P, _P, ctypes.c_size_t, _P)(
        host, device, nbytes, stream))


# Pointers -----------------------------------------------------------------------------------------

def pointer_device(pointer: int) -> int | None:
    """Return the ordinal of the device `pointer` lives on, or None if CUDA does not know it."""
    kind = ctypes.c_uint()
    try:
        _call("cuPointerGetAttribute", ctypes.byref(kind), ctypes.c_int(CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
              ctypes.c_uint64(pointer))
    except DriverError as exc:
        if exc.code == CUDA_ERROR_INVALID_VALUE:
            return None  # not memory CUDA allocated or registered
        raise
    ordinal = ctypes.c_int()
    _call("cuPointerGetAttribute", ctypes.byref(ordinal), ctypes.c_int(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL),
          ctypes.c_uint64(pointer))
    return ordinal.value


# CUDA graphs --------------------------------------------------------------------------------------

def begin_capture(stream: int) -> None:
    _call(_symbol("cuStreamBeginCapture_v2", "cuStreamBeginCapture"), ctypes.c_void_p(stream),
          ctypes.c_int(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))


def end_capture(stream: int) -> int:
    """Return the CUgraph captured on `stream` since `begin_capture`."""
    graph = ctypes.c_void_p()
    _call("cuStreamEndCapture", ctypes.c_void_p(stream), ctypes.byref(graph))
    return _handle(graph)


def graph_instantiate(graph: int) -> int:
    executable = ctypes.c_void_p()
    _call("cuGraphInstantiateWithFlags", ctypes.byref(executable), ctypes.c_void_p(graph), ctypes.c_ulonglong(0))
    return _handle(executable)


def graph_launch(executable: int, stream: int) -> None:
    _check("cuGraphLaunch", _typed("cuGraphLaunch", _P, _P)(executable, stream))


def graph_destroy(graph: int, executable: int | None) -> None:
    if executable:
        _call("cuGraphExecDestroy", ctypes.c_void_p(executable))
    _call("cuGraphDestroy", ctypes.c_void_p(graph))


# Contexts -----------------------------------------------------------------------------------------

def current_context() -> int:
    """Return the CUcontext current in this thread (0 when none)."""
    context = ctypes.c_void_p()
    _check("cuCtxGetCurrent", _typed("cuCtxGetCurrent", ctypes.POINTER(ctypes.c_void_p))(ctypes.byref(context)))
    return context.value or 0


def pop_current() -> int:
    """Pop this thread's current context off the driver's stack; return it."""
    context = ctypes.c_void_p()
    _call(_symbol("cuCtxPopCurrent_v2", "cuCtxPopCurrent"), ctypes.byref(context))
    return context.value or 0


def primary_context_active(device: int = 0) -> bool:
    """Return whether anyone in this process holds a retain on `device`'s primary context."""
    flags, active = ctypes.c_uint(), ctypes.c_int()
    _call("cuDevicePrimaryCtxGetState", ctypes.c_int(device), ctypes.byref(flags), ctypes.byref(active))
    return bool(active.value)
