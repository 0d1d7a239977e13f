"""Finding a batch again after bytes that hold none (``find_batch``, what ``arrowkafka segments``
reads on from after damage): every whole batch of every magic and codec is found where it
starts, nothing is found in random bytes, zeros, or a batch cut short, offsets below the
floor are passed over, and bytes made to look like batch headers cost a bounded search.
Run under NUMBA_DISABLE_JIT too, where numpy's bounds checks hold the kernel inside its
input."""

from __future__ import annotations

import random
import struct

import numpy as np
from batchtools import Rec, build

from arrowkafka.kernels import records as k
from arrowkafka.records.decode import find_batch

T0 = 1_700_000_000_000
KINDS = [(2, 0), (2, 1), (2, 2), (2, 3), (2, 4), (1, 0), (1, 1), (1, 2), (1, 3), (0, 0), (0, 1), (0, 2)]


def _at(batch: bytes, base: int) -> bytes:
    return struct.pack(">q", base) + batch[8:]


def _segment() -> tuple[bytes, list[int]]:
    """Batches of every magic and codec back to back, offsets growing; where each entry starts
    (an uncompressed magic 0/1 message set is one entry per message)."""
    out, starts, base = b"", [], 0
    for magic, codec in KINDS:
        recs = [Rec(b"k%d" % i, b"v" * (40 * i), [], T0 + i) for i in range(3)]
        entries = build(magic, codec, recs)
        pos = 0
        while pos < len(entries):  # each entry at its own offset, as a broker writes them
            n = 12 + struct.unpack_from(">i", entries, pos + 8)[0]
            starts.append(len(out))
            out += _at(entries[pos : pos + n], base)
            base += 3 if magic == 2 or codec else 1
            pos += n
    return out, starts


def test_every_whole_batch_is_found_where_it_starts() -> None:
    data, starts = _segment()
    found, at = [], 0
    while (p := find_batch(data, at, len(data))) is not None:
        found.append(p)
        at = p + 1
    assert found == starts
    # from inside one, the next one; past the last, none
    assert [find_batch(data, s + 1, len(data)) for s in starts] == [*starts[1:], None]


def test_no_batch_in_random_bytes_zeros_or_a_cut_batch() -> None:
    rng = random.Random(3)
    junk = rng.randbytes(1 << 16)
    assert find_batch(junk, 0, len(junk)) is None
    assert find_batch(bytes(1 << 16), 0, 1 << 16) is None
    data, starts = _segment()
    last = data[starts[-2] : starts[-1]]  # a whole entry: found; cut anywhere: not
    assert find_batch(last, 0, len(last)) == 0
    for cut in range(len(last)):
        assert find_batch(last[:cut], 0, len(last)) is None, cut
    # after junk and zeros, the batch that follows
    assert find_batch(junk + bytes(100) + data, 1, 1 << 20) == len(junk) + 100


def test_offsets_below_the_floor_are_passed_over() -> None:
    data, starts = _segment()
    offsets = [struct.unpack_from(">q", data, s)[0] for s in starts]
    for s, offset in zip(starts, offsets, strict=True):
        assert find_batch(data, 0, len(data), min_offset=offset) == s
    assert find_batch(data, 0, len(data), min_offset=offsets[-1] + 1) is None


def test_a_damaged_batch_is_not_found() -> None:
    data, starts = _segment()
    for i, s in enumerate(starts[:-1]):
        entry = bytearray(data[s : starts[i + 1]])
        entry[len(entry) // 2 + 10] ^= 0x01  # a byte its CRC covers
        assert find_batch(bytes(entry), 0, len(entry)) is None, i


def test_headers_made_to_pass_cost_a_bounded_search() -> None:
    """Magic 2 headers every 61 bytes, each claiming the rest of the buffer, none with its CRC:
    checking them all would cost the buffer's size squared over 122 bytes of CRC."""
    n = 1 << 16
    buf = bytearray(n)
    for p in range(0, n - 61, 61):
        struct.pack_into(">qiib", buf, p, 0, n - p - 12, 0, 2)  # offset, length, epoch, magic
        struct.pack_into(">i", buf, p + 57, 1)  # one record
    data = np.frombuffer(bytes(buf), np.uint8)
    got = k.find_batch(data, 0, n, 0, k.CRC32_TABLE, k.CRC32C_TABLE, 16 * n)
    assert got == k.OUT_OF_BUDGET
    assert find_batch(bytes(buf), 0, n) is None


def test_values_of_small_ints_cost_no_crc() -> None:
    """Big-endian int32s below 2^20 (ids, counters) look like the start of magic 0 messages and
    of magic 2 batches at many positions: the key and value lengths a message must fill, and
    the records a batch's length must hold, turn them all away before any CRC."""
    data = np.random.default_rng(1).integers(0, 1 << 20, 1 << 16).astype(">i4").view(np.uint8)
    n = len(data)
    assert k.find_batch(data, 0, n, 0, k.CRC32_TABLE, k.CRC32C_TABLE, n // 64) == k.NOT_FOUND
