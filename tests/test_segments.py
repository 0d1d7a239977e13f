"""Log segments to Parquet: files and log folders, topic and partition from the folder name,
read in pieces (a batch cut by a piece boundary goes whole into the next), a segment ending
inside a batch, damaged batches, and the internal topics as typed tables. Batches written by
kafka-python and by the project's internal-topic encoders; the segments command through its
real entry point."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka import segments
from arrowkafka.records import Records
from arrowkafka.segments import decode_segments
from tests.conftest import writing_threads
from tests.records.batchtools import Rec, build, rewrap_v2
from tests.test_topics import metadata_values, offsets_records

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_700_000_000_000


def _at(batch: bytes, base: int) -> bytes:
    """A batch at a base offset, as a broker writes it (the field is outside the CRC)."""
    return struct.pack(">q", base) + batch[8:]


def _recs(n: int, tag: str) -> list[Rec]:
    return [
        Rec(f"{tag}-{i}".encode(), f"value {tag} {i}".encode() * 20, [("h", b"v")], T0 + i) for i in range(n)
    ]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logs")
    for part, codecs in ((0, (0, 1, 4)), (1, (2, 3, 0))):
        d = root / f"orders-{part}"
        d.mkdir()
        base = 0
        segment = b""
        for c in codecs:
            segment += _at(build(2, c, _recs(50, f"p{part}c{c}")), base)
            base += 50
        (d / "00000000000000000000.log").write_bytes(segment)
        (d / "00000000000000000000.index").write_bytes(bytes(16))  # not a segment: left alone
    keys, values = offsets_records()
    (root / "__consumer_offsets-7").mkdir()
    co = build(2, 0, [Rec(k, v, [], T0) for k, v in zip(keys.to_pylist(), values.to_pylist(), strict=True)])
    (root / "__consumer_offsets-7" / "00000000000000000000.log").write_bytes(co)
    (root / "__cluster_metadata-0").mkdir()
    md = build(2, 0, [Rec(None, v, [], T0) for v in metadata_values().to_pylist()])
    leader = rewrap_v2(
        build(2, 0, [Rec(struct.pack(">hh", 0, 2), _leader_change(), [], T0)]), attributes=0x20
    )
    (root / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(_at(leader, 0) + _at(md, 1))
    return root


def _leader_change() -> bytes:
    table = pa.table({"version": pa.array([0], pa.int16()), "leader_id": pa.array([1], pa.int32()),
                      "voters": [[{"voter_id": 1}]], "granting_voters": [[{"voter_id": 1}]]})  # fmt: skip
    return ak.encode(table, "LeaderChangeMessage", 0)[0].as_py()


def test_a_log_dir_to_tables(logdir: Path, tmp_path: Path) -> None:
    summary = decode_segments([logdir], tmp_path)
    assert (summary.files, summary.rejects, summary.partial) == (4, 0, [])
    records = pq.read_table(tmp_path / "records.parquet")
    orders = records.filter(pa.compute.equal(records.column("topic"), "orders")).to_pylist()
    assert len(orders) == 300
    p1 = [r for r in orders if r["partition"] == 1]
    assert [r["record_offset"] for r in p1] == list(range(150))
    assert p1[60]["key"] == b"p1c3-10" and p1[60]["headers"] == [{"key": "h", "value": b"v"}]
    batches = pq.read_table(tmp_path / "record_batches.parquet").to_pylist()
    orders_batches = [b for b in batches if b["topic"] == "orders"]
    assert [b["codec"] for b in orders_batches] == ["none", "gzip", "zstd", "snappy", "lz4", "none"]
    # positions are byte positions in the file: each batch starts where the one before ends
    p0 = [b for b in orders_batches if b["partition"] == 0]
    assert [b["position"] for b in p0] == [0, p0[0]["size"], p0[0]["size"] + p0[1]["size"]]
    assert {b["file"] for b in p0} == {str(logdir / "orders-0" / "00000000000000000000.log")}
    # internal topics, typed
    commits = pq.read_table(tmp_path / "consumer_offsets.OffsetCommit.parquet").to_pylist()
    assert [(c["partition"], c["record_offset"], c["key"]["partition"], c["value"]["offset"])
            for c in commits] == [
        (7, 0, 0, 100), (7, 1, 1, 101), (7, 3, 2, 102)]  # fmt: skip
    topics = pq.read_table(tmp_path / "cluster_metadata.TopicRecord.parquet").to_pylist()
    assert [(t["record_offset"], t["name"]) for t in topics] == [(1, "orders")]
    assert pq.read_table(tmp_path / "cluster_metadata.PartitionRecord.parquet").num_rows == 2
    markers = pq.read_table(tmp_path / "record_markers.parquet").to_pylist()
    assert [(m["topic"], m["type"], m["record_offset"]) for m in markers] == [
        ("__cluster_metadata", "LEADER_CHANGE", 0)
    ]
    # and the KRaft control record itself, through its spec, linked as records are
    (change,) = pq.read_table(tmp_path / "record_control.LeaderChangeMessage.parquet").to_pylist()
    leader = [b for b in batches if b["topic"] == "__cluster_metadata" and b["control"]]
    assert (change["topic"], change["partition"], change["record_offset"]) == ("__cluster_metadata", 0, 0)
    assert change["batch_id"] == leader[0]["batch_id"] and change["leader_id"] == 1
    assert [v["voter_id"] for v in change["voters"]] == [1]
    assert summary.tables["record_control.LeaderChangeMessage"] == 1


@pytest.mark.parametrize("background", [False, True], ids=["written in turn", "written in the background"])
def test_small_pieces_give_the_same_tables(
    logdir: Path, tmp_path: Path, background: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(In the background, each piece's rows are written while the next piece is decoded.)"""
    decode_segments([logdir], tmp_path / "one", background=False)
    threads, steps = writing_threads(monkeypatch)
    # most batches cross a piece boundary
    decode_segments([logdir], tmp_path / "small", chunk_bytes=700, background=background)
    assert threads == {"arrowkafka-parquet_0" if background else "MainThread"}
    assert len(steps) > 10  # a step a piece
    for name in ("record_batches", "records", "record_markers", "consumer_offsets.OffsetCommit",
                 "cluster_metadata.TopicRecord", "record_control.LeaderChangeMessage"):  # fmt: skip
        assert pq.read_table(tmp_path / "small" / f"{name}.parquet").equals(
            pq.read_table(tmp_path / "one" / f"{name}.parquet")
        ), name
    assert pq.ParquetFile(tmp_path / "small" / "records.parquet").metadata.num_row_groups > 1


