"""Numba kernels of the columnar capture path: pcap records, packet headers, TCP streams,
Kafka frames and headers, each a loop over whole arrays.

They do the common case only and say so: a packet, stream or header they do not handle is
marked for the Python layers (``arrowkafka.capture``), whose rules are the reference; the
columnar path must give what they give. Every read is checked against the buffer's end.
"""

from __future__ import annotations

import numpy as np
from numba import njit

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
                ext = nxt in (0, 43, 60, 135, 139, 140, 253, 254, 44, 51)
                kind[i] = K_PYTHON if ext else K_NON_TCP
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
    """FNV-1a, 32 bits (products stay below 2**63: no overflow in either tier)."""
    h = np.int64(2166136261)
    for j in range(len(row)):
        h = ((h ^ np.int64(row[j])) * np.int64(16777619)) & np.int64(0xFFFFFFFF)
    return h


@njit(cache=True, nogil=True)
def _same(addr, i, j, reverse):
    """Whether row i is the direction of row j (or, with ``reverse``, its other direction):
    rows are src ip (16), dst ip (16), ip version, sport (2), dport (2)."""
    if addr[i, 32] != addr[j, 32]:
        return False
    for b in range(16):
        if (
            addr[i, b] != addr[j, b + 16 if reverse else b]
            or addr[i, b + 16] != addr[j, b if reverse else b + 16]
        ):
            return False
    for b in range(2):
        if addr[i, 33 + b] != addr[j, 35 + b if reverse else 33 + b]:
            return False
        if addr[i, 35 + b] != addr[j, 33 + b if reverse else 35 + b]:
            return False
    return True


@njit(cache=True, nogil=True)
def flows(addr, segs, flow_of, first, reverse):
    """Number the directions of the segments ``segs`` (rows of ``addr``) in order of first
    appearance: ``flow_of[k]`` for segment ``segs[k]``, ``first[f]`` a row of flow f, and
    ``reverse[f]`` the flow of the other direction (-1 if never seen). Returns the count."""
    size = 1
    while size < 2 * len(segs) + 2:
        size *= 2
    table = np.full(size, -1, np.int64)
    hashes = np.empty(len(segs) + 1, np.int64)
    m = np.int64(size - 1)
    nf = 0
    for k in range(len(segs)):
        i = segs[k]
        h = _hash(addr[i])
        slot = h & m
        while True:
            f = table[slot]
            if f < 0:
                table[slot] = nf
                first[nf] = i
                hashes[nf] = h
                flow_of[k] = nf
                nf += 1
                break
            if hashes[f] == h and _same(addr, first[f], i, False):
                flow_of[k] = f
                break
            slot = (slot + 1) & m
    back = np.empty(addr.shape[1], np.uint8)
    for f in range(nf):
        i = first[f]
        back[0:16] = addr[i, 16:32]
        back[16:32] = addr[i, 0:16]
        back[32] = addr[i, 32]
        back[33:35] = addr[i, 35:37]
        back[35:37] = addr[i, 33:35]
        h = _hash(back)
        slot = h & m
        reverse[f] = -1
        while True:
            g = table[slot]
            if g < 0:
                break
            if hashes[g] == h and _same(addr, first[g], i, True):
                reverse[f] = g
                break
            slot = (slot + 1) & m
    return nf


@njit(cache=True, nogil=True)
def group_by_flow(segs, flow_of, nflows, order, fstart):
    """Counting sort: ``order`` lists ``segs`` flow by flow, capture order kept within each;
    flow f is ``order[fstart[f] : fstart[f + 1]]``."""
    for k in range(len(segs)):
        fstart[flow_of[k] + 1] += 1
    for f in range(nflows):
        fstart[f + 1] += fstart[f]
    fill = fstart[:-1].copy()
    for k in range(len(segs)):
        f = flow_of[k]
        order[fill[f]] = segs[k]
        fill[f] += 1


