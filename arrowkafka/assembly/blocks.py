"""Large buffers the kernels write into, reused from batch to batch: the decoder's arenas, the
encoder's scratch and output, and the capture reader's pieces, per-packet arrays and frames.

The first write to each 4 KB page of fresh memory costs a page fault, which on a virtual
machine can cost as much as decoding into the page. Arrow's memory pool (mimalloc) hands a
large block back to the system soon after its release, so every batch would pay again.

So blocks of a megabyte or more come from here: this process keeps them, and gives one out again
once nothing refers to it any more (every array and Arrow buffer over a block holds a reference to
it, and CPython's reference count says exactly when the last one is gone). What is kept, in use or
free, is bounded: 256 MB (``KEEP_BYTES``), or four times the largest block the process has made,
whichever is more, up to 1 GiB (``KEEP_MOST``: input can claim sizes), so that the blocks of one big
batch all stay (the caller's decoded input, the encoder's arenas, its output). Past the bound a
block is new memory, freed with its last reference. Encoding 100,000 Produce v9 bodies (220 MB) took
three blocks of 208-211 MB, and under a bound of 256 MB alone one of them was new memory on every
call, 100 ms of page faults (775 against 4,532 MB/s, 2026-11-29). A capture's or a log segment's
largest block is 32 MB, so for them the bound is 256 MB (peak RSS as before:
bench/segments_memory.py). Smaller sizes come from Arrow's pool.
Memory from a reused block is not zeroed: the kernels write every byte they expose, and
the capture reader fills its arrays before the kernels write into them.

A new block is an anonymous mapping of its own, in 4 KiB pages: numpy asks the kernel for
2 MiB pages for arrays of 4 MB or more, which on a virtual machine whose memory the host backs
only once it is touched (this one) cost 2 ms a MB whenever the guest hands out a huge page
it had not used before: a second Metadata v12 decode of 300 bodies in a fresh process (its
16 MB of output new memory, as the first result is kept) took 31.8-40.7 ms in five of six
processes and 10.3 in one, and 12.5-14 ms in six of six with 4 KiB pages; the process's first
encode 41-47 ms against 20-24 (2026-11-29). Where the huge pages are backed already, they
are faster (that decode 10.3 ms against 13-14): a few ms per 16 MB given up, for never 30.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
import tracemalloc
import weakref

import numpy as np
import pyarrow as pa

__all__ = ["KEEP_BYTES", "array", "block", "fresh"]

SMALLEST = 1 << 20  # below this, Arrow's pool (its small blocks stay in its own pages)
KEEP_BYTES = 256 << 20  # blocks kept, in use or free, in all ...
KEEP_LARGEST = 4  # ... or this many times the largest block made so far, whichever is more ...
KEEP_MOST = 1 << 30  # ... but never more than this: a block sized from a length the input claims
# (a snappy block's preamble, before a byte is decompressed) may be large and never written
_largest = 0
_GRAIN = 1 << 20  # block sizes are whole megabytes, so batches of about one size share them

_kept: list[np.ndarray] = []
_lock = threading.Lock()


def _free(i: int) -> bool:
    # the only references left: the list's and getrefcount's argument
    return sys.getrefcount(_kept[i]) <= 2


def fresh(size: int) -> np.ndarray:
    """``size`` bytes of new memory (see above), freed when the last array over it goes; not
    kept (``block`` keeps what it maps; the benchmarks map their new memory here too)."""
    if not hasattr(mmap, "MAP_ANONYMOUS"):  # (not a POSIX system)
        return np.empty(size, np.uint8)
    try:
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError as e:  # (as np.empty would say it)
        raise MemoryError(f"cannot map {size} bytes: {e.strerror}") from None
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # small pages also where huge ones are the default
        m.madvise(mmap.MADV_NOHUGEPAGE)
    out = np.frombuffer(m, np.uint8)
    _traced(out)
    return out


# numpy's tracemalloc domain: a block is a numpy array's memory, as np.empty's was
_NUMPY_DOMAIN = 389047
_TRACK = getattr(ctypes.pythonapi, "PyTraceMalloc_Track", None) if hasattr(ctypes, "pythonapi") else None
_UNTRACK = getattr(ctypes.pythonapi, "PyTraceMalloc_Untrack", None) if _TRACK is not None else None


def _traced(out: np.ndarray) -> None:
    """``tracemalloc`` counts the new mapping while it lives, as it counts numpy's own
    allocations: a test that holds what a decode allocates to a bound sees blocks too."""
    if _TRACK is None or _UNTRACK is None or not tracemalloc.is_tracing():
        return
    ptr = ctypes.c_size_t(out.ctypes.data)
    _TRACK(ctypes.c_uint(_NUMPY_DOMAIN), ptr, ctypes.c_size_t(len(out)))
    weakref.finalize(out, _UNTRACK, ctypes.c_uint(_NUMPY_DOMAIN), ptr)


def block(nbytes: int) -> np.ndarray:
    """A writable uint8 array of ``nbytes`` (contents undefined)."""
    global _largest
    if nbytes < SMALLEST:
        return np.frombuffer(pa.allocate_buffer(nbytes), np.uint8)
    with _lock:
        fits = [i for i in range(len(_kept)) if nbytes <= len(_kept[i]) <= 2 * nbytes and _free(i)]
        if fits:
            return _kept[min(fits, key=lambda i: len(_kept[i]))][:nbytes]
        size = -(-nbytes // _GRAIN) * _GRAIN
        largest = max(_largest, size)
        bound = max(KEEP_BYTES, min(KEEP_LARGEST * largest, KEEP_MOST))
        held = sum(len(b) for b in _kept)
        free = [i for i in range(len(_kept)) if _free(i)] if held + size > bound else []
        drop = set()
        for i in sorted(free, key=lambda i: len(_kept[i]), reverse=True):  # room: free ones go
            if held + size <= bound:
                break
            held -= len(_kept[i])
            drop.add(i)
        _kept[:] = [_kept[i] for i in range(len(_kept)) if i not in drop]
        new = fresh(size)
        _largest = largest  # (once the system gave it: a size it refused raises no bound)
        if held + size <= bound:
            _kept.append(new)
        return new[:nbytes]


def array(shape: int | tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """A writable array of ``shape`` and ``dtype`` over a block (contents undefined)."""
    dt = np.dtype(dtype)
    return block(int(np.prod(shape)) * dt.itemsize).view(dt).reshape(shape)