def test_a_piece_that_ends_inside_a_batch_length_reads_on(logdir: Path, tmp_path: Path) -> None:
    """A piece that ends inside the first 12 bytes of a batch (its offset and length) holds no
    length to say how much to read: the file reads on all the same (it once ended there,
    the rest counted unread)."""
    whole = (logdir / "orders-0" / "00000000000000000000.log").read_bytes()
    first = 12 + struct.unpack_from(">i", whole, 8)[0]
    d = tmp_path / "in" / "orders-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(whole)
    for k in (1, 8, 11, 12):
        summary = decode_segments([d], tmp_path / f"out-{k}", chunk_bytes=first + k)
        assert (summary.records, summary.partial, summary.unread) == (150, [], {}), k
    # a last piece of fewer than 8 bytes: a partial batch with no offset (it raised a TypeError)
    (d / "00000000000000000000.log").write_bytes(whole[:first] + whole[first : first + 5])
    summary = decode_segments([d], tmp_path / "five", chunk_bytes=first)
    assert (summary.records, summary.partial_bytes) == (50, {str(d / "00000000000000000000.log"): 5})


def test_a_torn_write_cut_by_a_piece_is_one_partial_batch(tmp_path: Path) -> None:
    """A segment that ends inside its last batch (a broker stopped mid-write), with a piece
    boundary inside that batch: one partial row of all its bytes, nothing unread (it was split
    between the row and an unread count, exit status 1, with no damage at all)."""
    parts = _six_batches()
    d = tmp_path / "in" / "orders-0"
    d.mkdir(parents=True)
    file = d / "00000000000000000000.log"
    file.write_bytes(b"".join(parts[:5]) + parts[5][:600])
    for chunk in range(len(parts[0]) - 200, len(parts[0]) + 600, 97):
        summary = decode_segments([d], tmp_path / f"out-{chunk}", chunk_bytes=chunk)
        assert (summary.records, summary.partial_bytes, summary.unread) == (25, {str(file): 600}, {}), chunk
    # after damage, a batch is searched for from the offset a segment's name gives, unless the
    # batches read are below it (the search found none: the rest was one partial row)
    file.unlink()
    named = d / "09223372036854775807.log"
    named.write_bytes(b"".join(_forged(parts[:5], 2, 1 << 30)))
    summary = decode_segments([named], tmp_path / "named", chunk_bytes=1000)
    assert (summary.records, summary.rejects, summary.partial) == (20, 1, [])


