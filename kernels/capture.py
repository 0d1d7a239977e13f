"""Numba kernels of the columnar capture path: pcap records, packet headers, TCP streams,
Kafka frames and headers, each a loop over whole arrays.

They do the common case only and say so: a packet, stream or header they do not handle is
marked for the Python layers (``arrowkafka.traffic``), whose rules are the reference; the
columnar path must give what they give. Every read is checked against the buffer's end.
"""

from __future__ import annotations

import numpy as np

from .jit import njit
from .memory import copy_bytes

# parse_packets kinds: one per PacketStats count, plus "let the Python parser decide"
K_TCP, K_NON_IP, K_NON_TCP, K_FRAGMENT, K_UNKNOWN_LINK, K_MALFORMED, K_PYTHON = 0, 1, 2, 3, 4, 5, 6

# header_fields outcomes
H_OK, H_PYTHON = 0, 1


@njit(cache=True, nogil=True)
def _u16(b, p):
    return (np.int64(b[p]) << 8) | np.int64(b[p + 1])


@njit(cache=True, nogil=True)
def _u32(b, p, big):
    if big:
        return (
            (np.int64(b[p]) << 24)
            | (np.int64(b[p + 1]) << 16)
            | (np.int64(b[p + 2]) << 8)
            | np.int64(b[p + 3])
        )
    return (
        (np.int64(b[p + 3]) << 24) | (np.int64(b[p + 2]) << 16) | (np.int64(b[p + 1]) << 8) | np.int64(b[p])
    )


