"""What a job writes (``traffic.decode_capture``, ``segments.decode_segments``, and the Spark
jobs): its Parquet tables, one file per table, appended to a row group at a time, in the types
every reader takes (on a failure the job's tables go, so none is left that would pass for a
whole one); and the lines its summary ends with. Nothing here loads Numba: a Spark driver
prints the summary.

Where the process has a second core, a job's tables are written by a thread of their own
(``background=True``): Parquet's writer (encoding, compression, the file) runs in C++ without
Python's lock, so one chunk's rows are written while the next chunk is decoded. The writer is
at most one step behind (``ParquetTables.step``): a job that decodes faster than its tables are
written waits, and holds no more than two steps' rows. Writes keep their order: the same
writes make the same files, byte for byte, in the job's thread or in the writer's (a capture job
in the background writes a row group per chunk, though: more row groups, the same rows)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from collections import deque
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from arrowkafka.assembly.arrays import empty_table
from arrowkafka.schema import portable_table

__all__ = ["COMPRESSIONS", "ParquetTables", "check_compression", "frames_line", "record_lines"]

# The codecs a job's Parquet pages can be compressed with (DuckDB, pandas and Polars read
# each): snappy, the default (Spark's too); zstd, smaller files for more time; lz4 (Parquet's
# LZ4_RAW); gzip, the slowest; none, the largest (bench/parquet_codecs.py measures them).
COMPRESSIONS = ("snappy", "zstd", "lz4", "gzip", "none")


def check_compression(compression: str) -> str:
    """``compression`` if it is one of ``COMPRESSIONS``, else a ValueError naming them."""
    if compression not in COMPRESSIONS:
        raise ValueError(f"no Parquet compression {compression!r} (one of {', '.join(COMPRESSIONS)})")
    return compression


def spare_core(cgroup: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")) -> bool:
    """Can this process run on more than one core (a writer thread beside the job's): the
    cores it may run on, and the CPU quota of its cgroup and the cgroups above it, if any
    (``docker --cpus``, systemd's ``CPUQuota``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quotas = [q for q in map(_cpu_quota, _cgroup_folders(cgroup, own)) if q is not None]
    return cores > 1 and min(quotas, default=2.0) >= 2


def _cgroup_folders(cgroup: Path, own: Path) -> list[Path]:
    """The folders of this process's cgroup and of those above it, v2 and v1 (``cpu``)."""
    folders = [cgroup, cgroup / "cpu"]
    with contextlib.suppress(OSError, ValueError):
        for line in own.read_text().splitlines():  # "0::/a/b" (v2), "4:cpu,cpuacct:/a/b" (v1)
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                base = cgroup
            elif "cpu" in controllers.split(","):
                base = cgroup / "cpu"
            else:
                continue
            parts = [p for p in path.split("/") if p]
            folders += [base.joinpath(*parts[:n]) for n in range(1, len(parts) + 1)]
    return folders


def _cpu_quota(folder: Path) -> float | None:
    """The cores' worth of CPU time a cgroup allows (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``
    over ``cpu.cfs_period_us``), or None: no quota, or none found."""
    with contextlib.suppress(OSError, ValueError):
        quota, period = (folder / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    with contextlib.suppress(OSError, ValueError):
        us = int((folder / "cpu.cfs_quota_us").read_text())
        return None if us < 0 else us / int((folder / "cpu.cfs_period_us").read_text())
    return None


class ParquetTables:
    """One Parquet file per table under ``out``: ``<name>.parquet``, or with ``part`` the file
    ``<name>.parquet/<part>.parquet`` (a folder of parts, one per Spark task). ``out`` None:
    nothing is written. ``compression``: one of ``COMPRESSIONS``. ``background``: written by a
    thread of their own (see above; None: where the process has a second core, ``spare_core``);
    a failure there is raised by the ``step`` that waits for it (the one after the next) or by
    ``close``."""

    def __init__(
        self,
        out: Path | None,
        part: str | None = None,
        compression: str = "snappy",
        background: bool | None = False,
    ) -> None:
        self.out, self.part = out, part
        self.compression = check_compression(compression)
        self.open: dict[str, pq.ParquetWriter] = {}
        self.written_empty: list[str] = []  # tables ``close`` wrote with no rows
        background = spare_core() if background is None else background
        self._writer = _Writer() if background and out is not None else None
        self.background = self._writer is not None  # (what the job's steps may count on)
        # a file made by the writer's thread while ``abort`` removes the job's: one or the other
        self._files = threading.Lock()
        self._removed = False

    def path(self, name: str) -> Path:
        assert self.out is not None
        if self.part is None:
            return self.out / f"{name}.parquet"
        folder = self.out / f"{name}.parquet"
        folder.mkdir(exist_ok=True)
        return folder / f"{self.part}.parquet"

    def write(self, name: str, table: pa.Table) -> None:
        """Append ``table``'s rows to table ``name`` as a row group (none: nothing written)."""
        if self.out is None or table.num_rows == 0:
            return
        if self._writer is None:
            self._write(name, table)
        else:
            self._writer.put(lambda: self._write(name, table))

    def _write(self, name: str, table: pa.Table) -> None:
        table = portable_table(table)  # types every reader takes, Spark's included
        if name not in self.open:
            options = writer_options(table.schema, self.compression)
            with self._files:
                if self._removed:
                    return
                self.open[name] = pq.ParquetWriter(self.path(name), table.schema, **options)
        self.open[name].write_table(table)

    def step(self) -> None:
        """A step of the job is done (its rows handed to ``write``): in the background, wait
        until the writes of the step before are (so at most two steps' rows are held)."""
        if self._writer is not None:
            self._writer.step()

    def close(self, empty: dict[str, pa.Schema]) -> None:
        """The job is done: the files are closed, and the tables of ``empty`` that got no rows
        are written with none (their schema: a reader finds every table of the job)."""
        if self._writer is not None:
            self._writer.finish()
        for w in self.open.values():
            w.close()
        if self.out is None:
            return
        for name, schema in empty.items():
            if name not in self.open:
                self.written_empty.append(name)
                pq.write_table(
                    portable_table(empty_table(schema)), self.path(name), compression=self.compression
                )

    def abort(self) -> None:
        """The job failed: its tables go (each holds only what was written before the failure,
        and would pass for a whole one)."""
        try:
            if self._writer is not None:
                self._writer.cancel()  # (waits for the write running)
        except BaseException:  # interrupted again while it waited: the files go all the same
            self._remove()
            raise
        for w in self.open.values():
            with contextlib.suppress(Exception):
                w.close()
        self._remove()

    def _remove(self) -> None:
        if self.out is None:
            return
        with self._files:
            self._removed = True
            names = [*self.open, *self.written_empty]
        for name in names:
            with contextlib.suppress(OSError):
                self.path(name).unlink()
                if self.part is not None:  # the folder of parts, if no other task's part is in it
                    self.path(name).parent.rmdir()


class _Writer:
    """One thread that runs the writes given to it, in order, grouped in steps. The first
    failure is raised by the ``step`` or ``finish`` that waits for it (and by any call after
    them), and no write after it runs; nor does any after ``cancel``, or after an interrupt
    while the job waits."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="arrowkafka-parquet")
        self._steps: deque[list[Future[None]]] = deque([[]])  # the last: the step being given
        self._failure: BaseException | None = None  # the first write that failed
        self._stop = False  # (set by the job's thread, read by the writer's)
        self._done = False  # finished or cancelled: nothing more is taken

    def put(self, write: Callable[[], None]) -> None:
        self._taking()
        self._steps[-1].append(self._pool.submit(self._run, write))

    def _taking(self) -> None:
        """Raise the first failure, or that nothing more is taken (finished or cancelled)."""
        if self._failure is not None:
            raise self._failure
        if self._done:
            raise RuntimeError("the tables are closed: nothing more can be written")

    def _run(self, write: Callable[[], None]) -> None:
        if self._stop:  # a write before this one failed, or the job is failing
            return
        try:
            write()
        except BaseException:
            self._stop = True
            raise

    def step(self) -> None:
        self._taking()
        self._steps.append([])
        while len(self._steps) > 2:  # the step before the one just given: written
            self._wait(self._steps.popleft())

    def finish(self) -> None:
        self._taking()
        while self._steps:
            self._wait(self._steps.popleft())
        self._done = True
        self._pool.shutdown()

    def cancel(self) -> None:
        """Writes not started are dropped; the one running is waited for (it cannot be stopped
        halfway, and its file is about to go)."""
        self._stop = self._done = True
        self._pool.shutdown(cancel_futures=True)

    def _wait(self, step: list[Future[None]]) -> None:
        try:
            if self._failure is None:
                for f in step:
                    if not f.cancelled() and f.exception() is not None:  # (waits for it)
                        self._failure = f.exception()
                        break
        except BaseException:  # interrupted while it waited: the job is failing
            self.cancel()
            raise
        if self._failure is not None:
            self.cancel()
            raise self._failure


def writer_options(schema: pa.Schema, compression: str = "snappy") -> dict[str, Any]:
    """How a table is written: dictionaries for its strings and binaries only; statistics for
    its top-level columns only (what readers skip row groups by: times, ids, versions); values
    handed to the encoders 64K at a time, not 1K; pages compressed with ``compression``."""
    return {
        "compression": compression,
        "use_dictionary": _byte_array_columns(schema),
        "write_statistics": [f.name for f in schema if not pa.types.is_nested(f.type)],
        "write_batch_size": 1 << 16,
    }


# binary leaves that hold data, not names: no dictionary (``records`` fields, record keys,
# values and header values; unknown tags' values, which rarely repeat either)
PAYLOADS = {"records", "key", "value"}


def _byte_array_columns(schema: pa.Schema) -> list[str]:
    """The Parquet paths of the string and binary leaves of ``schema``: the columns worth a
    dictionary (hosts, topics, client ids repeat). Numbers are written plain: dictionaries for
    every leaf of the nested tables cost more writing time than they save in size. So are
    payloads (``records`` fields, record keys, values and header values): they rarely repeat,
    and trying a dictionary on them took a tenth of a bulk capture's time, for the same size."""
    out: list[str] = []

    def walk(path: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{path}.{f.name}", f.type)
        elif pa.types.is_map(t):
            walk(f"{path}.key_value.key", t.key_type)
            walk(f"{path}.key_value.value", t.item_type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{path}.list.element", t.value_type)
        elif pa.types.is_string(t) or (pa.types.is_binary(t) and path.rsplit(".", 1)[-1] not in PAYLOADS):
            out.append(path)

    for f in schema:
        walk(f.name, f.type)
    return out


def frames_line(frames_in: int, rows: int, rejects: int, buts: Sequence[str] = ()) -> str:
    """The summary's line that adds up the frames (``buts``: what to say when they add up but
    something was not read), as the CLI and the Spark job print it."""
    verdict = "all accounted for" if frames_in == rows + rejects else "MISMATCH"
    if verdict != "MISMATCH":
        verdict += "".join(f", but {b}" for b in buts)
    return f"frames in {frames_in} = rows {rows} + rejects {rejects} ({verdict})"


def earlier_tables(out: Path, names: Collection[str], prefixes: tuple[str, ...] = ()) -> list[Path]:
    """The tables of an earlier run in folder ``out``: ``<name>.parquet`` (a file, or a folder of a
    Spark job's parts) named after a table a job writes (``names``, or one of ``prefixes``);
    nothing else of the folder's is ever counted, or replaced."""
    if not out.is_dir():
        return []
    return sorted(p for p in out.glob("*.parquet") if p.stem in names or p.stem.startswith(prefixes))


def refuse_or_remove_earlier(
    out: str, names: Collection[str], prefixes: tuple[str, ...], overwrite: bool
) -> None:
    """A Spark job's output folder (a local one: ``outdir`` with no scheme, or ``file:``) that
    holds an earlier run's tables: refused (their tables would be left beside the new ones),
    or with ``overwrite`` those tables removed first, as the CLI's ``--overwrite`` replaces them."""
    if "://" in out and not out.startswith("file://"):
        return  # (a distributed file system: Spark's own overwrite of each table, no more)
    folder = Path(out.removeprefix("file://").removeprefix("file:"))
    earlier = earlier_tables(folder, names, prefixes)
    if earlier and not overwrite:
        raise ValueError(
            f"{out}: holds {len(earlier)} tables of an earlier run (their rows would mix with this one's); "
            "choose another folder, or overwrite=True to replace them"
        )
    for table in earlier:
        if table.is_dir():
            shutil.rmtree(table)
        else:
            table.unlink()


# a number in a reason (an offset, a size, a stored CRC), not in a name (CRC-32C, v12, KIP-98)
REASON_NUMBER = re.compile(r"(?<![\w-])(0x[0-9a-fA-F]+|\d+)(?![\w-])")


class Causes:
    """Rows of rejects counted by cause, for a summary: the error, and the reason with its
    numbers as ``#`` (ten CRC mismatches are one cause, whatever their CRCs), with the message
    and version it concerns; each cause keeps its full reason as an example while every row of
    it had that one. At most ``MAX`` causes apart; the rest are counted together."""

    MAX = 1000
    SHOWN = 5
    _OTHERS = ("", "")

    def __init__(self) -> None:
        self.by: dict[tuple[str, str], tuple[int, str]] = {}  # (error, cause) -> (rows, example or "")

    def __bool__(self) -> bool:
        return bool(self.by)

    def add(
        self, error: str | None, reason: str | None, message: str | None = None, version: int | None = None,
        n: int = 1, same: bool = True,
    ) -> None:  # fmt: skip
        """``n`` rows of one cause (``same``: all with this very reason; the Spark job counts
        its causes by a query and says whether their reasons differed)."""
        what = f" ({message} v{version})" if message else ""
        reason = reason or ""
        self._count((error or "", REASON_NUMBER.sub("#", reason) + what), n, reason + what if same else "")

    def add_table(self, rejects: pa.Table) -> None:
        """Every row of a table of rejects (a capture's or a segment job's)."""
        if not rejects.num_rows:
            return
        keys = ["error", "reason"] + [c for c in ("message", "version") if c in rejects.column_names]
        for row in rejects.group_by(keys, use_threads=False).aggregate([([], "count_all")]).to_pylist():
            self.add(row["error"], row["reason"], row.get("message"), row.get("version"), row["count_all"])

    def merge(self, other: Causes) -> None:
        for key, (n, example) in other.by.items():
            self._count(key, n, example)

    def _count(self, key: tuple[str, str], n: int, example: str) -> None:
        if key not in self.by and len(self.by) >= self.MAX:
            key, example = self._OTHERS, ""
        had, was = self.by.get(key, (0, example))
        self.by[key] = (had + n, was if was == example else "")

    def lines(self) -> list[str]:
        """The summary's lines: the commonest causes, each row of them in the rejects table
        (none if nothing was rejected)."""
        if not self.by:
            return []
        ranked = sorted(((n, key, ex) for key, (n, ex) in self.by.items() if key != self._OTHERS),
                        key=lambda x: (-x[0], x[1]))  # fmt: skip
        lines = ["rejected, by cause (rejects.parquet holds each, with where and its bytes):"]
        for n, (error, cause), example in ranked[: self.SHOWN]:
            text = example or cause
            text = text if len(text) <= 100 else text[:97] + "..."
            lines.append(f"  {n:>8}  {error}: {text}")
        others = sum(n for n, _, _ in ranked[self.SHOWN :]) + self.by.get(self._OTHERS, (0, ""))[0]
        if others:
            lines.append(f"  {others:>8}  of other causes")
        return lines


def record_lines(records: int, batches: int, rejected: int, control: dict[str, int]) -> list[str]:
    """The summary's lines on the records inside Produce and Fetch (none if there were none)."""
    lines = []
    if batches:
        lines.append(f"records {records} in {batches} batches ({rejected} batches rejected)")
    if control:
        lines.append("KRaft control records: " + ", ".join(f"{t} {n}" for t, n in sorted(control.items())))
    return lines