def test_random_damage_is_read_the_same_in_any_pieces(tmp_path: Path) -> None:
    """Forged lengths, flipped bytes, holes, cuts and inserted zeros in a segment of every magic
    and codec: whatever the pieces, the same records, and every byte of the file in a batch,
    a reject or a count of the summary (unread, zeros)."""
    rng = random.Random(7)
    parts, base = [], 0
    for magic, codec in [(2, 0), (2, 1), (1, 0), (2, 3), (0, 0), (2, 4), (1, 1), (2, 0), (0, 2)] * 2:
        n = rng.randint(1, 12)
        recs = [Rec(b"k%d" % j, bytes(rng.randint(0, 300)), [], T0 + j) for j in range(n)]
        parts.append(_at(build(magic, codec, recs), base) if magic == 2 else build(magic, codec, recs))
        base += n
    whole = b"".join(parts)
    starts = [sum(map(len, parts[:i])) for i in range(len(parts))]
    for case in range(40):
        damaged = bytearray(whole)
        p = rng.randrange(len(whole))
        kind = case % 5
        if kind == 0:
            s = rng.choice(starts)
            damaged[s + 8 : s + 12] = struct.pack(
                ">i", rng.choice([-1, 0, 3, 1 << 30, rng.randrange(1 << 14)])
            )
        elif kind == 1:
            damaged[p] ^= rng.randrange(1, 256)
        elif kind == 2:
            n = rng.randrange(1, 500)
            damaged[p : p + n] = bytes(len(damaged[p : p + n]))
        elif kind == 3:
            del damaged[p:]
        else:
            damaged[p:p] = bytes(rng.randrange(1, 300))
        d = tmp_path / f"in-{case}" / "t-0"
        d.mkdir(parents=True)
        file = d / "00000000000000000000.log"
        file.write_bytes(damaged)
        seen = set()
        for chunk in (700, 5000, 1 << 22):
            out = tmp_path / f"out-{case}-{chunk}"
            summary = decode_segments([d], out, chunk_bytes=chunk)
            batches = pq.read_table(out / "record_batches.parquet")
            rejects = pq.read_table(out / "rejects.parquet")
            held = sum(
                s
                for s, e in zip(batches["size"].to_pylist(), batches["error"].to_pylist(), strict=True)
                if e is None
            )
            held += sum(len(r) for r in rejects["raw"].to_pylist())
            held += summary.unread.get(str(file), 0) + summary.zeros.get(str(file), 0)
            assert held == len(damaged), (case, chunk)
            seen.add(summary.records)
        assert len(seen) == 1, (case, seen)


def test_rejected_entries_with_no_batch_after_them_end(tmp_path: Path) -> None:
    """Entries of a walkable length whose magic byte is no magic's, to the end of the file: the
    search for a batch after them finds none, and the walk reads on from where it was (it read
    on from the file's end, where the search had left it, for ever)."""
    good = b"".join(_six_batches())
    junk = b"".join(struct.pack(">qi", 0, 100) + bytes(4) + b"\x99" + bytes(95) for _ in range(200))
    d = tmp_path / "in" / "orders-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(good + junk)
    for chunk in (4096, len(good + junk)):
        summary = decode_segments([d], tmp_path / f"out-{chunk}", chunk_bytes=chunk)
        assert (summary.records, summary.rejects, summary.unread) == (30, 200, {}), chunk


def _forty(value: Callable[[int], bytes] = lambda i: bytes([i % 251]) * 200) -> list[bytes]:
    return [
        _at(build(2, 0, [Rec(b"k%d" % j, value(5 * i + j), [], T0 + j) for j in range(5)]), 5 * i)
        for i in range(40)
    ]


def _forged(parts: list[bytes], i: int, length: int) -> list[bytes]:
    return [*parts[:i], parts[i][:8] + struct.pack(">i", length) + parts[i][12:], *parts[i + 1 :]]


def _flipped(parts: list[bytes], i: int, at: int, bit: int = 1) -> list[bytes]:
    b = bytearray(parts[i])
    b[at] ^= bit
    return [*parts[:i], bytes(b), *parts[i + 1 :]]


def _ints(i: int) -> bytes:  # values of big-endian int32s below 2^20: ids, counters
    return np.random.default_rng(i).integers(0, 1 << 20, 64).astype(">i4").tobytes()


