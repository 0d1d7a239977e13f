"""Record batches: the kernels that find batches, check them, and fill record columns.

Kafka stores records in three formats, told apart by the magic byte at offset 16 of every entry
(Kafka's ``LegacyRecord`` and ``DefaultRecordBatch``):

- magic 0 and 1, a *message set*: ``offset i64, size i32, crc u32, magic i8, attributes i8,
  [timestamp i64: magic 1], key (i32 length, -1 null), value (i32 length, -1 null)``. A
  compressed message (a *wrapper*) holds, in its value, an inner message set.
- magic 2, a *record batch*: a 61-byte header, then records of zigzag varints.

Either way an entry starts with ``offset i64, length i32`` and is ``12 + length`` bytes long, so
the kernels hop entry to entry the same way and call each one a *batch* (a legacy message is a
batch of one record; a wrapper a batch of its inner messages), as Kafka's ``RecordBatch`` does.

The work is done in four steps, like the message decoder's two passes:

1. ``count_batches``: hop the entries of each input row and count them.
2. ``read_batches``: read every entry's header into ``hdr`` (one int64 row per column ``H_*``),
   verify its CRC (CRC-32 for magic 0/1, CRC-32C for magic 2), and name the region holding its
   records. The caller decompresses the regions of compressed batches into a second buffer.
3. ``walk_records(fill=False)``: walk the records of every good batch, check every length, varint and
   header key, and count records, key, value and header bytes.
4. ``walk_records(fill=True)``: the caller allocates every column once from those counts; the same walk
   writes them.

Numba's ``inline="always"`` is kept for what runs per record (varints, lengths, copies, views);
per-batch readers, ``_i`` and the error paths are plain functions (LLVM still inlines the small
ones): inlined by Numba at each of their call sites they made the first call compile 40 s of
CPU instead of 26. (So is the magic 2 walk: a second copy of it for views, its flags constants,
was 1.2 ns a record faster in the cache and made that first call 58 s instead of 26.)

Kernels never raise and never read outside ``data[starts[i]:ends[i]]`` (or a batch's region of
``inner``): a batch that fails gets an error code ``R_*`` in ``hdr[H_STATUS]`` with the byte
where it failed and two details, and the walk goes on with the next batch.
"""

from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from .decode import _be, _signed, _utf8_ok, _uvarint_inline
from .hints import prefetch
from .isa import E_TRUNCATED, OK
from .jit import njit
from .memory import LITTLE, copy_bytes, data_pointer, load_u32, load_u64, raw, store_u64

# ---- one int64 row of ``hdr`` per column; ``hdr[H_X, b]`` is column X of batch b ----
H_ROW = 0  # input row
H_POS = 1  # byte position of the batch inside its row
H_SIZE = 2  # bytes of the batch present in the row (12 + length, less for a partial batch)
H_STATUS = 3  # B_OK, B_PARTIAL or an error R_*
H_ERR_AT = 4  # where it failed: byte inside the row, or inside the decompressed records
H_D1 = 5  # details of the error (lengths, counts, CRCs)
H_D2 = 6
H_BASE_OFFSET = 7  # the entry's offset field (magic 0/1: the message's own offset)
H_LENGTH = 8  # the length field: bytes after it
H_EPOCH = 9  # partition leader epoch (magic 2)
H_MAGIC = 10
H_CRC = 11  # stored
H_CRC_CALC = 12  # computed; -1: not checked (verify_crc=False), CRC_IN_WALK: not yet
H_ATTR = 13  # attributes
H_LAST_DELTA = 14  # last offset delta (magic 2)
H_BASE_TS = 15  # base timestamp (magic 2)
H_MAX_TS = 16  # max timestamp (magic 2); the message timestamp (magic 1)
H_PID = 17  # producer id, epoch, base sequence (magic 2)
H_PEPOCH = 18
H_BASE_SEQ = 19
H_COUNT = 20  # records count the batch claims (magic 2)
H_REGION_START = 21  # where its records lie: in ``data`` or, once decompressed, in ``inner``
H_REGION_END = 22
H_INNER = 23  # 1 when the region is in ``inner`` (the caller decompressed it)
H_NREC = 24  # counted by ``walk_records(fill=False)``
H_KEY_BYTES = 25
H_VALUE_BYTES = 26
H_NHEADERS = 27
H_HKEY_BYTES = 28
H_HVALUE_BYTES = 29
H_FIRST_INNER = 30  # magic 0/1 wrappers: the first and last inner offsets as written
H_LAST_INNER = 31
H_ABS = 32  # byte position of the batch inside ``data``
NH = 33

# An uncompressed magic 2 batch's CRC-32C is computed by the walk, just before it reads the
# records: the CRC brings the batch into the cache, and the walk then reads it from there (the
# two in turn over 32 MB of input took as long as each alone, added up)
CRC_IN_WALK = -2

# ---- batch status ----
B_OK = 0
B_PARTIAL = 1  # the row ends inside this batch (a Fetch response cut at its byte limit)

# ---- errors; reasons and details are rendered in arrowkafka.records ----
R_LENGTH = 2  # batch length below what its magic needs (d1 length, d2 minimum)
R_MAGIC = 3  # magic other than 0, 1, 2 (d1 magic)
R_CRC = 4  # stored CRC differs from the computed one (d1 stored, d2 computed)
R_CODEC = 5  # codec unknown, or not allowed in this magic (d1 codec, d2 magic)
R_COUNT = 6  # records count differs from the records found (d1 claimed, d2 found)
R_OVERRUN = 7  # a field runs past the end of its record or batch (d1 needed, d2 left)
R_RECORD_SIZE = 8  # a record's fields do not fill its length (d1 length, d2 read)
R_VARINT = 9  # a varint longer or larger than its type
R_NEGATIVE = 10  # a length or count below what the format allows (d1 value)
R_UTF8 = 11  # a header key that is not UTF-8
R_TRAILING = 12  # bytes left after the last record (d1 bytes)
R_NESTED = 13  # a compressed message inside a wrapper (d1 codec)
R_INNER_MAGIC = 14  # an inner message whose magic differs from its wrapper's (d1 inner, d2 wrapper)
R_INNER_CRC = 15  # an inner message whose CRC-32 does not check (d1 stored, d2 computed)
R_DECOMPRESS = 16  # set by the caller: the codec refused the region
R_TOO_BIG = 17  # set by the caller: the region decompresses past the cap (d1 cap)
R_NO_VALUE = 18  # a compressed wrapper whose value is null
R_OFFSET_RANGE = 19  # a record's base offset + offset delta passes int64 (d1 delta)
R_TS_RANGE = 20  # a record's base timestamp + timestamp delta passes int64 (d1 delta)
I64_MAX = 2**63 - 1
I64_MIN = -(2**63)
FULL = -1  # not an error: the batch does not fit what is left of the columns (walk_records)

# attributes
CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

# Byte offsets inside an entry (Kafka's DefaultRecordBatch and LegacyRecord): both formats start
# with offset int64 and length int32, and keep the magic byte at 16.
AT_LENGTH = 8
AT_MAGIC = 16
V2_EPOCH = 12  # magic 2: partition leader epoch int32, magic, then:
V2_CRC = 17  # uint32
V2_ATTR = 21  # int16
V2_LAST_DELTA = 23  # int32
V2_BASE_TS = 27  # int64
V2_MAX_TS = 35  # int64
V2_PID = 43  # int64
V2_PEPOCH = 51  # int16
V2_BASE_SEQ = 53  # int32
V2_COUNT = 57  # int32
V2_HEADER = 61  # bytes of a magic 2 batch header; records start here
V2_CRC_FROM = V2_ATTR  # CRC-32C covers attributes to the end
LEGACY_CRC = 12  # magic 0/1: crc uint32, magic, then:
LEGACY_ATTR = 17  # int8
LEGACY_TS = 18  # magic 1: timestamp int64; then (magic 0: here) key and value
LEGACY_CRC_FROM = AT_MAGIC  # CRC-32 covers magic to the end
LEGACY_MIN = (14, 22)  # length of an empty message: crc, magic, attributes, [timestamp], two lengths