@njit(cache=True, nogil=True)
def clean_flows(order, fstart, seq, flags, pay_len, wire_len, clean, nbytes, skip):
    """Which directions are textbook TCP: one SYN, first; every payload byte captured; no
    segment ahead of the bytes seen so far (no hole, no reordering); nothing new after the
    FIN. Retransmitted bytes are dropped as the Python reassembler drops them (first seen
    wins): ``skip[s]`` is how many leading payload bytes of segment ``s`` were seen before.
    ``order`` lists segments flow by flow (``fstart`` bounds each), each flow in capture
    order. Such streams need no reassembly; a RST changes no bytes."""
    mask = (np.int64(1) << 32) - 1
    half = np.int64(1) << 31
    for f in range(len(fstart) - 1):
        ok = True
        expected = np.int64(0)
        fin = np.int64(-1)
        total = np.int64(0)
        for k in range(fstart[f], fstart[f + 1]):
            s = order[k]
            fl = flags[s]
            if k == fstart[f]:
                if not fl & 0x02:
                    ok = False
                    break
                expected = (seq[s] + 1) & mask
            elif fl & 0x02:
                ok = False  # a retransmitted or new SYN: the Python rules decide
                break
            first = (seq[s] + 1) & mask if fl & 0x02 else seq[s]
            w = wire_len[s]
            if w:
                if pay_len[s] != w:
                    ok = False  # cut by the snaplen
                    break
                seen = (expected - first) & mask  # bytes of it already passed on
                if seen >= half:
                    ok = False  # ahead of the stream: a hole, or reordering
                    break
                if seen < w:
                    if fin >= 0:
                        ok = False
                        break
                    expected = (expected + w - seen) & mask
                    total += w - seen
                skip[s] = min(seen, w)
            if fl & 0x01:
                here = (first + w) & mask
                if here != expected or (fin >= 0 and fin != here):
                    ok = False
                    break
                fin = here
        clean[f] = ok
        nbytes[f] = total


@njit(cache=True, nogil=True)
def gather_streams(buf, order, fstart, take, pay_off, pay_len, out_start, out, seg_pos):
    """Copy the payloads (``pay_len`` bytes at ``pay_off``: what is new in each segment) of the
    flows in ``take`` into ``out`` from ``out_start[f]``, and give each segment its position in
    ``out`` (``seg_pos``)."""
    for f in take:
        p = out_start[f]
        for k in range(fstart[f], fstart[f + 1]):
            s = order[k]
            m = pay_len[s]
            seg_pos[s] = p
            src = pay_off[s]
            out[p : p + m] = buf[src : src + m]
            p += m


@njit(cache=True, nogil=True)
def split_frames(
    out,
    order,
    fstart,
    take,
    out_start,
    nbytes,
    seg_pos,
    pay_len,
    ts,
    min_size,
    max_size,
    f_flow,
    f_off,
    f_size,
    f_ts0,
    f_ts1,
    f_done,
    bad,
):
    """Cut each stream of ``take`` into frames (int32 size, then the frame). A stream that ends
    inside a frame or holds a size out of [min_size[f], max_size] is marked ``bad`` (the
    Python framer's rules then apply to it) and gives no frames. Per frame: its flow, offset
    in ``out`` after the size, size, earliest and latest capture time of its segments, and
    the segment that completed it. Returns the number of frames."""
    k = 0
    for f in take:
        first = k
        a = out_start[f]
        z = a + nbytes[f]
        q = fstart[f]  # the flow's segment holding byte p (walks forward)
        p = a
        while p < z:
            if z - p < 4:
                bad[f] = True
                break
            size = _i32(out, p)
            if size < min_size[f] or size > max_size or z - p - 4 < size:
                bad[f] = True
                break
            e = p + 4 + size
            while pay_len[order[q]] == 0 or seg_pos[order[q]] + pay_len[order[q]] <= p:
                q += 1
            t0 = ts[order[q]]
            t1 = t0
            r = q
            while True:
                s = order[r]
                if pay_len[s]:
                    t = ts[s]
                    t0 = min(t0, t)
                    t1 = max(t1, t)
                    if seg_pos[s] + pay_len[s] >= e:
                        break
                r += 1
            f_flow[k] = f
            f_off[k] = p + 4
            f_size[k] = size
            f_ts0[k] = t0
            f_ts1[k] = t1
            f_done[k] = order[r]
            k += 1
            p = e
        if bad[f]:
            k = first
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
        out[p : p + m] = data[starts[i] : ends[i]]
        p += m