def _utf8_broken(parts: list[bytes], i: int) -> list[bytes]:  # a header key not UTF-8, CRC made good
    b = bytearray(build(2, 0, [Rec(b"k", b"v", [("hk", b"x")], T0)]))
    at = b.index(b"hk", 61)
    b[at : at + 2] = b"\xff\xfe"
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return [*parts[:i], _at(bytes(b), 5 * i), *parts[i + 1 :]]


@pytest.mark.parametrize(
    "name",
    ["end on a later batch", "end at the file's end", "flipped base offset", "int32 values",
     "two damaged bodies", "well framed, rejected", "forged past a piece", "forged in a zero tail",
     "forged onto a batch in a value"],
)  # fmt: skip
def test_damage_that_sent_the_walk_astray(tmp_path: Path, name: str) -> None:
    """Damage a review found losing batches, time or memory: every good batch is read, the
    rejects are the damaged bytes, whatever the pieces; no piece larger than two."""
    parts, tail = _forty(), b""
    total = len(b"".join(parts))
    starts = [sum(map(len, parts[:i])) for i in range(41)]
    lost = {10}  # batches a reject holds
    if name == "end on a later batch":  # one CRC reject held batches 11 to 19: no search was made
        parts = _forged(parts, 10, starts[20] - starts[10] - 12)
    elif name == "end at the file's end":
        parts = _forged(parts, 10, total - starts[10] - 12)
    elif name == "flipped base offset":  # outside the CRC: it raised the floor of offsets searched for
        parts = _forged(_flipped(parts, 3, 0, 0x40), 10, 1 << 30)
    elif name == "int32 values":  # values that look like magic 0 headers spent the search's budget
        parts = _forged(_forty(_ints), 10, 1 << 30)
    elif name == "two damaged bodies":  # well framed: two rejects, no search (it cost a piece each)
        parts, lost = _flipped(_flipped(parts, 10, 500), 11, 500), {10, 11}
    elif name == "well framed, rejected":  # CRCs good: no search at all (it took minutes)
        parts, lost = _utf8_broken(_utf8_broken(parts, 10), 11), {10, 11}
    elif name == "forged past a piece":  # inside the file: it was read whole, a piece of its size
        parts = _forged(parts, 10, starts[38] - starts[10])
    elif name == "forged onto a batch in a value":  # the walk trusted the batch it landed on, and
        # the search before it (which stopped there) could not see batch 11 around it
        inner = _at(build(2, 0, [Rec(b"inner", b"a batch as a value", [], T0)]), 1000)
        parts = _forty(lambda i: b"x" * 60 + inner + b"y" * 60 if i == 57 else bytes([i % 251]) * 200)
        landed = b"".join(parts).index(inner)
        parts = _forged(parts, 10, landed - starts[10] - 12)
    else:  # the walk landed in a preallocated tail: no search was made
        parts, tail = _forged(parts, 10, total - starts[10] + 1000), bytes(50_000)
    d = tmp_path / "in" / "orders-0"
    d.mkdir(parents=True)
    data = b"".join(parts) + tail
    (d / "00000000000000000000.log").write_bytes(data)
    pieces: list[int] = []
    decode = segments.decode_records

    def spy(buf: list[bytes], **kw: Any) -> Records:
        pieces.append(len(buf[0]))
        return decode(buf, **kw)

    for chunk in (4096, 1 << 22):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(segments, "decode_records", spy)
            summary = decode_segments([d], tmp_path / f"out-{chunk}", chunk_bytes=chunk)
        batches = pq.read_table(tmp_path / f"out-{chunk}" / "record_batches.parquet")
        good = pc.is_null(batches["error"])
        offsets = pc.filter(batches["base_offset"], good).to_pylist()
        if name == "flipped base offset":
            offsets[3] ^= 1 << 62
        assert offsets == [5 * i for i in range(40) if i not in lost], (name, chunk)
        rejects = pq.read_table(tmp_path / f"out-{chunk}" / "rejects.parquet")
        assert b"".join(rejects["raw"].to_pylist()) == b"".join(parts[i] for i in sorted(lost)), (name, chunk)
        assert summary.rejects == rejects.num_rows == len(lost), (name, chunk)
        assert not summary.unread and not summary.partial, (name, chunk)
        assert max(pieces) <= 2 * max(chunk, max(map(len, parts))), (name, chunk)