def _crc_tables(poly: int) -> np.ndarray:
    """Slicing-by-8 tables of a reflected CRC-32 polynomial: table[k][b] is the CRC of byte b
    followed by k zero bytes."""
    t = np.zeros((8, 256), dtype=np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t[0, b] = c
    for k in range(1, 8):
        for b in range(256):
            prev = int(t[k - 1, b])
            t[k, b] = (prev >> 8) ^ int(t[0, prev & 0xFF])
    return t


CRC32_TABLE = _crc_tables(0xEDB88320)  # CRC-32 (IEEE 802.3): magic 0 and 1
CRC32C_TABLE = _crc_tables(0x82F63B78)  # CRC-32C (Castagnoli): magic 2


def _has_x86(feature: str) -> bool:
    """Does Numba compile for an x86 CPU with ``feature``: the host's, or the features
    ``NUMBA_CPU_FEATURES`` names (caches built for other machines)?"""
    if getattr(config, "DISABLE_JIT", False) or platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    named = getattr(config, "CPU_FEATURES", None)
    if named is not None:
        return f"+{feature}" in named.split(",")
    import llvmlite.binding as llvm

    return bool(llvm.get_host_cpu_features().get(feature))


# CRC-32C by the CPU's own instruction (SSE 4.2 ``crc32``: 8 bytes a step) where there is one;
# elsewhere, and when the kernels run as Python, the tables below. Tests hold both to crc32c.
HW_CRC32C = _has_x86("sse4.2")
# CRC-32 (magic 0 and 1) by carry-less multiplication (PCLMULQDQ) where there is one: no CPU
# has an instruction for this polynomial (see ``crc32_clmul``)
HW_CLMUL = _has_x86("pclmul")
# and 128 bytes folded at a time in two 512-bit registers (AVX-512 VPCLMULQDQ), for CRC-32C
# too, where the CPU has it (``_fold_wide``): CRC-32C of batches of 16-23 KB 12-14 -> 32-35
# GB/s read from memory, of 1 KB 10.7 -> 26; CRC-32 of 1 KB messages 6.6 -> 15.5
HW_VCLMUL = HW_CLMUL and _has_x86("vpclmulqdq") and _has_x86("avx512f")


@intrinsic
def _crc32c_u64(typingctx, crc, word):
    """LLVM's x86 ``crc32`` on 8 bytes (little-endian ``word``)."""
    sig = types.uint32(types.uint32, types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i64, [i64, i64]), "llvm.x86.sse42.crc32.64.64"
        )
        return builder.trunc(builder.call(fn, [builder.zext(args[0], i64), args[1]]), ir.IntType(32))

    return sig, codegen


@intrinsic
def _crc32c_u8(typingctx, crc, byte):
    """LLVM's x86 ``crc32`` on one byte."""
    sig = types.uint32(types.uint32, types.uint8)

    def codegen(context, builder, signature, args):
        i32, i8 = ir.IntType(32), ir.IntType(8)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i32, [i32, i8]), "llvm.x86.sse42.crc32.32.8"
        )
        return builder.call(fn, args)

    return sig, codegen


CRC_LANE = 512  # bytes per lane: crc32c_hw runs three lanes of this side by side
# and of these where the data is long enough: fewer joins. Three streams of 8 KiB each are long
# enough for the CPU's prefetcher to follow them from memory; shorter ones are not, so each
# step prefetches the next step's lanes (``_three_lanes``): batches of 16-23 KB, Kafka's
# usual (a producer's default batch.size is 16 KiB), 7.5-7.9 -> 12.7-12.9 GB/s here, and 14.5-14.8
# with the middle lanes; 100 KB batches 16.1 -> 21.4
CRC_LONG_LANE = 8192
CRC_MID_LANE = 2048


