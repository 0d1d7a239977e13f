"""Batch decode: message bodies -> one ``pa.RecordBatch``, in two kernel passes.

plan (cached) -> pass 1 (check and count) -> allocate each buffer once -> pass 2 (fill)
-> assemble (``from_buffers``, zero-copy) -> validate. With ``threads > 1`` the batch is split
into contiguous ranges decoded side by side (the kernel releases the GIL); range k's cursors
start where range k-1's counts end, so the ranges fill disjoint parts of the same buffers.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from arrowkafka.assembly import blocks
from arrowkafka.assembly.arrays import binary_array, empty_table, int64_array, string_array
from arrowkafka.assembly.assemble import VIEW_LIMIT, BatchTooLarge, Buffers, allocate, assemble
from arrowkafka.codegen import promote
from arrowkafka.errors import Corrupt, DecodeError, Truncated
from arrowkafka.ir import MessageSpec
from arrowkafka.kernels import isa
from arrowkafka.kernels.isa import OPS
from arrowkafka.kernels.tiers import kernel_run
from arrowkafka.plan import Plan, compile_plan

__all__ = ["decode_batch", "as_bodies", "byte_ranges", "Ranges"]

ERRORS = ("raise", "null")
KERNELS = ("auto", "interpreter", "specialised")

# kernel error code -> (exception class, reason template)
_REASONS: dict[int, tuple[type[DecodeError], str]] = {
    isa.E_TRUNCATED: (Truncated, "reading {what}: needs {d1} bytes, {d2} left"),
    isa.E_FORGED_COUNT: (
        Truncated,
        "reading {what}: {d1} elements cannot fit in the {d2} bytes left",
    ),
    isa.E_NEGATIVE: (Corrupt, "reading {what}: negative length {d1}"),
    isa.E_NULL: (Corrupt, "reading {what}: null in a field that is not nullable in this version"),
    isa.E_UTF8: (Corrupt, "reading {what}: invalid UTF-8"),
    isa.E_VARINT_LONG: (Corrupt, "reading {what}: varint too long"),
    isa.E_VARINT_BIG: (Corrupt, "reading {what}: varint too big for its type"),
    isa.E_MARKER: (Corrupt, "reading {what}: bad nullable-struct marker {d1}"),
    isa.E_TAG_ORDER: (Corrupt, "reading {what}: tag {d1} after tag {d2} (tags must ascend)"),
    isa.E_TAG_SIZE: (Corrupt, "reading {what}: a tagged field's value does not fill its size"),
    isa.E_TRAILING: (Corrupt, "{d1} bytes left over after the last field"),
    isa.E_LONG_STRING: (
        Corrupt,
        f"reading {{what}}: length {{d1}} is over the {isa.MAX_STRING} bytes a string may hold",
    ),
}
# the same codes, told apart by their details or by where they happened
_VARINT_CUT_SHORT = "reading {what}: varint cut short: needs more than the {d2} bytes left"
_NULL_ELEMENT = "reading {what}: null element in an array (Kafka's arrays never hold one)"


# no room for hops: the kernels note none (a 2-D int64 array, as the kernels take ``hops``)
NO_HOPS = np.zeros((1, 0), np.int64)


class Ranges(NamedTuple):
    """Bodies as byte ranges of one buffer: body i is ``data[starts[i]:ends[i]]``. The capture
    path decodes frames where they lie, with no copy of the bodies into an Arrow array."""

    data: np.ndarray  # uint8
    starts: np.ndarray  # int64
    ends: np.ndarray  # int64

    def body(self, i: int) -> bytes:
        return self.data[int(self.starts[i]) : int(self.ends[i])].tobytes()

    def take(self, rows: np.ndarray) -> Ranges:
        return Ranges(self.data, self.starts[rows], self.ends[rows])


def _kernel_data(data: np.ndarray) -> np.ndarray:
    """``data`` as the kernels take it: uint8, contiguous (the kernels load words and copy by
    raw pointer; a strided view is copied once here), never empty, and read-only (one kernel
    signature: Numba types read-only arrays apart)."""
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 1:
        raise TypeError(f"ranges data must be a 1-D uint8 array, not {data.ndim}-D {data.dtype}")
    data = np.ascontiguousarray(data)
    view = data.view() if len(data) else np.zeros(1, np.uint8)
    view.flags.writeable = False
    return view


def _ranges_input(r: Ranges) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = _kernel_data(r.data)
    # (contiguous: the kernels read them through bare pointers, which know no strides)
    starts, ends = np.ascontiguousarray(r.starts, np.int64), np.ascontiguousarray(r.ends, np.int64)
    if len(starts) != len(ends):
        raise ValueError("ranges: starts and ends differ in length")
    if len(starts) and (starts.min() < 0 or ends.max() > len(r.data) or np.any(ends < starts)):
        raise ValueError("ranges point outside their data")
    return data, starts, ends


def as_bodies(bodies: Any) -> pa.Array:
    """A ``pa.BinaryArray``/``LargeBinaryArray`` (one chunk) from any accepted input."""
    if isinstance(bodies, pa.ChunkedArray):
        bodies = bodies.combine_chunks() if bodies.num_chunks != 1 else bodies.chunk(0)
    if isinstance(bodies, pa.Array):
        if pa.types.is_binary_view(bodies.type):  # (what views=True gives out): copied once
            return bodies.cast(pa.large_binary())
        if not (pa.types.is_binary(bodies.type) or pa.types.is_large_binary(bodies.type)):
            raise TypeError(f"message bodies must be binary or large_binary, not {bodies.type}")
        return bodies
    if isinstance(bodies, (bytes, bytearray, memoryview, str)):
        raise TypeError(
            f"message bodies must be a sequence of bytes or a binary array, not one {type(bodies).__name__}"
            " object (wrap it in a list)"
        )
    if isinstance(bodies, np.ndarray) and bodies.dtype.kind in "SU":  # fixed width: lengths are lost
        raise TypeError(
            f"message bodies cannot be a numpy array of dtype {bodies.dtype}: numpy drops each value's"
            " trailing zero bytes; give a list of bytes or a binary array"
        )
    try:
        values = list(bodies)
    except TypeError:
        raise TypeError(
            f"message bodies must be a sequence of bytes or a binary array, not {type(bodies).__name__}"
        ) from None
    for i, v in enumerate(values):  # bytes-like (the buffer protocol) or None: an int n is not n bytes
        if v is not None and not isinstance(v, bytes):
            try:
                memoryview(v)
            except TypeError:
                raise TypeError(
                    f"message bodies must be bytes or None; element {i} is {type(v).__name__}"
                ) from None
    return binary_array(values)


def _input(bodies: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, starts, ends) over the array's own buffers: no copy of the bytes."""
    n = len(bodies)
    _, off_buf, data_buf = bodies.buffers()
    otype = np.int64 if pa.types.is_large_binary(bodies.type) else np.int32
    offsets = np.frombuffer(off_buf, otype, count=n + 1, offset=bodies.offset * np.dtype(otype).itemsize)
    data = _kernel_data(np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8))
    starts = offsets[:-1].astype(np.int64)
    ends = offsets[1:].astype(np.int64)
    if n and (starts[0] < 0 or ends[-1] > data.size or np.any(ends < starts)):
        raise ValueError("binary array offsets point outside its data")
    if bodies.null_count:  # Arrow lets a null's slot span bytes (pc.if_else leaves some): not its value
        nulls = bodies.is_null().to_numpy(zero_copy_only=False)
        ends[nulls] = starts[nulls]
    return data, starts, ends