def test_a_cut_segment_and_a_damaged_batch(logdir: Path, tmp_path: Path) -> None:
    whole = (logdir / "orders-0" / "00000000000000000000.log").read_bytes()
    d = tmp_path / "in" / "orders-0"
    d.mkdir(parents=True)
    first = 12 + struct.unpack_from(">i", whole, 8)[0]
    damaged = bytearray(whole[: len(whole) - 10])  # the broker died mid-write
    damaged[first + 80] ^= 0xFF  # inside the second batch
    (d / "00000000000000000000.log").write_bytes(bytes(damaged))
    summary = decode_segments([d], tmp_path / "out", chunk_bytes=1000)
    assert summary.partial == [str(d / "00000000000000000000.log")]
    assert summary.rejects == 1
    batches = pq.read_table(tmp_path / "out" / "record_batches.parquet").to_pylist()
    assert [(b["partial"], b["crc_ok"], b["error"] is None) for b in batches] == [
        (False, True, True), (False, False, False), (True, None, True)]  # fmt: skip
    reject = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()[0]
    assert reject["position"] == first and reject["reason"].startswith("CRC-32C mismatch")
    assert reject["raw"] == bytes(damaged[first : first + len(reject["raw"])])
    assert pq.read_table(tmp_path / "out" / "records.parquet").num_rows == 50
    # without payloads the reject keeps no bytes: the batch holds its keys and values
    decode_segments([d], tmp_path / "bare", chunk_bytes=1000, payloads=False)
    assert pq.read_table(tmp_path / "bare" / "rejects.parquet").to_pylist() == [{**reject, "raw": None}]


def test_the_command(logdir: Path, tmp_path: Path) -> None:
    parts = [str(logdir / "orders-0"), str(logdir / "orders-1")]
    out = str(tmp_path / "out")
    cmd = [sys.executable, "-m", "arrowkafka.cli", "segments", *parts, "-o", out, "--no-payloads"]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "2 segment files" in run.stdout and "300 records in 6 batches" in run.stdout
    assert "key" not in pq.read_table(tmp_path / "out" / "records.parquet").column_names
    missing = subprocess.run([*cmd[:4], str(tmp_path / "nope.log"), "-o", str(tmp_path / "x")],
                             capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.startswith("arrowkafka: error:")
    assert "Traceback" not in missing.stderr and not (tmp_path / "x").exists()


def test_what_a_walk_of_folders_finds(logdir: Path, tmp_path: Path) -> None:
    """Each file once, however often named; partition folders through symbolic links (they were
    skipped, silently); a link loop ends; a folder named like a segment is walked, not read;
    a pipe is refused before anything is written (it blocked the open for ever); the output
    folder made under an input folder is not read as input (its tables were, after an error)."""
    root = tmp_path / "dirs"
    root.mkdir()
    (root / "orders-0").symlink_to(logdir / "orders-0", target_is_directory=True)
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "odd-0" / "x.log").mkdir(parents=True)
    found = segments.segment_files(
        [root, logdir / "orders-0", logdir / "orders-0" / "00000000000000000000.log"]
    )
    assert found == [root / "orders-0" / "00000000000000000000.log"]  # the topic and partition of its folder
    summary = decode_segments(found, tmp_path / "out")
    assert (summary.files, summary.records) == (1, 150)
    (tmp_path / "orders-9").mkdir()  # named beside a good one: a mistake, not nothing to read
    with pytest.raises(OSError, match=r"no \*\.log segment files in this folder") as e:
        segments.segment_files([logdir / "orders-0", tmp_path / "orders-9"])
    assert e.value.filename == str(tmp_path / "orders-9")
    fifo = root / "pipe-0" / "00000000000000000000.log"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        segments.segment_files([root])
    fifo.unlink()
    out = root / "out.log"  # an output folder the input walk would find
    cmd = [sys.executable, "-m", "arrowkafka.cli", "segments", str(root), "-o", str(out)]
    for _ in range(2):  # and again over its own output, with --overwrite
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert run.returncode == 0, run.stderr
        assert pq.read_table(out / "records.parquet").num_rows == 150
        cmd.append("--overwrite")