def _apply(images: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The linear map (over GF(2)) whose image of bit j is ``images[j]``, applied to each of v."""
    bits = (v[:, None] >> np.arange(32, dtype=np.uint32)) & np.uint32(1)
    return np.bitwise_xor.reduce(np.where(bits == 1, images[None, :], np.uint32(0)), axis=1)


def _shift_tables(table0: np.ndarray, n: int) -> np.ndarray:
    """4 x 256 tables of the linear map "n zero bytes more" on a raw CRC register: the register
    after A + B is shift(register after A) ^ (register after B started from zero)."""
    basis = np.array([1 << j for j in range(32)], dtype=np.uint32)
    # the map of one zero byte, raised to the n-th power by squaring (a byte at a time, 8,192
    # steps took 70 ms of every process's import)
    step = table0[basis & np.uint32(0xFF)] ^ (basis >> np.uint32(8))
    while n:
        if n & 1:
            basis = _apply(step, basis)
        step, n = _apply(step, step), n >> 1
    # out[k, b] = XOR of basis[8k + j] over the bits j set in b, for all 4 x 256 at once
    bits = (np.arange(256)[:, None] >> np.arange(8)) & 1  # 256 x 8
    picked = np.where(bits[None, :, :] == 1, basis.reshape(4, 1, 8), np.uint32(0))  # 4 x 256 x 8
    return np.bitwise_xor.reduce(picked, axis=2).astype(np.uint32)


CRC32C_SHIFT = _shift_tables(CRC32C_TABLE[0], CRC_LANE)
CRC32C_LONG_SHIFT = _shift_tables(CRC32C_TABLE[0], CRC_LONG_LANE)
CRC32C_MID_SHIFT = _shift_tables(CRC32C_TABLE[0], CRC_MID_LANE)


@njit(inline="always")
def _shift(table, c):
    """The CRC-32C register c followed by the zero bytes ``table`` stands for."""
    return (
        table[0, c & np.uint32(0xFF)]
        ^ table[1, (c >> np.uint32(8)) & np.uint32(0xFF)]
        ^ table[2, (c >> np.uint32(16)) & np.uint32(0xFF)]
        ^ table[3, c >> np.uint32(24)]
    )


@njit(inline="always")
def _three_lanes(data, i, c, lane, table, end):
    """The register after data[i:i + 3 * lane], from c: three lanes side by side, joined,
    prefetching the next step's lanes (clamped to ``end``) a cache line at a time."""
    a = c
    b = np.uint32(0)
    d = np.uint32(0)
    last = end - 1
    for line in range(i, i + lane, 64):
        prefetch(data, min(line + 3 * lane, last))
        prefetch(data, min(line + 4 * lane, last))
        prefetch(data, min(line + 5 * lane, last))
        for j in range(line, line + 64, 8):
            a = _crc32c_u64(a, load_u64(data, j))
            b = _crc32c_u64(b, load_u64(data, j + lane))
            d = _crc32c_u64(d, load_u64(data, j + 2 * lane))
    return _shift(table, _shift(table, a) ^ b) ^ d


@njit(cache=True, nogil=True)
def crc32c_hw(data, start, end, wide=HW_VCLMUL):
    """CRC-32C of data[start:end] by the CPU's instruction (only where HW_CRC32C): after the
    512-bit fold where there is one (``_fold_to_16``; ``wide``: asked for, HW_VCLMUL), which
    leaves under 16 bytes, else in lanes. The instruction takes 3 cycles and can start one a cycle, so
    three lanes run side by side and are joined by ``_shift`` (long lanes while the data lasts,
    then middle, then short ones); then one lane for the rest."""
    c = np.uint32(0xFFFFFFFF)
    i = start
    if HW_VCLMUL:  # (a constant: elsewhere the fold's intrinsics are not compiled)
        if wide and end - i >= 64:
            a0, a1, i = _fold_to_16(data, i, end, c, CRC32C_FOLD, True)
            c = _crc32c_u64(_crc32c_u64(np.uint32(0), a0), a1)
    while end - i >= 3 * CRC_LONG_LANE:
        c = _three_lanes(data, i, c, CRC_LONG_LANE, CRC32C_LONG_SHIFT, end)
        i += 3 * CRC_LONG_LANE
    while end - i >= 3 * CRC_MID_LANE:
        c = _three_lanes(data, i, c, CRC_MID_LANE, CRC32C_MID_SHIFT, end)
        i += 3 * CRC_MID_LANE
    while end - i >= 3 * CRC_LANE:
        c = _three_lanes(data, i, c, CRC_LANE, CRC32C_SHIFT, end)
        i += 3 * CRC_LANE
    while end - i >= 8:
        c = _crc32c_u64(c, load_u64(data, i))
        i += 8
    while i < end:
        c = _crc32c_u8(c, data[i])
        i += 1
    return c ^ np.uint32(0xFFFFFFFF)


@njit(inline="always")
def _crc_word(table, c, w):
    """The CRC register c after the 8 bytes of the little-endian word w (slicing-by-8)."""
    lo = c ^ np.uint32(w & np.uint64(0xFFFFFFFF))
    hi = np.uint32(w >> np.uint64(32))
    return (
        table[7, lo & np.uint32(0xFF)]
        ^ table[6, (lo >> np.uint32(8)) & np.uint32(0xFF)]
        ^ table[5, (lo >> np.uint32(16)) & np.uint32(0xFF)]
        ^ table[4, lo >> np.uint32(24)]
        ^ table[3, hi & np.uint32(0xFF)]
        ^ table[2, (hi >> np.uint32(8)) & np.uint32(0xFF)]
        ^ table[1, (hi >> np.uint32(16)) & np.uint32(0xFF)]
        ^ table[0, hi >> np.uint32(24)]
    )


@njit(inline="always")
def _crc_tail(table, c, data, i, end):
    """The CRC register c after data[i:end], eight bytes a step by the tables (``_crc_word``'s
    step, reading the last four bytes one by one: through a word, 14% slower), then a byte."""
    while end - i >= 8:
        lo = c ^ (
            np.uint32(data[i])
            | (np.uint32(data[i + 1]) << np.uint32(8))
            | (np.uint32(data[i + 2]) << np.uint32(16))
            | (np.uint32(data[i + 3]) << np.uint32(24))
        )
        c = (
            table[7, lo & np.uint32(0xFF)]
            ^ table[6, (lo >> np.uint32(8)) & np.uint32(0xFF)]
            ^ table[5, (lo >> np.uint32(16)) & np.uint32(0xFF)]
            ^ table[4, lo >> np.uint32(24)]
            ^ table[3, data[i + 4]]
            ^ table[2, data[i + 5]]
            ^ table[1, data[i + 6]]
            ^ table[0, data[i + 7]]
        )
        i += 8
    while i < end:
        c = table[0, (c ^ np.uint32(data[i])) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
        i += 1
    return c


@njit(cache=True, nogil=True)
def crc32(table, data, start, end):
    """CRC of data[start:end], eight bytes per step (slicing-by-8)."""
    return _crc_tail(table, np.uint32(0xFFFFFFFF), data, start, end) ^ np.uint32(0xFFFFFFFF)


@intrinsic
def _clmul(typingctx, a, b):
    """The carry-less product of two 64-bit words -> (low word, high word): x86 PCLMULQDQ."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        v2 = ir.VectorType(i64, 2)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(v2, [v2, v2, ir.IntType(8)]), "llvm.x86.pclmulqdq"
        )
        zero = ir.Constant(v2, None)
        va = builder.insert_element(zero, args[0], ir.Constant(i32, 0))
        vb = builder.insert_element(zero, args[1], ir.Constant(i32, 0))
        got = builder.call(fn, [va, vb, ir.Constant(ir.IntType(8), 0)])
        words = [builder.extract_element(got, ir.Constant(i32, k)) for k in (0, 1)]
        return context.make_tuple(builder, signature.return_type, words)

    return sig, codegen


def fold_constant(e: int, poly: int) -> int:
    """x^e mod P (P = x^32 + ``poly``, in normal bit order), bit-reflected and shifted left by
    one: the factor that carries a reflected CRC's 64-bit word forward, as Intel's "Fast CRC
    Computation for Generic Polynomials Using PCLMULQDQ" defines it. Folding 16 bytes across
    ``d`` bytes takes e = 8d + 32 for the low word and 8d - 32 for the high one (for CRC-32 these
    give the published 0x154442BD4, 0x1C6E41596 across 64 bytes and 0x1751997D0, 0xCCAA009E
    across 16, which Linux's crc32-pclmul uses; the tests check both)."""
    r = 1
    for _ in range(e):
        r = (r << 1) ^ ((1 << 32) | poly) if r & (1 << 31) else r << 1
    return int(f"{r:032b}"[::-1], 2) << 1


def _fold_constants(poly: int) -> tuple[np.uint64, ...]:
    """Across 128 bytes (low, high word), across 64, across 16."""
    return tuple(np.uint64(fold_constant(e, poly)) for e in (1056, 992, 544, 480, 160, 96))


CRC32_FOLD = _fold_constants(0x04C11DB7)  # CRC-32 (reflected 0xEDB88320)
CRC32C_FOLD = _fold_constants(0x1EDC6F41)  # CRC-32C (reflected 0x82F63B78)


@intrinsic
def _fold_wide(typingctx, data, i, end, first, factors):
    """The bytes from data[i] (``first`` XORed into the first 8) folded into one 64-byte
    remainder, in 512-bit registers -> (its eight words, where it stopped: fewer than 64 bytes
    before ``end`` are left). Two registers in turn while 128 bytes are left (the product's
    latency would leave one waiting), then joined, then one 64-byte step if 64 are left.
    x86 VPCLMULQDQ; the caller checked end - i >= 128. ``factors``: the polynomial's
    ``_fold_constants``, across 128 bytes then 64 (low and high words)."""
    sig = types.Tuple([types.UniTuple(types.uint64, 8), types.intp])(data, i, end, first, factors)

    def codegen(context, builder, signature, args):
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        v8 = ir.VectorType(i64, 8)
        clmul = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(v8, [v8, v8, i8]), "llvm.x86.pclmulqdq.512"
        )
        base = data_pointer(context, builder, signature.args[0], args[0])
        start = context.cast(builder, args[1], signature.args[1], types.intp)
        stop = context.cast(builder, args[2], signature.args[2], types.intp)
        k = cgutils.unpack_tuple(builder, args[4])

        def load(at):
            return builder.load(builder.bitcast(builder.gep(base, [at]), v8.as_pointer()), align=1)

        def spread(lo, hi):  # (lo, hi) in each 128-bit lane
            v = ir.Constant(v8, None)
            for lane in range(4):
                v = builder.insert_element(v, lo, ir.Constant(i32, 2 * lane))
                v = builder.insert_element(v, hi, ir.Constant(i32, 2 * lane + 1))
            return v

        def fold(x, by, onto):  # each lane's low word x k_lo, its high word x k_hi, onto the next
            low = builder.call(clmul, [x, by, ir.Constant(i8, 0x00)])
            high = builder.call(clmul, [x, by, ir.Constant(i8, 0x11)])
            return builder.xor(builder.xor(low, high), onto)

        def loop(name, states, at, step, body):
            """while stop - at >= step: states = body(states, at); at += step."""
            before = builder.basic_block
            head, inside, done = (builder.append_basic_block(f"{name}.{n}") for n in ("head", "body", "done"))
            builder.branch(head)
            builder.position_at_end(head)
            phis = [builder.phi(v8) for _ in states]
            where = builder.phi(i64)
            for phi, state in zip(phis, states, strict=True):
                phi.add_incoming(state, before)
            where.add_incoming(at, before)
            left = builder.sub(stop, where)
            builder.cbranch(builder.icmp_signed(">=", left, ir.Constant(i64, step)), inside, done)
            builder.position_at_end(inside)
            for phi, state in zip(phis, body(phis, where), strict=True):
                phi.add_incoming(state, builder.basic_block)
            where.add_incoming(builder.add(where, ir.Constant(i64, step)), builder.basic_block)
            builder.branch(head)
            builder.position_at_end(done)
            return phis, where

        by128, by64 = spread(k[0], k[1]), spread(k[2], k[3])
        x = load(start)
        x = builder.insert_element(
            x, builder.xor(builder.extract_element(x, ir.Constant(i32, 0)), args[3]), ir.Constant(i32, 0)
        )
        y = load(builder.add(start, ir.Constant(i64, 64)))
        at = builder.add(start, ir.Constant(i64, 128))

        def two(states, at):
            second = load(builder.add(at, ir.Constant(i64, 64)))
            return [fold(states[0], by128, load(at)), fold(states[1], by128, second)]

        (x, y), at = loop("fold128", [x, y], at, 128, two)
        x = fold(x, by64, y)
        (x,), at = loop("fold64", [x], at, 64, lambda states, at: [fold(states[0], by64, load(at))])
        words = [builder.extract_element(x, ir.Constant(i32, j)) for j in range(8)]
        out = context.make_tuple(builder, signature.return_type.types[0], words)
        return context.make_tuple(builder, signature.return_type, [out, at])

    return sig, codegen


@njit(inline="always")
def _fold(lo, hi, k_lo, k_hi, d_lo, d_hi):
    """A 16-byte remainder (lo, hi) carried forward past the bytes the constants stand for, onto
    the 16 bytes there (d_lo, d_hi)."""
    a_lo, a_hi = _clmul(lo, k_lo)
    b_lo, b_hi = _clmul(hi, k_hi)
    return a_lo ^ b_lo ^ d_lo, a_hi ^ b_hi ^ d_hi


@njit(cache=True, nogil=True)
def crc32_legacy(table, data, start, end):
    """The CRC-32 of magic 0 and 1 (``table`` is CRC32_TABLE) over data[start:end]: by
    carry-less multiplication where the CPU has it (1 KB messages: the table 1.3-1.8 GB/s
    here, 128-bit 6.6-8.5, 512-bit 15.5), else by the table."""
    if HW_CLMUL:
        return crc32_clmul(table, data, start, end)
    return crc32(table, data, start, end)


@njit(inline="always")
def _fold_lanes(data, i, end, c, k64_lo, k64_hi):
    """Register c and data[i:] folded 64 bytes at a time in four 128-bit lanes -> (the four
    lanes' words, where it stopped). The caller checked end - i >= 64."""
    a0 = load_u64(data, i) ^ np.uint64(c)
    a1 = load_u64(data, i + 8)
    b0, b1 = load_u64(data, i + 16), load_u64(data, i + 24)
    c0, c1 = load_u64(data, i + 32), load_u64(data, i + 40)
    d0, d1 = load_u64(data, i + 48), load_u64(data, i + 56)
    i += 64
    while end - i >= 64:
        a0, a1 = _fold(a0, a1, k64_lo, k64_hi, load_u64(data, i), load_u64(data, i + 8))
        b0, b1 = _fold(b0, b1, k64_lo, k64_hi, load_u64(data, i + 16), load_u64(data, i + 24))
        c0, c1 = _fold(c0, c1, k64_lo, k64_hi, load_u64(data, i + 32), load_u64(data, i + 40))
        d0, d1 = _fold(d0, d1, k64_lo, k64_hi, load_u64(data, i + 48), load_u64(data, i + 56))
        i += 64
    return a0, a1, b0, b1, c0, c1, d0, d1, i


# the 512-bit fold only where the CPU has it: compiled elsewhere, its intrinsic would fail
# LLVM's instruction selection even where it never runs
if HW_VCLMUL:

    @njit(inline="always")
    def _fold_64(data, i, end, c, fold, wide):
        if wide and end - i >= 128:
            w, i = _fold_wide(data, i, end, np.uint64(c), fold[:4])
            return w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], i
        return _fold_lanes(data, i, end, c, fold[2], fold[3])

else:

    @njit(inline="always")
    def _fold_64(data, i, end, c, fold, wide):
        return _fold_lanes(data, i, end, c, fold[2], fold[3])


@njit(inline="always")
def _fold_to_16(data, i, end, c, fold, wide):
    """Register c (XORed into the first bytes) and data[i:], folded 64 bytes at a time, then
    16, into one 16-byte remainder -> (its low word, its high word, where it stopped): the
    remainder's own CRC from a zero register is the register after every byte folded. The
    caller checked end - i >= 64; ``fold``: the polynomial's constants (``_fold_constants``);
    ``wide``: in 512-bit registers (only where HW_VCLMUL) where 128 bytes are left, else in
    four 128-bit lanes."""
    a0, a1, b0, b1, c0, c1, d0, d1, i = _fold_64(data, i, end, c, fold, wide)
    k16_lo, k16_hi = fold[4], fold[5]
    a0, a1 = _fold(a0, a1, k16_lo, k16_hi, b0, b1)
    a0, a1 = _fold(a0, a1, k16_lo, k16_hi, c0, c1)
    a0, a1 = _fold(a0, a1, k16_lo, k16_hi, d0, d1)
    while end - i >= 16:
        a0, a1 = _fold(a0, a1, k16_lo, k16_hi, load_u64(data, i), load_u64(data, i + 8))
        i += 16
    return a0, a1, i


@njit(cache=True, nogil=True)
def crc32_clmul(table, data, start, end, wide=HW_VCLMUL):
    """CRC-32 of data[start:end] by carry-less multiplication (only where HW_CLMUL; ``table``
    is CRC32_TABLE, for the last bytes; ``wide`` as for ``_fold_to_16``)."""
    c = np.uint32(0xFFFFFFFF)
    i = start
    if end - i >= 64:
        a0, a1, i = _fold_to_16(data, i, end, c, CRC32_FOLD, wide)
        c = _crc_word(table, _crc_word(table, np.uint32(0), a0), a1)
    return _crc_tail(table, c, data, i, end) ^ np.uint32(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def _i(data, pos, nbytes):
    """Signed big-endian integer of 1, 2, 4 or 8 bytes (caller checked the bounds)."""
    return _signed(_be(data, pos, nbytes), nbytes * 8)


@njit(inline="always")
def _zigzag(data, pos, end, bits):
    """A zigzag varint -> (value, pos, error)."""
    if pos < end and data[pos] < 0x80:  # one byte: most record fields
        u = np.int64(data[pos])
        return (u >> 1) ^ -(u & 1), pos + 1, OK
    if pos + 1 < end and data[pos + 1] < 0x80:  # two: deltas and lengths up to 8191
        u = np.int64(data[pos] & 0x7F) | (np.int64(data[pos + 1]) << 7)
        return (u >> 1) ^ -(u & 1), pos + 2, OK
    v, pos, err = _uvarint_inline(data, pos, end, bits)
    if err != OK:
        return np.int64(0), pos, R_OVERRUN if err == E_TRUNCATED else R_VARINT
    u = np.int64(v)
    return np.int64(v >> np.uint64(1)) ^ -(u & 1), pos, OK


@njit(cache=True, nogil=True)
def count_batches(data, starts, ends, counts):
    """counts[i] = entries in row i: whole batches, a partial one at the end, or the one whose
    length is below 5 (negative, zero: the row cannot be walked past it)."""
    total = 0
    for i in range(starts.shape[0]):
        pos = starts[i]
        end = ends[i]
        n = 0
        while pos < end:
            n += 1
            if end - pos < 12:
                break
            length = _i(data, pos + AT_LENGTH, 4)
            if length < 5 or end - pos - 12 < length:
                break  # a length that cannot hold a magic byte (zeros, say): no batch after it can be found
            pos += 12 + length
        counts[i] = n
        total += n
    return total


@njit(cache=True, nogil=True)
def _fail(hdr, b, code, at, d1, d2):
    hdr[H_STATUS, b] = code
    hdr[H_ERR_AT, b] = at
    hdr[H_D1, b] = d1
    hdr[H_D2, b] = d2


@njit(cache=True, nogil=True)
def read_batches(data, starts, ends, hdr, crc32_table, crc32c_table, verify_crc):
    """Fill ``hdr`` for every entry that ``count_batches`` counted, in the same order."""
    b = 0
    for i in range(starts.shape[0]):
        row_start = starts[i]
        pos = row_start
        end = ends[i]
        while pos < end:
            hdr[H_ROW, b] = i
            hdr[H_POS, b] = pos - row_start
            hdr[H_ABS, b] = pos
            left = end - pos
            length = _i(data, pos + AT_LENGTH, 4) if left >= 12 else np.int64(-1)
            if left < 12 or length > left - 12:
                # a partial batch: read what is there, never an error
                hdr[H_SIZE, b] = left
                hdr[H_STATUS, b] = B_PARTIAL
                hdr[H_LENGTH, b] = length
                if left >= 8:
                    hdr[H_BASE_OFFSET, b] = _i(data, pos, 8)
                hdr[H_MAGIC, b] = data[pos + AT_MAGIC] if left > AT_MAGIC else -1
                if hdr[H_MAGIC, b] > 2:  # the bytes say what they are not: no batch of any magic
                    _fail(hdr, b, R_MAGIC, pos + AT_MAGIC - row_start, hdr[H_MAGIC, b], 0)
                b += 1
                break
            hdr[H_LENGTH, b] = length
            hdr[H_BASE_OFFSET, b] = _i(data, pos, 8)
            if length < 5:
                # the rest of the row is this one failed entry, as Kafka's readers stop here too
                hdr[H_SIZE, b] = left
                _fail(hdr, b, R_LENGTH, pos + AT_LENGTH - row_start, length, 14)
                hdr[H_MAGIC, b] = -1
                b += 1
                break
            hdr[H_SIZE, b] = 12 + length
            stop = pos + 12 + length
            magic = np.int64(data[pos + AT_MAGIC])
            hdr[H_MAGIC, b] = magic
            if magic == 2:
                _read_v2(data, pos, stop, row_start, hdr, b, crc32c_table, verify_crc)
            elif magic == 0 or magic == 1:
                _read_legacy(data, pos, stop, row_start, hdr, b, crc32_table, verify_crc)
            else:
                _fail(hdr, b, R_MAGIC, pos + AT_MAGIC - row_start, magic, 0)
            b += 1
            pos = stop


@njit(cache=True, nogil=True)
def _read_v2(data, pos, stop, row_start, hdr, b, table, verify_crc):
    length = stop - pos - 12
    if length < V2_HEADER - 12:
        _fail(hdr, b, R_LENGTH, pos + AT_LENGTH - row_start, length, V2_HEADER - 12)
        return
    hdr[H_EPOCH, b] = _i(data, pos + V2_EPOCH, 4)
    hdr[H_CRC, b] = _be(data, pos + V2_CRC, 4)
    attr = _i(data, pos + V2_ATTR, 2)
    hdr[H_ATTR, b] = attr
    hdr[H_LAST_DELTA, b] = _i(data, pos + V2_LAST_DELTA, 4)
    hdr[H_BASE_TS, b] = _i(data, pos + V2_BASE_TS, 8)
    hdr[H_MAX_TS, b] = _i(data, pos + V2_MAX_TS, 8)
    hdr[H_PID, b] = _i(data, pos + V2_PID, 8)
    hdr[H_PEPOCH, b] = _i(data, pos + V2_PEPOCH, 2)
    hdr[H_BASE_SEQ, b] = _i(data, pos + V2_BASE_SEQ, 4)
    count = _i(data, pos + V2_COUNT, 4)
    hdr[H_COUNT, b] = count
    hdr[H_REGION_START, b] = pos + V2_HEADER
    hdr[H_REGION_END, b] = stop
    codec = attr & CODEC_MASK
    if not verify_crc:
        hdr[H_CRC_CALC, b] = -1
    elif codec == 0 and count >= 0:  # nothing but the CRC can fail it here: the walk checks it
        hdr[H_CRC_CALC, b] = CRC_IN_WALK
    elif not crc_v2(data, hdr, b, table):
        return
    if codec > 4:
        _fail(hdr, b, R_CODEC, pos + V2_ATTR - row_start, codec, 2)
    elif count < 0:
        _fail(hdr, b, R_NEGATIVE, pos + V2_COUNT - row_start, count, 0)


@njit(inline="always")
def batch_crc_v2(table, data, pos, end):
    """The CRC-32C of the magic 2 batch at data[pos:end]: over its bytes from the attributes on
    (KIP-98), by the CPU's instructions where it has them (HW_CRC32C), else by ``table``."""
    if HW_CRC32C:
        return np.int64(crc32c_hw(data, pos + V2_CRC_FROM, end))
    return np.int64(crc32(table, data, pos + V2_CRC_FROM, end))


@njit(cache=True, nogil=True)
def crc_v2(data, hdr, b, table):
    """Check the CRC-32C of magic 2 batch b (in ``data``, where ``hdr`` places it): the computed
    one goes to H_CRC_CALC; False, and the batch failed, where it differs from the stored one."""
    pos = hdr[H_ABS, b]
    calc = batch_crc_v2(table, data, pos, pos + hdr[H_SIZE, b])
    hdr[H_CRC_CALC, b] = calc
    if calc != hdr[H_CRC, b]:
        _fail(hdr, b, R_CRC, hdr[H_POS, b] + V2_CRC, hdr[H_CRC, b], calc)
        return False
    return True


@njit(cache=True, nogil=True)
def _read_legacy(data, pos, stop, row_start, hdr, b, table, verify_crc):
    """The header of a top-level magic 0/1 message; its value region when it is a wrapper."""
    magic = np.int64(data[pos + AT_MAGIC])
    length = stop - pos - 12
    if length < LEGACY_MIN[magic]:
        _fail(hdr, b, R_LENGTH, pos + AT_LENGTH - row_start, length, LEGACY_MIN[magic])
        return
    hdr[H_CRC, b] = _be(data, pos + LEGACY_CRC, 4)
    attr = np.int64(data[pos + LEGACY_ATTR])
    hdr[H_ATTR, b] = attr
    if magic == 1:
        hdr[H_MAX_TS, b] = _i(data, pos + LEGACY_TS, 8)
    if verify_crc:
        calc = np.int64(crc32_legacy(table, data, pos + LEGACY_CRC_FROM, stop))
        hdr[H_CRC_CALC, b] = calc
        if calc != hdr[H_CRC, b]:
            _fail(hdr, b, R_CRC, pos + LEGACY_CRC - row_start, hdr[H_CRC, b], calc)
            return
    else:
        hdr[H_CRC_CALC, b] = -1
    codec = attr & CODEC_MASK
    if codec > 3:
        _fail(hdr, b, R_CODEC, pos + LEGACY_ATTR - row_start, codec, magic)
        return
    if codec == 0:
        # a message is a batch of one record: itself
        hdr[H_REGION_START, b] = pos
        hdr[H_REGION_END, b] = stop
        return
    p = pos + LEGACY_TS + 8 * magic
    klen = _i(data, p, 4)
    if klen < -1 or klen > stop - p - 8:
        _fail(hdr, b, R_NEGATIVE if klen < -1 else R_OVERRUN, p - row_start, klen, stop - p - 8)
        return
    p += 4 + max(klen, 0)
    vlen = _i(data, p, 4)
    if vlen == -1:
        _fail(hdr, b, R_NO_VALUE, p - row_start, 0, 0)
    elif vlen < -1 or vlen != stop - p - 4:
        _fail(hdr, b, R_NEGATIVE if vlen < -1 else R_RECORD_SIZE, p - row_start, vlen, stop - p - 4)
    else:
        hdr[H_REGION_START, b] = p + 4
        hdr[H_REGION_END, b] = stop


@njit(cache=True, nogil=True)
def walk_records(
    data,
    inner,
    hdr,
    b0,
    b1,
    fill,
    crc32_table,
    crc32c_table,
    payloads,
    views,
    inner_first,
    t,
    cap,
    # the columns; written only when ``fill`` (any arrays when not)
    r_batch,
    r_offset,
    r_ts,
    r_size,
    r_key_size,
    r_value_size,
    k_off,
    k_data,
    v_off,
    v_data,
    h_off,
    hk_off,
    hk_data,
    hv_size,
    hv_off,
    hv_data,
    k_view,
    v_view,
):
    """Walk the records of batches b0..b1 that read well, checking every record (and first the
    CRC of a batch whose read left it to the walk: CRC_IN_WALK), and set each batch's H_NREC
    and byte counts, or its error.

    ``t`` holds the cursors (records, key bytes, value bytes, headers, header key bytes, header
    value bytes) and moves on past each batch walked. ``fill=True`` also writes record ``n`` at
    index ``n`` of each column as it goes, in Arrow's own layout so the arrays wrap them as
    they are: int32 sizes (-1: null), keys and values back to back in ``k_data``/``v_data``
    with ``k_off[n]``/``v_off[n]`` where each starts, headers likewise (``h_off[n]``: the
    record's first header). ``cap`` holds what the columns have room for, in the cursors'
    order: a batch that would pass it is left as it was (cursors back at its start) and the
    walk stops there. The caller writes the last offsets (the totals). ``t[6]`` gathers, by
    bitwise or, the sizes and timestamps of the records kept (magic 0/1: also of a batch then
    dropped, which only costs a search): while it stays at or above 0 no column holds a null
    (-1) or a negative timestamp up to the cursors, and the arrays need no validity.
    ``views``: keys and values are not copied; ``k_view``/``v_view`` get Arrow's 16-byte views
    into ``data`` (buffers 0..) or ``inner`` (buffers ``inner_first``..), see ``_put_view``.
    Returns the batch the walk stopped at: b1 when every batch was walked.
    """
    # the columns as bare pointers (``memory.raw``), once: each array handed to the batch
    # walks, per batch, would cost two atomic reference counts
    r_batch_p, r_offset_p, r_ts_p, r_size_p, r_key_size_p, r_value_size_p = (
        raw(r_batch),
        raw(r_offset),
        raw(r_ts),
        raw(r_size),
        raw(r_key_size),
        raw(r_value_size),
    )
    k_off_p, k_data_p, v_off_p, v_data_p, h_off_p, hk_off_p = (
        raw(k_off),
        raw(k_data),
        raw(v_off),
        raw(v_data),
        raw(h_off),
        raw(hk_off),
    )
    hk_data_p, hv_size_p, hv_off_p, hv_data_p, k_view_p, v_view_p = (
        raw(hk_data),
        raw(hv_size),
        raw(hv_off),
        raw(hv_data),
        raw(k_view),
        raw(v_view),
    )
    data_p, inner_p = raw(data), raw(inner)
    for b in range(b0, b1):
        if hdr[H_STATUS, b] != B_OK:
            continue
        if hdr[H_CRC_CALC, b] == CRC_IN_WALK and not crc_v2(data, hdr, b, crc32c_table):
            continue
        buf = inner_p if hdr[H_INNER, b] == 1 else data_p
        start = hdr[H_REGION_START, b]
        end = hdr[H_REGION_END, b]
        n0, k0, v0, h0, hk0, hv0 = t[0], t[1], t[2], t[3], t[4], t[5]
        vbase = inner_first if hdr[H_INNER, b] == 1 else 0
        if hdr[H_MAGIC, b] == 2:
            # control records are kept whatever ``payloads`` says: they are decoded from them
            keep = payloads or (hdr[H_ATTR, b] & ATTR_CONTROL) != 0
            err = _walk_v2(
                buf, start, end, hdr, b, fill, keep, views, vbase, t, cap, r_batch_p, r_offset_p,
                r_ts_p, r_size_p, r_key_size_p, r_value_size_p, k_off_p, k_data_p, v_off_p, v_data_p,
                h_off_p, hk_off_p, hk_data_p, hv_size_p, hv_off_p, hv_data_p, k_view_p, v_view_p,
            )  # fmt: skip
        else:
            err = _walk_legacy(
                buf,
                start,
                end,
                hdr,
                b,
                fill,
                crc32_table,
                payloads,
                views,
                vbase,
                t,
                cap,
                r_batch_p,
                r_offset_p,
                r_ts_p,
                r_size_p,
                r_key_size_p,
                r_value_size_p,
                k_off_p,
                k_data_p,
                v_off_p,
                v_data_p,
                h_off_p,
                k_view_p,
                v_view_p,
            )
        if err != OK:
            t[0], t[1], t[2], t[3], t[4], t[5] = n0, k0, v0, h0, hk0, hv0
            if err == FULL:
                return b
            continue
        hdr[H_NREC, b] = t[0] - n0
        hdr[H_KEY_BYTES, b] = t[1] - k0
        hdr[H_VALUE_BYTES, b] = t[2] - v0
        hdr[H_NHEADERS, b] = t[3] - h0
        hdr[H_HKEY_BYTES, b] = t[4] - hk0
        hdr[H_HVALUE_BYTES, b] = t[5] - hv0
    return b1


@njit(cache=True, nogil=True)
def claimed_records(hdr, b0, b1, bytes_per_record, inner_guess):
    """The records good batches b0..b1 claim, to give a chunk of columns room for them: a
    magic 2 batch's count (at most one per 7 bytes of records, the least a record takes), a
    compressed wrapper's bytes over ``bytes_per_record`` (bytes once decompressed as in the
    batches decompressed so far, else ``inner_guess`` times its compressed bytes), 1 for any
    other message. A float: wrappers count in fractions."""
    inner_bytes = 0
    inner_size = 0
    any_inner = False
    for b in range(b0, b1):
        if hdr[H_STATUS, b] == B_OK and hdr[H_INNER, b] == 1:
            inner_bytes += hdr[H_REGION_END, b] - hdr[H_REGION_START, b]
            inner_size += hdr[H_SIZE, b]
            any_inner = True
    ratio = max(inner_bytes / max(1, inner_size) if any_inner else inner_guess, 1.0)
    total = 0.0
    for b in range(b0, b1):
        if hdr[H_STATUS, b] != B_OK:
            continue
        region = hdr[H_REGION_END, b] - hdr[H_REGION_START, b]
        compressed = hdr[H_ATTR, b] & CODEC_MASK != 0
        nbytes = np.int64(region * ratio) if compressed and hdr[H_INNER, b] != 1 else region
        if hdr[H_MAGIC, b] == 2:
            total += min(hdr[H_COUNT, b], nbytes // 7)
        elif compressed:
            total += nbytes / bytes_per_record
        else:
            total += 1
    return total


@njit(cache=True, nogil=True)
def _where(hdr, b, buf_pos):
    """The byte to report: inside the row for records in ``data``, else inside the region."""
    if hdr[H_INNER, b] == 1:
        return buf_pos - hdr[H_REGION_START, b]
    return buf_pos - hdr[H_ABS, b] + hdr[H_POS, b]


@njit(inline="always")
def _length(buf, pos, end, lowest):
    """A zigzag length or count, at least ``lowest`` (-1 where a null is allowed) and at most
    the bytes left before ``end`` -> (n, pos, error): R_VARINT, R_OVERRUN or R_NEGATIVE, whose
    details are n and the bytes left."""
    n, pos, err = _zigzag(buf, pos, end, 32)
    if err == OK:
        if n < lowest:
            err = R_NEGATIVE
        elif n > end - pos:
            err = R_OVERRUN
    return n, pos, err


if getattr(config, "DISABLE_JIT", False):  # the kernels run as Python

    def _ahead(buf, at, end):
        pass

else:

    @njit(inline="always")
    def _ahead(buf, at, end):
        prefetch(buf, min(at, end - 1))  # (at >= 0: a position plus a size)


# the record walk jumps over values: without a hint, each record's first byte waits on memory.
# The hint names the line PREFETCH_RECORDS records on at this record's size, and at least
# PREFETCH_AHEAD bytes on: a fixed 1 KB was one record ahead of 1 KB values, which then
# waited on memory one at a time (bench/records.py, 1 KB values with views and no CRC check:
# faster in 5 of 6 pairs of processes taken in turns, by up to half; runs vary by a fifth)
PREFETCH_AHEAD = 1024
PREFETCH_RECORDS = 4


VIEW_WINDOW_BITS = 30  # a view's buffer is the 2 GiB window of its input starting at (pos >> 30) << 30
VIEW_INLINE = 12  # values up to 12 bytes sit inside the view itself


@njit(inline="always")
def _put_i32(dst, at, v):
    """Little-endian int32, as Arrow's views hold their fields."""
    for j in range(4):
        dst[at + j] = (v >> (8 * j)) & 0xFF


@njit(inline="always")
def _put_view_bytes(dst, r, src, pos, n, vbase):
    """``_put_view`` a byte at a time (a value at the end of its region, a big-endian CPU)."""
    at = 16 * r
    m = max(n, 0)
    _put_i32(dst, at, m)
    if m <= VIEW_INLINE:
        for j in range(4, 16):
            dst[at + j] = 0
        if m > 0:
            copy_bytes(src, pos, m, dst, at + 4)
    else:
        copy_bytes(src, pos, 4, dst, at + 4)  # the prefix
        _put_i32(dst, at + 8, vbase + (pos >> VIEW_WINDOW_BITS))
        _put_i32(dst, at + 12, pos & ((1 << VIEW_WINDOW_BITS) - 1))


@njit(inline="always")
def _put_view(dst, r, src, pos, n, vbase, end):
    """Row r of a binary_view column: src[pos:pos + n] (null when n < 0: an empty view, the
    validity bitmap says null). Longer values name their window of ``src``: buffer
    vbase + (pos >> 30), at pos's offset inside it (the caller keeps values under 1 GiB).
    Written as two words, the bytes of an inline value read as two words too where 12 bytes
    lie before ``end`` (the end of what may be read): 1 KB records with views, the record walk
    18.2 -> 17.1 ns a record (Numba left the byte stores apart)."""
    m = max(n, 0)
    if not LITTLE or (m <= VIEW_INLINE and pos + VIEW_INLINE > end):
        _put_view_bytes(dst, r, src, pos, n, vbase)
        return
    length = np.uint64(m)
    if m > VIEW_INLINE:
        head = length | (np.uint64(load_u32(src, pos)) << np.uint64(32))  # the prefix
        tail = np.uint64(vbase + (pos >> VIEW_WINDOW_BITS)) | (
            np.uint64(pos & ((1 << VIEW_WINDOW_BITS) - 1)) << np.uint64(32)
        )
    else:  # the value's bytes, and zeros after them
        lo, hi = load_u64(src, pos), np.uint64(load_u32(src, pos + 8))
        if m < 8:
            lo &= (np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)
            hi = np.uint64(0)
        else:
            hi &= (np.uint64(1) << np.uint64(8 * (m - 8))) - np.uint64(1)
        head = length | (lo << np.uint64(32))
        tail = (lo >> np.uint64(32)) | (hi << np.uint64(32))
    store_u64(dst, 16 * r, head)
    store_u64(dst, 16 * r + 8, tail)


# _record_note: both walks write a record's columns with the same lines, written out in each.
# Numba counts references to every array handed to a function, inlined or not: a helper taking
# the 13 columns made the count walk 105 ns a record instead of 33 (bench/records.py, lz4).


@njit(cache=True, nogil=True)
def _walk_v2(
    buf,
    pos,
    end,
    hdr,
    b,
    fill,
    payloads,
    views,
    vbase,
    t,
    cap,
    r_batch,
    r_offset,
    r_ts,
    r_size,
    r_key_size,
    r_value_size,
    k_off,
    k_data,
    v_off,
    v_data,
    h_off,
    hk_off,
    hk_data,
    hv_size,
    hv_off,
    hv_data,
    k_view,
    v_view,
):
    # (every array but hdr, t and cap comes as a bare pointer: see walk_records)
    src, kv, vv, kd, vd, hkd, hvd = buf, k_view, v_view, k_data, v_data, hk_data, hv_data
    count = hdr[H_COUNT, b]
    base_offset = hdr[H_BASE_OFFSET, b]
    base_ts = hdr[H_BASE_TS, b]
    log_append = (hdr[H_ATTR, b] & ATTR_LOG_APPEND_TIME) != 0
    max_ts = hdr[H_MAX_TS, b]
    # the cursors in locals, written back once the batch is walked: stores to ``t`` could
    # alias the columns, so the compiler would reload them after every copy
    n, kc, vc, hc, hkc, hvc = t[0], t[1], t[2], t[3], t[4], t[5]
    signs = t[6]
    n0 = n
    copies = payloads and not views
    while pos < end:
        if n - n0 == count:
            return _fail_at(hdr, b, R_TRAILING, pos, end - pos, 0)
        rec_start = pos
        rlen, pos, err = _length(src, pos, end, 0)
        if err != OK:
            return _fail_at(hdr, b, err, rec_start, rlen, end - pos)
        rend = pos + rlen
        _ahead(src, rec_start + max(PREFETCH_AHEAD, PREFETCH_RECORDS * (rend - rec_start)), end)
        if rend - pos < 1:
            return _fail_at(hdr, b, R_OVERRUN, pos, 1, 0)
        pos += 1  # record attributes: unused
        ts_delta, pos, err = _zigzag(src, pos, rend, 64)
        if err != OK:
            return _fail_at(hdr, b, err, pos, 0, 0)
        off_delta, pos, err = _zigzag(src, pos, rend, 32)
        if err != OK:
            return _fail_at(hdr, b, err, pos, 0, 0)
        at = pos
        klen, pos, err = _length(src, pos, rend, -1)
        if err != OK:
            return _fail_at(hdr, b, err, at, klen, rend - pos)
        kpos = pos
        pos += max(klen, 0)
        at = pos
        vlen, pos, err = _length(src, pos, rend, -1)
        if err != OK:
            return _fail_at(hdr, b, err, at, vlen, rend - pos)
        vpos = pos
        pos += max(vlen, 0)
        at = pos
        nh, pos, err = _length(src, pos, rend, 0)  # no more headers than bytes left: a bounded loop
        if err != OK:
            return _fail_at(hdr, b, err, at, nh, rend - pos)
        # base + delta past int64 would wrap into another offset or time
        if _add_overflows(base_offset, off_delta):
            return _fail_at(hdr, b, R_OFFSET_RANGE, rec_start, off_delta, 0)
        if not log_append and _add_overflows(base_ts, ts_delta):
            return _fail_at(hdr, b, R_TS_RANGE, rec_start, ts_delta, 0)
        ts = max_ts if log_append else base_ts + ts_delta
        # (written out here and in the other walk: a helper taking the columns costs a
        # reference count per array per record, 3x the walk's time: see _record_note)
        if fill:
            if n >= cap[0] or (copies and (kc + klen > cap[1] or vc + vlen > cap[2])):
                return FULL
            r_batch[n] = b
            r_offset[n] = base_offset + off_delta
            r_ts[n] = ts
            r_size[n] = rend - rec_start
            r_key_size[n] = klen
            r_value_size[n] = vlen
            signs |= klen | vlen | ts
            k_off[n] = kc
            v_off[n] = vc
            h_off[n] = hc
            if views:
                _put_view(kv, n, src, kpos, klen if payloads else -1, vbase, end)
                _put_view(vv, n, src, vpos, vlen if payloads else -1, vbase, end)
            elif payloads:
                if klen > 0:
                    copy_bytes(src, kpos, klen, kd, kc)
                if vlen > 0:
                    copy_bytes(src, vpos, vlen, vd, vc)
        if copies:
            kc += max(klen, 0)
            vc += max(vlen, 0)
        for _ in range(nh):
            at = pos
            hk, pos, err = _length(src, pos, rend, 0)
            if err != OK:
                return _fail_at(hdr, b, err, at, hk, rend - pos)
            if not _utf8_ok(src, pos, hk):
                return _fail_at(hdr, b, R_UTF8, pos, hk, 0)
            hkpos = pos
            pos += hk
            at = pos
            hv, pos, err = _length(src, pos, rend, -1)
            if err != OK:
                return _fail_at(hdr, b, err, at, hv, rend - pos)
            if fill:
                if hc >= cap[3] or hkc + hk > cap[4] or hvc + hv > cap[5]:
                    return FULL
                hk_off[hc] = hkc
                copy_bytes(src, hkpos, hk, hkd, hkc)
                hv_size[hc] = hv
                signs |= hv
                hv_off[hc] = hvc
                if hv > 0:
                    copy_bytes(src, pos, hv, hvd, hvc)
            pos += max(hv, 0)
            hc += 1
            hkc += hk
            hvc += max(hv, 0)
        if pos != rend:
            return _fail_at(hdr, b, R_RECORD_SIZE, rec_start, rlen, rlen - (rend - pos))
        # the next record from rend, equal to pos here: from pos, each record's start waited on
        # every varint of the one before; from rend, only on its length, so the CPU starts the
        # next record while this one is still read (bench/records.py, the walk of 200-byte
        # records: 6.0 -> 5.7 ms a call with lz4, 5.1 -> 4.8 uncompressed)
        pos = rend
        n += 1
    if n - n0 != count:
        return _fail_at(hdr, b, R_COUNT, end, count, n - n0)
    t[0], t[1], t[2], t[3], t[4], t[5], t[6] = n, kc, vc, hc, hkc, hvc, signs
    return OK


@njit(cache=True, nogil=True)
def _walk_legacy(
    buf,
    pos,
    end,
    hdr,
    b,
    fill,
    crc32_table,
    payloads,
    views,
    vbase,
    t,
    cap,
    r_batch,
    r_offset,
    r_ts,
    r_size,
    r_key_size,
    r_value_size,
    k_off,
    k_data,
    v_off,
    v_data,
    h_off,
    k_view,
    v_view,
):
    """The records of a magic 0/1 batch: the message itself, or a wrapper's inner messages."""
    src, kv, vv, kd, vd = buf, k_view, v_view, k_data, v_data  # (bare pointers: see walk_records)
    magic = hdr[H_MAGIC, b]
    wrapper = (hdr[H_ATTR, b] & CODEC_MASK) != 0
    log_append = (hdr[H_ATTR, b] & ATTR_LOG_APPEND_TIME) != 0
    wrapper_offset = hdr[H_BASE_OFFSET, b]
    # magic 1 inner offsets are relative to the last one: Kafka's AbstractLegacyRecordBatch
    relative = wrapper and magic == 1 and wrapper_offset != 0
    n0 = t[0]
    first = True
    lo, hi = I64_MAX, I64_MIN  # the inner offsets' range, to check their shift
    while pos < end:
        msg = pos
        if end - pos < 12:
            return _fail_at(hdr, b, R_TRAILING, pos, end - pos, 0)
        offset = _i(src, pos, 8)
        size = _i(src, pos + AT_LENGTH, 4)
        if size < 0 or size > end - pos - 12:
            return _fail_at(
                hdr, b, R_OVERRUN if size >= 0 else R_NEGATIVE, pos + AT_LENGTH, size, end - pos - 12
            )
        stop = pos + LEGACY_CRC + size
        if size < 5:
            return _fail_at(hdr, b, R_LENGTH, pos + AT_LENGTH, size, 14)
        inner_magic = np.int64(src[pos + AT_MAGIC])
        if inner_magic != magic:
            return _fail_at(hdr, b, R_INNER_MAGIC, pos + AT_MAGIC, inner_magic, magic)
        if size < LEGACY_MIN[magic]:
            return _fail_at(hdr, b, R_LENGTH, pos + AT_LENGTH, size, LEGACY_MIN[magic])
        attr = np.int64(src[pos + LEGACY_ATTR])
        if wrapper:
            stored = np.int64(_be(src, pos + LEGACY_CRC, 4))
            calc = np.int64(crc32_legacy(crc32_table, buf, pos + LEGACY_CRC_FROM, stop))
            if stored != calc:
                return _fail_at(hdr, b, R_INNER_CRC, pos + LEGACY_CRC, stored, calc)
            if attr & CODEC_MASK:
                return _fail_at(hdr, b, R_NESTED, pos + LEGACY_ATTR, attr & CODEC_MASK, 0)
        ts = np.int64(-1)
        p = pos + LEGACY_TS
        if magic == 1:
            ts = hdr[H_MAX_TS, b] if (wrapper and log_append) else _i(src, p, 8)
            p += 8
        klen = _i(src, p, 4)
        if klen < -1:
            return _fail_at(hdr, b, R_NEGATIVE, p, klen, 0)
        if klen > stop - p - 8:
            return _fail_at(hdr, b, R_OVERRUN, p, klen, stop - p - 8)
        kpos = p + 4
        p = kpos + max(klen, 0)
        vlen = _i(src, p, 4)
        if vlen < -1:
            return _fail_at(hdr, b, R_NEGATIVE, p, vlen, 0)
        if max(vlen, 0) != stop - p - 4:
            return _fail_at(hdr, b, R_RECORD_SIZE, p, vlen, stop - p - 4)
        vpos = p + 4
        if wrapper:
            if first:
                hdr[H_FIRST_INNER, b] = offset
            hdr[H_LAST_INNER, b] = offset
            lo, hi = min(lo, offset), max(hi, offset)
        first = False
        n = t[0]
        # (written out here and in the other walk: a helper taking the columns costs a
        # reference count per array per record, 3x the walk's time: see _record_note)
        if fill:
            if n >= cap[0] or (
                payloads and not views and (t[1] + max(klen, 0) > cap[1] or t[2] + max(vlen, 0) > cap[2])
            ):
                return FULL
            r_batch[n] = b
            r_offset[n] = offset
            r_ts[n] = ts
            r_size[n] = stop - msg
            r_key_size[n] = klen
            r_value_size[n] = vlen
            t[6] |= klen | vlen | ts
            k_off[n] = t[1]
            v_off[n] = t[2]
            h_off[n] = t[3]
            if views:
                _put_view(kv, n, src, kpos, klen if payloads else -1, vbase, end)
                _put_view(vv, n, src, vpos, vlen if payloads else -1, vbase, end)
            elif payloads:
                if klen > 0:
                    copy_bytes(src, kpos, klen, kd, t[1])
                if vlen > 0:
                    copy_bytes(src, vpos, vlen, vd, t[2])
        if payloads and not views:
            t[1] += max(klen, 0)
            t[2] += max(vlen, 0)
        t[0] += 1
        pos = stop
    if relative and n0 < t[0]:  # the shift, and each offset shifted, within int64 (in both passes)
        last = hdr[H_LAST_INNER, b]
        if (last < 0 and wrapper_offset > I64_MAX + last) or (last > 0 and wrapper_offset < I64_MIN + last):
            return _fail_at(hdr, b, R_OFFSET_RANGE, pos, -last, 0)
        shift = wrapper_offset - last
        if _add_overflows(hi, shift) or _add_overflows(lo, shift):
            return _fail_at(hdr, b, R_OFFSET_RANGE, pos, shift, 0)
    if fill and relative:  # known at the end: the offsets are relative to the last one
        shift = wrapper_offset - hdr[H_LAST_INNER, b]
        for r in range(n0, t[0]):
            r_offset[r] += shift
    return OK


@njit(cache=True, nogil=True)
def _add_overflows(a, b):
    """Would a + b pass int64? Asked before adding, so it holds in Python too
    (NUMBA_DISABLE_JIT), where numpy warns as it wraps."""
    return (b > 0 and a > I64_MAX - b) or (b < 0 and a < I64_MIN - b)


@njit(cache=True, nogil=True)
def _fail_at(hdr, b, code, buf_pos, d1, d2):
    """Record the first failure of batch b."""
    _fail(hdr, b, code, _where(hdr, b, buf_pos), d1, d2)
    return code


# ---- finding a batch again after bytes that hold none (a damaged log segment) ----
NOT_FOUND = -1
OUT_OF_BUDGET = -2  # the CRCs checked reached the budget before a batch was found


@njit(cache=True, nogil=True)
def find_batch(data, start, stop, min_offset, crc32_table, crc32c_table, budget):
    """The first position p in [start, stop) where a whole entry lies in ``data`` (p + 12 +
    length within it) that is a batch by every test short of its records: magic 0, 1 or 2, a
    length its magic allows, a known codec, the header fields a writer sets in their ranges
    (magic 2: as many records as offsets at most, 7 bytes a record at least uncompressed;
    magic 0/1: a key and a value that fill the message), base offset at least ``min_offset``
    (a segment's offsets start at its file name's), and its CRC checks. The CRCs checked may
    cover at most ``budget`` bytes, so bytes made to pass the tests cost a bounded search."""
    n = data.shape[0]
    for p in range(start, min(stop, n - 12 - LEGACY_MIN[0] + 1)):  # (the smallest entry)
        magic = np.int64(data[p + AT_MAGIC])
        if magic > 2:
            continue
        length = _i(data, p + AT_LENGTH, 4)
        if length > n - p - 12 or _i(data, p, 8) < min_offset:
            continue
        if magic == 2:
            if length < V2_HEADER - 12:
                continue
            attr = _i(data, p + V2_ATTR, 2)
            count = _i(data, p + V2_COUNT, 4)
            if (
                attr & CODEC_MASK > 4
                or attr >> 7 != 0  # bits Kafka does not use
                or count < 0
                or count > _i(data, p + V2_LAST_DELTA, 4) + 1  # a record per offset at most
                or (count == 0 and length != V2_HEADER - 12)
                # an uncompressed record is 7 bytes at least (a varint for each of its fields)
                or (attr & CODEC_MASK == 0 and length < V2_HEADER - 12 + 7 * count)
                or _i(data, p + V2_PID, 8) < -1
                or _i(data, p + V2_PEPOCH, 2) < -1
                or _i(data, p + V2_BASE_SEQ, 4) < -1
            ):
                continue
            budget -= length
            if budget < 0:
                return OUT_OF_BUDGET
            if batch_crc_v2(crc32c_table, data, p, p + 12 + length) == np.int64(_be(data, p + V2_CRC, 4)):
                return p
        else:
            if length < LEGACY_MIN[magic]:
                continue
            attr = np.int64(data[p + LEGACY_ATTR])
            if attr & CODEC_MASK > 3 or attr >> 4 != 0:
                continue
            # its key and value fill the message exactly
            k = p + LEGACY_TS + 8 * magic
            end = p + 12 + length
            klen = _i(data, k, 4)
            if klen < -1 or klen > end - k - 8:
                continue
            v = k + 4 + max(klen, 0)
            vlen = _i(data, v, 4)
            if vlen < -1 or max(vlen, 0) != end - v - 4:
                continue
            budget -= length
            if budget < 0:
                return OUT_OF_BUDGET
            calc = crc32_legacy(crc32_table, data, p + LEGACY_CRC_FROM, p + 12 + length)
            if np.int64(calc) == np.int64(_be(data, p + LEGACY_CRC, 4)):
                return p
    return NOT_FOUND