def byte_ranges(bodies: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, starts, ends) of any accepted input, ``Ranges`` included: value i is
    ``data[starts[i]:ends[i]]``, read where it lies. A null element reads as empty."""
    if isinstance(bodies, Ranges):
        return _ranges_input(bodies)
    return _input(as_bodies(bodies))


def _what(plan: Plan, pc: int, run_row: int) -> str:
    op, node = OPS[int(plan.code[pc][0])], int(plan.code[pc][1])
    if op == "FIXED_RUN":
        node = int(plan.runs[run_row][0])
    elif op in ("TAGS", "TAGGED", "SECTION_END", "RET"):
        return "tagged fields"
    elif op == "OPTBUF":
        return "optional fields"
    elif op == "END":
        return "message"
    f = plan.nodes[node].field if node >= 0 else None
    if f is None:
        return op.lower()
    if plan.paths[pc].endswith("[]") and f.struct is None:  # one element of a primitive array
        return f.element
    return f.type


def _error(
    plan: Plan,
    code: int,
    msg: int,
    offset: int,
    pc: int,
    d1: int,
    d2: int,
    idx: list[int],
    size: int,
    run_row: int,
) -> DecodeError:
    cls, template = _REASONS[code]
    if code == isa.E_TRUNCATED and d1 == 0:  # a varint: how many bytes it needs is unknown
        template = _VARINT_CUT_SHORT
    elif code == isa.E_NULL and plan.paths[pc].endswith("[]"):  # a list's element
        template = _NULL_ELEMENT
    return cls(
        template.format(what=_what(plan, pc, run_row), d1=d1, d2=d2),
        path=plan.indexed_path(pc, run_row, idx),
        message_index=msg,
        offset=offset,
        size=size,
        message=plan.name,
        version=plan.version,
    )


class _Run:
    """The arguments every kernel call shares."""

    def __init__(
        self,
        plan: Plan,
        data: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        null_mode: bool,
    ):
        self.plan, self.data, self.starts, self.ends, self.null_mode = plan, data, starts, ends, null_mode
        self.fn: Any = None
        self.generated = False
        self._stubs: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]] | None = None
        n = len(starts)
        self.bad = np.zeros(n, np.uint8)
        self.reject_code = np.zeros(n, np.int32)
        self.reject_offset = np.zeros(n, np.int64)
        self.reject_pc = np.zeros(n, np.int32)

    def use(self, kernel: str) -> None:
        """Pick the kernel: the interpreter (compiled, or plain Python for a process's first few
        kilobytes), or the one generated for the plan (at once, or under "auto" once ready)."""
        nbytes = int(self.ends.sum() - self.starts.sum())
        if kernel == "specialised":
            # (imported when first asked for: a process that never compiles a kernel does not
            # load the code generators)
            from arrowkafka.codegen import decode as decode_codegen

            self.fn = decode_codegen.generated_decoder(self.plan)
        elif kernel == "auto":
            self.fn = promote.auto("decode", self.plan, nbytes, lambda: self.args(0, 0, True, None, None))
        self.generated = self.fn is not None  # (only the generated kernels note hops)
        self.fn = self.fn or kernel_run(nbytes)

    def args(
        self,
        first: int,
        last: int,
        fill: bool,
        counts: np.ndarray | None,
        dcounts: np.ndarray | None,
        bufs: Buffers | None = None,
        hops: np.ndarray = NO_HOPS,
        hop_from: np.ndarray | None = None,
    ) -> tuple[Any, ...]:
        """A kernel call's arguments (``bufs=None``: pass 1, or a call that decodes nothing;
        ``hops``: see ``_hops``, and ``hop_from`` the cursors the range started at)."""
        p = self.plan
        nn = len(p.nodes)
        if counts is None or dcounts is None:
            counts = dcounts = np.zeros(nn, np.int64)
        if hop_from is None:
            hop_from = np.zeros(nn, np.int64)
        if bufs is None:  # pass 1 writes nothing: bases say "no buffer", arenas are stubs
            if self._stubs is None:
                z64, z8, z32 = np.zeros(nn, np.int64), np.zeros(8, np.uint8), np.zeros(1, np.int32)
                views = (z8, z8.view(np.int16), z8.view(np.int32), z8.view(np.int64), z32, z8, z8)
                self._stubs = ((z64, z64, z64, np.full(nn, -1, np.int64)), views)
            bases, arenas = self._stubs
        else:
            bases = (bufs.fixed_base, bufs.off_base, bufs.data_base, bufs.valid_base)
            arenas = (*bufs.views(), bufs.offs, bufs.bytes_out, bufs.valid)
        return (
            p.code, p.consts, p.const_bytes, p.tag_table, p.runs, p.root_default_pc, p.max_depth,
            self.data, self.starts, self.ends, first, last, fill, self.null_mode, self.bad,
            counts, dcounts, *bases, *arenas, hops, hop_from,
            np.zeros(isa.STATUS_SIZE, np.int64), self.reject_code, self.reject_offset, self.reject_pc,
        )  # fmt: skip

    def call(
        self,
        first: int,
        last: int,
        fill: bool,
        counts: np.ndarray,
        dcounts: np.ndarray,
        bufs: Buffers | None,
        hops: np.ndarray = NO_HOPS,
    ) -> None:
        args = self.args(first, last, fill, counts, dcounts, bufs, hops, counts.copy())
        err = self.fn(*args)
        if err:
            out = args[-4]
            i = int(out[isa.S_MESSAGE])
            idx = [int(x) for x in out[isa.S_INDICES : isa.S_INDICES + int(out[isa.S_DEPTH])]]
            size = int(self.ends[i] - self.starts[i])
            pc, d1, d2 = int(out[isa.S_PC]), int(out[isa.S_D1]), int(out[isa.S_D2])
            offset, run_row = int(out[isa.S_OFFSET]), int(out[isa.S_RUN_ROW])
            raise _error(self.plan, err, i, offset, pc, d1, d2, idx, size, run_row)


def decode_batch(
    spec: MessageSpec,
    bodies: Any,
    version: int,
    *,
    errors: str = "raise",
    all_versions: bool = False,
    threads: int = 1,
    kernel: str = "auto",
    views: bool = False,
) -> pa.RecordBatch | tuple[pa.RecordBatch, pa.Table]:
    """See ``arrowkafka.decode``."""
    if errors not in ERRORS:
        raise ValueError(f"errors must be one of {ERRORS}, not {errors!r}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, not {kernel!r}")
    plan = compile_plan(spec, version, all_versions)
    array: pa.Array | Ranges
    if isinstance(bodies, Ranges):
        array = bodies
        data, starts, ends = _ranges_input(bodies)
    else:
        array = as_bodies(bodies)
        data, starts, ends = _input(array)
    rows = len(starts)
    run = _Run(plan, data, starts, ends, errors == "null")
    run.use(kernel)
    if isinstance(array, pa.Array) and array.null_count:
        nulls = np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if errors == "raise":
            i = int(np.argmax(nulls))
            raise Corrupt("a null body", path="$", message_index=i, message=plan.name, version=version)
        run.bad[nulls] = 1
        run.reject_code[nulls] = -1

    # Pass 1 per range; range k's cursors then start at the sum of earlier ranges' counts.
    threads = max(1, min(threads, rows // 64 or 1))
    cuts = np.linspace(0, rows, threads + 1).astype(np.int64)
    nn = len(plan.nodes)
    counts = [np.zeros(nn, np.int64) for _ in range(threads)]
    dcounts = [np.zeros(nn, np.int64) for _ in range(threads)]

    # where pass 1 finds each bytes or records value ends: it prefetches ahead from them as it
    # goes, and pass 2 does with views
    hops = [
        _hops(plan, starts, ends, int(cuts[k]), int(cuts[k + 1])) if run.generated else NO_HOPS
        for k in range(threads)
    ]

    def pass1(k: int) -> None:
        run.call(int(cuts[k]), int(cuts[k + 1]), False, counts[k], dcounts[k], None, hops[k])

    each_range(pass1, threads)
    total, dtotal = np.sum(counts, axis=0), np.sum(dcounts, axis=0)
    try:
        # views address the input with 31 bits: a larger input is copied as usual
        bufs = allocate(plan, total, dtotal, views=views and len(data) < VIEW_LIMIT)
    except BatchTooLarge as e:
        raise ValueError(f"{plan.name} v{version}: {e}; decode it in smaller batches") from None
    cursor = [np.zeros(nn, np.int64), *np.cumsum(counts, axis=0)[:-1]]
    dcursor = [np.zeros(nn, np.int64), *np.cumsum(dcounts, axis=0)[:-1]]

    def pass2(k: int) -> None:
        run.call(int(cuts[k]), int(cuts[k + 1]), True, cursor[k], dcursor[k], bufs, hops[k])

    each_range(pass2, threads)
    if not np.array_equal(cursor[-1], total) or not np.array_equal(dcursor[-1], dtotal):
        raise AssertionError("pass 2 disagrees with pass 1")  # a kernel bug, never bad input
    batch = assemble(plan, bufs, total, dtotal, rows, run.bad if errors == "null" else None, data)
    batch.validate()
    if errors == "raise":
        return batch
    return batch, _rejects(plan, array, run)


HOP_BYTES = 32  # input bytes per view value the notes are sized for (a Fetch partition takes more)
HOPS_MAX_BYTES = 4 << 20  # notes per range at most; past them the kernels note and prefetch no more


def _hops(plan: Plan, starts: np.ndarray, ends: np.ndarray, first: int, last: int) -> np.ndarray:
    """Room for pass 1's notes of where each ``bytes`` or ``records`` value of messages
    first..last-1 ends (``hints.hop_mark``), a row per such node: pass 1 prefetches from them
    as it goes, and pass 2 with views. From the reused blocks, so its pages are not faulted in
    again each batch; what it held before (where a value was null, nothing is noted) only ever
    steers a prefetch."""
    nodes = len(plan.view_nodes())
    if not nodes or last <= first:
        return NO_HOPS
    nbytes = int(ends[first:last].sum() - starts[first:last].sum())
    return blocks.array((nodes, min(nbytes // HOP_BYTES + 64, HOPS_MAX_BYTES // 8 // nodes)), np.int64)


def each_range(fn: Any, threads: int) -> None:
    """``fn(k)`` for k in range(threads), side by side when there are several (the kernels
    release the GIL)."""
    if threads == 1:
        fn(0)
        return
    with ThreadPoolExecutor(threads - 1) as pool:  # range 0 on this thread: one start fewer
        rest = [pool.submit(fn, k) for k in range(1, threads)]
        fn(0)
        for f in rest:
            f.result()


REJECT_SCHEMA = pa.schema(
    [
        pa.field("index", pa.int64(), nullable=False),
        pa.field("error", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("byte_offset", pa.int64(), nullable=False),
        pa.field("body", pa.binary()),
    ]
)


_NO_REJECTS = empty_table(REJECT_SCHEMA)


def _rejects(plan: Plan, array: pa.Array | Ranges, run: _Run) -> pa.Table:
    """One row per rejected body: the error (found again by decoding that body alone, which
    gives the full reason and indexed path) and the raw bytes, so nothing is lost."""
    if not run.bad.any():
        return _NO_REJECTS  # (building an empty table costs more than most small batches)
    cols: dict[str, list[Any]] = {name: [] for name in REJECT_SCHEMA.names}
    # one body at a time through the same kernel: a run over one range, moved from body to body
    one = _Run(plan, run.data, np.zeros(1, np.int64), np.zeros(1, np.int64), False)
    one.fn = run.fn
    nn = len(plan.nodes)
    counts, dcounts = np.zeros(nn, np.int64), np.zeros(nn, np.int64)
    for i in np.flatnonzero(run.bad).tolist():
        body = array.body(i) if isinstance(array, Ranges) else array[i].as_py()
        if body is None:
            error, reason, path, offset = "Corrupt", "a null body", "$", 0
        else:
            one.starts[0], one.ends[0] = run.starts[i], run.ends[i]
            counts[:] = dcounts[:] = 0
            try:
                one.call(0, 1, False, counts, dcounts, None)
                raise AssertionError("a rejected body decoded alone")
            except DecodeError as e:
                error, reason, path, offset = type(e).__name__, e.reason, e.path, e.offset
        for key, value in zip(REJECT_SCHEMA.names, (int(i), error, reason, path, offset, body), strict=True):
            cols[key].append(value)
    columns = [
        int64_array(cols["index"]),
        string_array(cols["error"]),
        string_array(cols["reason"]),
        string_array(cols["path"]),
        int64_array(cols["byte_offset"]),
        binary_array(cols["body"]),
    ]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(columns, schema=REJECT_SCHEMA)])