def test_internal_topics_without_payloads(logdir: Path, tmp_path: Path) -> None:
    summary = decode_segments([logdir], tmp_path, payloads=False)
    assert summary.rejects == 0
    assert "key" not in pq.read_table(tmp_path / "records.parquet").column_names
    assert pq.read_table(tmp_path / "consumer_offsets.OffsetCommit.parquet").num_rows == 3
    # a damaged batch of an internal topic: its keys and values were read for the typed
    # tables, but its reject keeps no bytes
    damaged = bytearray((logdir / "__consumer_offsets-7" / "00000000000000000000.log").read_bytes())
    damaged[80] ^= 0xFF
    (tmp_path / "in" / "__consumer_offsets-7").mkdir(parents=True)
    (tmp_path / "in" / "__consumer_offsets-7" / "00000000000000000000.log").write_bytes(bytes(damaged))
    for payloads in (True, False):
        decode_segments([tmp_path / "in"], tmp_path / f"out-{payloads}", payloads=payloads)
    (kept,) = pq.read_table(tmp_path / "out-True" / "rejects.parquet").to_pylist()
    assert kept["reason"].startswith("CRC-32C mismatch") and bytes(damaged).startswith(kept["raw"])
    assert pq.read_table(tmp_path / "out-False" / "rejects.parquet").to_pylist() == [{**kept, "raw": None}]


def test_a_zero_tail_in_the_last_piece_is_no_reject(logdir: Path, tmp_path: Path) -> None:
    """The active segment of a broker that preallocates files ends in zeros: whatever piece
    they start in, they end the file with no reject (and a zero length with data after it
    within the piece is one)."""
    whole = (logdir / "orders-0" / "00000000000000000000.log").read_bytes()
    for name, tail, rejects in (("zeros", bytes(4096), 0), ("data after", bytes(12) + b"x" * 100, 1)):
        d = tmp_path / name / "orders-0"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(whole + tail)
        summary = decode_segments([d], tmp_path / f"{name}-out")  # one piece: the file is small
        assert (summary.records, summary.rejects) == (150, rejects), name
        zeros = summary.zeros.get(str(d / "00000000000000000000.log"), 0)
        assert (zeros, summary.unread) == ((len(tail) if not rejects else 0), {}), name


def test_one_bad_internal_record_loses_no_other(tmp_path: Path) -> None:
    """A __consumer_offsets record of an unknown type is a reject naming its offset; the
    records around it, in its batch and in others, still come out typed."""
    keys, values = offsets_records()
    recs = [Rec(k, v, [], T0) for k, v in zip(keys.to_pylist(), values.to_pylist(), strict=True)]
    bad = Rec(struct.pack(">h", 99) + b"junk", b"\x00\x00", [], T0)
    d = tmp_path / "in" / "__consumer_offsets-7"
    d.mkdir(parents=True)
    first = build(2, 0, [*recs[:2], bad, *recs[2:]])
    (d / "00000000000000000000.log").write_bytes(first + build(2, 0, recs, offset=len(recs) + 1))
    summary = decode_segments([d], tmp_path / "out")
    assert summary.rejects == 1
    (reject,) = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()
    assert (
        reject["position"] == 0
        and reject["reason"] == "__consumer_offsets record at offset 2: unknown record type 99"
    )
    commits = pq.read_table(tmp_path / "out" / "consumer_offsets.OffsetCommit.parquet").to_pylist()
    # the fixture's OffsetCommit records are its 1st, 2nd and 4th: here at 0, 1, 4 and 5, 6, 8
    assert [c["record_offset"] for c in commits] == [0, 1, 4, 5, 6, 8]
    assert summary.tables["consumer_offsets.OffsetCommit"] == 6