@njit(cache=True, nogil=True)
def _ipv6_extension(nxt):
    """An IPv6 next header that is an extension header (comparisons: ``in`` on a tuple loads
    Numba's list module into every process that loads this kernel)."""
    return (
        nxt == 0 or nxt == 43 or nxt == 60 or nxt == 135 or nxt == 139
        or nxt == 140 or nxt == 253 or nxt == 254 or nxt == 44 or nxt == 51
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _i32(b, p):
    v = _u32(b, p, True)
    return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v


@njit(cache=True, nogil=True)
def pcap_records(buf, pos, big, frac_ns, limit, rec_off, caplen, origlen, ts):
    """Index the records of a classic pcap body from ``pos``. Returns (records, position
    after the last whole record, status): 0 the buffer ended on a record boundary, 1 it ends
    inside a record (at the returned position), 2 the record there has an implausible length."""
    n = len(buf)
    k = 0
    while True:
        if n - pos < 16:
            return k, pos, 0 if pos == n else 1
        incl = _u32(buf, pos + 8, big)
        if incl > limit:
            return k, pos, 2
        if n - pos - 16 < incl:
            return k, pos, 1
        ts[k] = _u32(buf, pos, big) * 1_000_000_000 + _u32(buf, pos + 4, big) * frac_ns
        origlen[k] = _u32(buf, pos + 12, big)
        rec_off[k] = pos + 16
        caplen[k] = incl
        k += 1
        pos += 16 + incl


@njit(cache=True, nogil=True)
def _network(buf, a, n, linktype):
    """(offset of the IP header from a, IP version) or (-1, kind); the Python parser's rules."""
    if linktype == 1:
        off, etype_at = 14, 12
    elif linktype == 113:
        off, etype_at = 16, 14
    elif linktype == 276:
        off, etype_at = 20, 0
    elif linktype == 0 or linktype == 108:
        if n < 5:
            return -1, K_MALFORMED
        af = _u32(buf, a, False)
        if af > 0xFFFF:
            af = _u32(buf, a, True)
        if af == 2:
            return 4, 4
        if af == 10 or af == 24 or af == 28 or af == 30:
            return 4, 6
        return -1, K_NON_IP
    elif linktype == 101 or linktype == 12 or linktype == 14 or linktype == 228 or linktype == 229:
        if n < 1:
            return -1, K_MALFORMED
        ver = buf[a] >> 4
        if ver == 4 or ver == 6:
            return 0, np.int64(ver)
        return -1, K_MALFORMED
    else:
        return -1, K_UNKNOWN_LINK
    if n < off:
        return -1, K_MALFORMED
    etype = _u16(buf, a + etype_at)
    while etype == 0x8100 or etype == 0x88A8 or etype == 0x9100 or etype == 0x9200:
        if n < off + 4:
            return -1, K_MALFORMED
        etype = _u16(buf, a + off + 2)
        off += 4
    if etype == 0x0800:
        return off, 4
    if etype == 0x86DD:
        return off, 6
    return -1, K_NON_IP


@njit(cache=True, nogil=True)
def parse_packets(
    buf, rec_off, caplen, linktype, kind, addr, sport, dport, seq, flags, pay_off, pay_len, wire_len
):
    """Down to the TCP segment of every packet: ``kind`` (K_*), and for K_TCP the addresses
    (``addr[i, 0:16]`` source, ``[16:32]`` destination, IPv4 in the first 4 of each, and
    ``addr[i, 32]`` the IP version), ports, sequence number, flags and payload."""
    for i in range(len(rec_off)):
        a = rec_off[i]
        n = caplen[i]
        off, ver = _network(buf, a, n, linktype[i])
        if off < 0:
            kind[i] = ver
            continue
        if ver == 4:
            if n < off + 20:
                kind[i] = K_MALFORMED
                continue
            vihl = buf[a + off]
            total = _u16(buf, a + off + 2)
            frag = _u16(buf, a + off + 6)
            proto = buf[a + off + 9]
            if vihl >> 4 != 4:
                kind[i] = K_MALFORMED
                continue
            if proto != 6:
                kind[i] = K_NON_TCP
                continue
            if frag & 0x1FFF:
                kind[i] = K_FRAGMENT
                continue
            ihl = np.int64(vihl & 0x0F) * 4
            ip_end = off + total if total else max(n, off + ihl)
            if ihl < 20 or (total and total < ihl):
                kind[i] = K_MALFORMED
                continue
            for j in range(4):
                addr[i, j] = buf[a + off + 12 + j]
                addr[i, 16 + j] = buf[a + off + 16 + j]
            tcp = off + ihl
        else:
            if n < off + 40 or buf[a + off] >> 4 != 6:
                kind[i] = K_MALFORMED
                continue
            plen = _u16(buf, a + off + 4)
            nxt = buf[a + off + 6]
            if nxt != 6:
                # extension headers are the Python parser's; anything else carries no TCP
                kind[i] = K_PYTHON if _ipv6_extension(nxt) else K_NON_TCP
                continue
            for j in range(16):
                addr[i, j] = buf[a + off + 8 + j]
                addr[i, 16 + j] = buf[a + off + 24 + j]
            ip_end = off + 40 + plen if plen else n
            tcp = off + 40
        if n < tcp + 20:
            kind[i] = K_MALFORMED
            continue
        off_flags = _u16(buf, a + tcp + 12)
        start = tcp + (off_flags >> 12) * 4
        wire = ip_end - start
        if wire < 0 or start < tcp + 20:
            kind[i] = K_MALFORMED
            continue
        end = ip_end if ip_end < n else n
        kind[i] = K_TCP
        addr[i, 32] = ver
        sport[i] = _u16(buf, a + tcp)
        dport[i] = _u16(buf, a + tcp + 2)
        seq[i] = _u32(buf, a + tcp + 4, True)
        flags[i] = off_flags & 0x1FF
        pay_off[i] = a + start
        pay_len[i] = end - start if end > start else 0
        wire_len[i] = wire


@njit(cache=True, nogil=True)
def _hash(row):
    """FNV-1a over a 37-byte flow key's 32-bit words, then a final mix so that every byte
    reaches the low bits (the slot); products stay below 2**63: no overflow in either tier."""
    mask = np.int64(0xFFFFFFFF)
    h = np.int64(2166136261)
    for j in range(0, 36, 4):
        w = (np.int64(row[j]) << 24) | (np.int64(row[j + 1]) << 16) | (np.int64(row[j + 2]) << 8) | row[j + 3]
        h = ((h ^ w) * np.int64(16777619)) & mask
    h = ((h ^ np.int64(row[36])) * np.int64(16777619)) & mask
    h ^= h >> 16
    h = (h * np.int64(0x45D9F3B)) & mask
    return h ^ (h >> 16)


@njit(cache=True, nogil=True)
def _flip(row, out):
    """The other direction of a flow key: src ip (16), dst ip (16), ip version, sport, dport.
    (Loops: a slice assignment loads Numba's array module into every process that loads it.)"""
    for j in range(16):
        out[j] = row[16 + j]
        out[16 + j] = row[j]
    out[32] = row[32]
    for j in range(2):
        out[33 + j] = row[35 + j]
        out[35 + j] = row[33 + j]


@njit(cache=True, nogil=True)
def _find(table, keys, hashes, row, h):
    """(slot, flow) of a key in the open-addressing table; flow -1 if absent (slot is free)."""
    m = len(table) - 1
    slot = h & m
    while True:
        f = table[slot]
        if f < 0:
            return slot, -1
        if hashes[f] == h:
            same = True
            for j in range(len(row)):
                if keys[f, j] != row[j]:
                    same = False
                    break
            if same:
                return slot, f
        slot = (slot + 1) & m


@njit(cache=True, nogil=True)
def flow_ids(addr, segs, table, keys, hashes, count, flow_of):
    """Number the directions (flows) of segments ``segs`` (rows of ``addr``) in a table kept
    across calls: ``flow_of[k]`` for ``segs[k]``, new flows appended to ``keys``. Returns how
    many segments were numbered: fewer than all when ``keys`` is full (grow it, then go on)."""
    for k in range(len(segs)):
        row = addr[segs[k]]
        h = _hash(row)
        slot, f = _find(table, keys, hashes, row, h)
        if f < 0:
            f = count[0]
            if f == len(keys) or 2 * f >= len(table):
                return k
            for j in range(keys.shape[1]):  # (an array assignment loads Numba's array module)
                keys[f, j] = row[j]
            hashes[f] = h
            table[slot] = f
            count[0] = f + 1
        flow_of[k] = f
    return len(segs)


@njit(cache=True, nogil=True)
def rehash(table, keys, hashes, count):
    """Fill an empty (all -1) table with the first ``count`` keys."""
    for f in range(count):
        slot, _ = _find(table, keys, hashes, keys[f], hashes[f])
        table[slot] = f


@njit(cache=True, nogil=True)
def flow_reverse(table, keys, hashes, count, reverse, back):
    """``reverse[f]``: the flow of the other direction of flow f, -1 if it was never seen.
    ``back``: room for one key (the caller's: ``np.empty`` here loads Numba's array module
    into every process that loads this kernel)."""
    for f in range(count):
        _flip(keys[f], back)
        _, reverse[f] = _find(table, keys, hashes, back, _hash(back))


@njit(cache=True, nogil=True)
def census(segs, flow_of, buf, seq, flags, pay_off, pay_len, wire_len, min_size, max_size, state, skip):
    """Follow each direction, segment by segment in capture order, across calls: is it textbook
    TCP with whole Kafka frames? That is: one SYN, first; every payload byte captured; no segment
    ahead of the bytes seen so far (no hole, no reordering); nothing new after the FIN; every
    frame size within [min_size, max_size]. A segment with SYN and FIN or RST is ignored, payload
    and all, as the Python reassembler ignores it (``skip[k]`` is then its whole payload; it
    starts nothing). Retransmitted bytes are dropped as the Python reassembler drops them (first
    seen wins): ``skip[k]`` is how many leading payload bytes of ``segs[k]`` were seen before. A
    RST changes no bytes. ``state[f]`` holds per flow: clean, started, next sequence number, FIN
    position (-1 none), bytes left in the current frame, the size prefix read so far and how many
    of its bytes; a direction ends well if it is clean and its last frame is whole
    (``state[f, 4] == state[f, 6] == 0``)."""
    mask = (np.int64(1) << 32) - 1
    half = np.int64(1) << 31
    for k in range(len(segs)):
        s = segs[k]
        f = flow_of[k]
        skip[k] = 0
        if not state[f, 0]:
            continue
        fl = flags[s]
        if fl & 0x02 and fl & 0x05:
            skip[k] = pay_len[s]  # SYN with FIN or RST: invalid, ignored (traffic.tcp.invalid)
            continue
        if not state[f, 1]:
            state[f, 1] = 1
            if not fl & 0x02:
                state[f, 0] = 0
                continue
            state[f, 2] = (seq[s] + 1) & mask
        elif fl & 0x02:
            state[f, 0] = 0  # a retransmitted or new SYN: the Python rules decide
            continue
        first = (seq[s] + 1) & mask if fl & 0x02 else seq[s]
        w = wire_len[s]
        if w:
            if pay_len[s] != w:
                state[f, 0] = 0  # cut by the snaplen
                continue
            seen = (state[f, 2] - first) & mask  # bytes of it already passed on
            if seen >= half:
                state[f, 0] = 0  # ahead of the stream: a hole, or reordering
                continue
            if seen < w:
                if state[f, 3] >= 0:
                    state[f, 0] = 0
                    continue
                state[f, 2] = (state[f, 2] + w - seen) & mask
                # walk the new bytes: frame bodies in one step, size prefixes byte by byte
                p = pay_off[s] + seen
                end = pay_off[s] + w
                while p < end:
                    if state[f, 4] > 0:
                        step = min(state[f, 4], end - p)
                        state[f, 4] -= step
                        p += step
                        continue
                    state[f, 5] = (state[f, 5] << 8) | np.int64(buf[p])
                    state[f, 6] += 1
                    p += 1
                    if state[f, 6] == 4:
                        size = state[f, 5] - (np.int64(1) << 32) if state[f, 5] >= half else state[f, 5]
                        if size < min_size[f] or size > max_size:
                            state[f, 0] = 0
                            break
                        state[f, 4] = size
                        state[f, 5] = 0
                        state[f, 6] = 0
            skip[k] = min(seen, w)
        if fl & 0x01:
            here = (first + w) & mask
            if here != state[f, 2] or (state[f, 3] >= 0 and state[f, 3] != here):
                state[f, 0] = 0
                continue
            state[f, 3] = here


@njit(cache=True, nogil=True)
def assemble(buf, order, lstart, carry, carry_off, carry_len, pay_off, pay_len, out_start, out, seg_pos):
    """Per local flow j: its carried bytes, then the new payload bytes (``pay_len`` at
    ``pay_off``) of its segments ``order[lstart[j] : lstart[j + 1]]``, into ``out`` from
    ``out_start[j]``; ``seg_pos[k]`` is where segment ``order[k]``'s bytes went. The caller
    sized ``out`` and ``carry`` from these lengths, and ``parse_packets`` kept each payload
    inside its packet."""
    for j in range(len(lstart) - 1):
        p = out_start[j]
        c = carry_len[j]
        copy_bytes(carry, carry_off[j], c, out, p)
        p += c
        for k in range(lstart[j], lstart[j + 1]):
            s = order[k]
            m = pay_len[s]
            seg_pos[k] = p
            copy_bytes(buf, pay_off[s], m, out, p)
            p += m


@njit(cache=True, nogil=True)
def split_frames(
    out,
    order,
    lstart,
    out_start,
    out_len,
    seg_pos,
    pay_len,
    ts,
    base,
    carry_len,
    carry_ts,
    min_size,
    max_size,
    f_flow,
    f_off,
    f_size,
    f_ts,
    f_done,
    tail,
):
    """Cut each local flow's bytes (as ``assemble`` laid them out: carried bytes, whose capture
    times span ``carry_ts[j]``, then segments) into frames: int32 size, then the frame. Per
    frame: local flow, offset in ``out`` after the size, size, earliest and latest capture time
    of the segments that carried it (``f_ts[k, 0:2]``), and the packet that completed it
    (``base`` + its index in the chunk). ``tail[j]``: (offset, length, earliest, latest time)
    of the bytes after the last whole frame, carried to the next chunk. Returns the number of
    frames, or -1 - j if flow j holds a size out of range (the census rules that out)."""
    k = 0
    for j in range(len(lstart) - 1):
        a = out_start[j]
        z = a + out_len[j]
        p = a
        q = lstart[j]  # the flow's segment holding byte p, walking forward
        while True:
            if z - p < 4:
                break
            size = _i32(out, p)
            if size < min_size[j] or size > max_size:
                return -1 - j
            e = p + 4 + size
            if z - e < 0:
                break
            t0 = np.int64(1) << 62
            t1 = -t0
            if p < a + carry_len[j]:
                t0, t1 = carry_ts[j, 0], carry_ts[j, 1]
            else:
                while q < lstart[j + 1] - 1 and (
                    pay_len[order[q]] == 0 or seg_pos[q] + pay_len[order[q]] <= p
                ):
                    q += 1
            r = q
            while r < lstart[j + 1]:
                s = order[r]
                if pay_len[s] and seg_pos[r] < e:
                    t0 = min(t0, ts[s])
                    t1 = max(t1, ts[s])
                    if seg_pos[r] + pay_len[s] >= e:
                        break
                r += 1
            f_flow[k] = j
            f_off[k] = p + 4
            f_size[k] = size
            f_ts[k, 0] = t0
            f_ts[k, 1] = t1
            f_done[k] = base + order[min(r, lstart[j + 1] - 1)]
            k += 1
            p = e
            q = r
        # the rest waits for the next chunk, with the times of what carried it
        t0 = np.int64(1) << 62
        t1 = -t0
        if p < a + carry_len[j]:
            t0, t1 = carry_ts[j, 0], carry_ts[j, 1]
        for r in range(lstart[j], lstart[j + 1]):
            s = order[r]
            if pay_len[s] and seg_pos[r] + pay_len[s] > p:
                t0 = min(t0, ts[s])
                t1 = max(t1, ts[s])
        tail[j, 0] = p
        tail[j, 1] = z - p
        tail[j, 2] = t0
        tail[j, 3] = t1
    return k


@njit(cache=True, nogil=True)
def request_headers(
    data,
    f_off,
    f_size,
    header_version,
    out_key,
    out_ver,
    out_corr,
    out_cid_off,
    out_cid_len,
    out_body,
    status,
):
    """Read the request headers of the frames at ``f_off`` (sizes ``f_size``). The header
    version comes from ``header_version[api_key, api_version]`` (-1: not in the specs). What is
    not plain (unknown API or version, non-ASCII client id, header tags, anything short) is
    marked H_PYTHON for the Python header parser, whose errors are the reference."""
    keys, vers = header_version.shape
    for i in range(len(f_off)):
        p = f_off[i]
        n = f_size[i]
        status[i] = H_PYTHON
        if n < 8:
            continue
        key = _u16(data, p)
        ver = _u16(data, p + 2)
        out_key[i] = key
        out_ver[i] = ver
        out_corr[i] = _i32(data, p + 4)
        if key >= keys or ver >= vers or header_version[key, ver] < 0:
            continue
        hv = header_version[key, ver]
        q = 8
        out_cid_len[i] = -1
        if hv >= 1:
            if n < 10:
                continue
            m = _u16(data, p + 8)
            q = 10
            if 0x8000 <= m < 0xFFFF:
                continue  # a negative length: the Python parser's error
            if m != 0xFFFF:
                if m > n - 10:
                    continue
                ascii = True
                for j in range(m):
                    if data[p + 10 + j] >= 0x80:
                        ascii = False
                        break
                if not ascii:
                    continue
                out_cid_off[i] = p + 10
                out_cid_len[i] = m
                q = 10 + m
        if hv >= 2:
            if q >= n or data[p + q] != 0:
                continue  # header tags present (or none to read): the Python parser's
            q += 1
        out_body[i] = p + q
        status[i] = H_OK


@njit(cache=True, nogil=True)
def gather(data, starts, ends, out):
    """Concatenate ``data[starts[i]:ends[i]]`` into ``out``."""
    p = 0
    for i in range(len(starts)):
        m = ends[i] - starts[i]
        if starts[i] < 0 or m < 0 or ends[i] > len(data) or p + m > len(out):
            raise IndexError("gather: a range outside its arrays")  # (the callers' ranges never are)
        copy_bytes(data, starts[i], m, out, p)
        p += m