def test_a_timestamp_past_what_microseconds_hold(tmp_path: Path) -> None:
    """A producer that writes nanoseconds where Kafka wants milliseconds (Kafka takes them):
    the files hold microseconds (every reader's unit), so that time is null there, not wrapped
    around into another; decode_records keeps it as written."""
    ns = 1_700_000_000_123_456_789
    d = tmp_path / "in" / "clock-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(build(2, 0, [Rec(b"k", b"v", [], ns)]))
    decode_segments([d], tmp_path / "out")
    for table, column in (("records", "timestamp"), ("record_batches", "base_timestamp")):
        got = pq.read_table(tmp_path / "out" / f"{table}.parquet").column(column)
        assert got.type == pa.timestamp("us", "UTC") and got.to_pylist() == [None], table
        assert duckdb.sql(f"SELECT {column} FROM '{tmp_path}/out/{table}.parquet'").fetchall() == [(None,)]
    got = ak.decode_records([(d / "00000000000000000000.log").read_bytes()]).records.column("timestamp")
    assert got.cast(pa.int64()).to_pylist() == [ns]
    # a time microseconds hold is kept
    (d / "00000000000000000000.log").write_bytes(build(2, 0, [Rec(b"k", b"v", [], ns // 1_000_000)]))
    decode_segments([d], tmp_path / "again")
    got = pq.read_table(tmp_path / "again" / "records.parquet").column("timestamp")
    assert got.cast(pa.int64()).to_pylist() == [ns // 1_000_000 * 1000]


def _six_batches() -> list[bytes]:
    return [
        _at(build(2, 0, [Rec(b"k%d" % i, bytes(200), [], T0) for i in range(5)]), 5 * b) for b in range(6)
    ]


def test_damage_where_a_piece_ends_is_read_as_inside_one(tmp_path: Path) -> None:
    """A batch whose magic byte is damaged, or a hole of zeros, ends up the same whether a piece
    of the file ends inside it or not: a reject of its whole bytes, and every batch after
    it read (a hole with data after it is no preallocated tail: the batch after it is found)."""
    parts = _six_batches()
    bad = parts[2][:16] + b"\x82" + parts[2][17:]
    start = len(parts[0]) + len(parts[1])
    for name, whole, raw, reason in (
        ("magic", b"".join([*parts[:2], bad, *parts[3:]]), bad, "unknown magic 130"),
        ("hole", b"".join([*parts[:2], bytes(4096), *parts[2:]]), bytes(4096), "batch length 0 is below"),
    ):
        for chunk in (len(whole), start + 40):  # one piece; a piece that ends inside the damage
            d = tmp_path / f"{name}-{chunk}" / "orders-0"
            d.mkdir(parents=True)
            (d / "00000000000000000000.log").write_bytes(whole)
            summary = decode_segments([d], tmp_path / f"out-{name}-{chunk}", chunk_bytes=chunk)
            (reject,) = pq.read_table(tmp_path / f"out-{name}-{chunk}" / "rejects.parquet").to_pylist()
            assert (summary.records, reject["position"]) == (25 if name == "magic" else 30, start), (
                name,
                chunk,
            )
            assert reject["reason"].startswith(reason) and reject["raw"] == raw, (name, chunk)
            assert summary.skipped == ({} if name == "magic" else {str(d / "00000000000000000000.log"): 4096})


def test_a_piece_of_bad_internal_records_costs_a_bounded_search(tmp_path: Path) -> None:
    d = tmp_path / "in" / "__consumer_offsets-1"
    d.mkdir(parents=True)
    junk = [Rec(struct.pack(">h", 99) + b"%d" % i, b"\x00\x00", [], T0) for i in range(5000)]
    (d / "00000000000000000000.log").write_bytes(build(2, 0, junk))
    summary = decode_segments([d], tmp_path / "out")
    rejects = pq.read_table(tmp_path / "out" / "rejects.parquet")
    assert 1 < summary.rejects == rejects.num_rows <= segments.SPLIT_CALLS
    assert pq.ParquetFile(tmp_path / "out" / "rejects.parquet").num_row_groups == 1
    told = [int(r.split()[1]) if " records, " in r else 1 for r in rejects.column("reason").to_pylist()]
    assert sum(told) == 5000  # every record is in one reject or another
    # the summary tells them from rejected batches: none of those
    assert summary.internal_rejects == summary.rejects
    said = summary.render()
    assert "rejected batches 0\n" in said and f"internal topics {summary.rejects} (" in said


def test_a_folder_name_that_names_no_partition(logdir: Path, tmp_path: Path) -> None:
    """``backup-20240115120000`` looks like ``<topic>-<partition>`` but its number is no int32."""
    d = tmp_path / "backup-20240115120000"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(
        (logdir / "orders-0" / "00000000000000000000.log").read_bytes()
    )
    summary = decode_segments([d], tmp_path / "out")
    assert summary.records == 150 and summary.rejects == 0
    batches = pq.read_table(tmp_path / "out" / "record_batches.parquet")
    assert set(batches.column("topic").to_pylist()) == {None} and set(
        batches.column("partition").to_pylist()
    ) == {None}


def test_a_tiered_storage_bucket_names_topic_and_partition(logdir: Path, tmp_path: Path) -> None:
    """A copy of a tiered-storage bucket: ``<topic>-<topic id>/<partition>/<offset>-<segment
    id>.log``; a digits-only folder under a name with no topic id names neither."""
    segment = (logdir / "orders-0" / "00000000000000000000.log").read_bytes()
    for folder, want in (
        ("payments.eu-Xq3TRJp0Sk-1ieYEbvX_AA/12", ("payments.eu", 12)),
        ("payments-12/7", (None, None)),  # 7 is no partition folder: no topic id above it
        ("backups/12", (None, None)),
    ):
        d = tmp_path / folder
        d.mkdir(parents=True)
        (d / "00000000000000000000-kQYBO0UlQj2nn8NhTKR3vA.log").write_bytes(segment)
        assert segments._topic_partition(d / "00000000000000000000-kQYBO0UlQj2nn8NhTKR3vA.log") == want, (
            folder
        )
    summary = decode_segments([tmp_path / "payments.eu-Xq3TRJp0Sk-1ieYEbvX_AA"], tmp_path / "out")
    batches = pq.read_table(tmp_path / "out" / "record_batches.parquet")
    assert summary.records == 150
    assert set(zip(batches["topic"].to_pylist(), batches["partition"].to_pylist(), strict=True)) == {
        ("payments.eu", 12)
    }


def test_a_forged_length_or_a_zero_tail_ends_the_file(logdir: Path, tmp_path: Path) -> None:
    """A length past the file's end, or one below 5, is damage when a whole batch lies further
    on: a reject of the bytes up to it, and the file read on from there; zeros to the end are
    a preallocated tail, no reject; a batch cut by the file's end is a partial batch row."""
    whole = (logdir / "orders-0" / "00000000000000000000.log").read_bytes()
    first = 12 + struct.unpack_from(">i", whole, 8)[0]
    second = first + 12 + struct.unpack_from(">i", whole, first + 8)[0]

    def length(n: int) -> bytes:  # the second batch with its length forged
        return whole[:first] + whole[first : first + 8] + struct.pack(">i", n) + whole[first + 12 :]

    for name, damaged, n_batches, records, rejects in (
        ("past the end", length(1 << 30), 2, 100, 1),
        ("negative", length(-7), 2, 100, 1),
        ("inside the next", length(second - first + 40), 2, 100, 1),  # its CRC fails; no walk after it
        ("zeros", whole[:first] + bytes(1 << 20), 1, 50, 0),  # a preallocated segment's unwritten tail
        ("torn", whole[: second + 200], 2, 100, 0),  # the file ends inside its last batch
        ("zeros then junk", whole[:first] + bytes(1 << 16) + b"junk" * 1000, 1, 50, 1),
    ):
        for chunk in (1000, 4096, 1 << 22):  # pieces that end inside the damage, or hold it all
            d = tmp_path / f"{name}-{chunk}" / "orders-0"
            d.mkdir(parents=True)
            file = str(d / "00000000000000000000.log")
            Path(file).write_bytes(damaged)
            summary = decode_segments([d], tmp_path / f"{name}-{chunk}-out", chunk_bytes=chunk)
            batches = pq.read_table(tmp_path / f"{name}-{chunk}-out" / "record_batches.parquet").to_pylist()
            rejected = pq.read_table(tmp_path / f"{name}-{chunk}-out" / "rejects.parquet").to_pylist()
            good = [b for b in batches if b["error"] is None and not b["partial"]]
            assert (len(good), summary.records, summary.rejects) == (n_batches, records, rejects), (
                name,
                chunk,
            )
            assert [b["base_offset"] for b in good] == ([0, 50] if name == "torn" else [0, 100])[
                :n_batches
            ], (name, chunk)
            if name in ("past the end", "negative", "inside the next"):  # the bytes up to the third batch
                assert [(r["position"], r["raw"]) for r in rejected] == [(first, damaged[first:second])], (
                    name,
                    chunk,
                )
                assert (
                    summary.skipped == {file: second - first}
                    and "read on at the next whole one" in (rejected[0]["reason"])
                )
            if name == "torn":
                assert batches[-1]["partial"] and summary.partial_bytes == {file: 200} and not rejected
                assert summary.codecs == {"none": 1, "gzip": 1, "codec unknown": 1}  # (it said "None")
            if name == "zeros":
                assert summary.zeros == {file: 1 << 20} and "preallocated" in summary.render()
            if name == "zeros then junk":  # no batch to be found: the rest is counted, not read
                assert (
                    sum(map(len, [r["raw"] for r in rejected])) + summary.unread.get(file, 0)
                    == len(damaged) - first
                )
            accounted = (
                sum(b["size"] for b in batches if b["error"] is None)
                + sum(len(r["raw"]) for r in rejected)
                + sum(d.get(file, 0) for d in (summary.unread, summary.zeros))
            )
            assert accounted == len(damaged), (name, chunk)
