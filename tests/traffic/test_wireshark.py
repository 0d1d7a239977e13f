"""Every field Wireshark 4.4.5 (npm `@goodtools/wiregasm` 1.9.1, WebAssembly) decodes in the three
real captures, compared with our Parquet rows; where it disagrees, the reason we are right.

Wireshark's Kafka PDUs are matched to our rows by connection, direction and correlation id, then
each `kafka.*` field Wireshark shows is compared, in wire order, with the columns FIELD_MAP names
for it. A record set we keep as bytes is compared byte for byte, and the header of each record
batch (or legacy message) in it is read here from those bytes and compared with Wireshark's.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka.api import SpecSet
from arrowkafka.traffic import decode_capture
from tests.conftest import SHARED

pytestmark = pytest.mark.slow

WIREGASM = "1.9.1"  # npm @goodtools/wiregasm: Wireshark 4.4.5
WIRESHARK = "4.4.5"
CAPTURES = ("tansu_confluent", "noida_kafka_python", "kafka091_legacy")
BROKER_PORTS = (9092,)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "arrowkafka"
DRIVER = Path(__file__).with_name("wireshark_dump.mjs")

# ---------------------------------------------------------------------------------------------
# Wireshark field name -> our columns. A pattern matches a column path (list levels left out,
# "topics.partitions.error_code") that ends with it at a dot; "Message:pattern" only in that
# message. Frame columns start with "_". "@records" is a record set, "@batch:..." a field of a
# batch header read from its bytes (see _batch_headers).
FIELD_MAP: dict[str, tuple[str, ...]] = {
    # headers
    "kafka.api_version": ("_api_version",),
    "kafka.response.version": ("_api_version",),
    "kafka.correlation_id": ("_correlation_id",),
    "kafka.client_id": ("_client_id",),
    "kafka.client_software_name": ("client_software_name",),
    "kafka.client_software_version": ("client_software_version",),
    "kafka.tagged_field_tag": ("@tag",),
    # everywhere
    "kafka.error": ("error_code", "partition_error_code"),
    "kafka.error_message": ("error_message",),
    "kafka.throttle_time": ("throttle_time_ms",),
    "kafka.timeout": ("timeout_ms",),
    "kafka.topic_name": ("topics.name", "topics.topic", "topic_data.name", "responses.name",
                         "responses.topic", "topic_name", "topic_names", "v3_and_below_topics.name",
                         "results_by_topic_v3_and_below.name"),
    "kafka.topic_id": ("topic_id",),
    "kafka.partition_id": ("partition_index", "partitions.partition", "partition_indexes", "index",
                           "v3_and_below_topics.partitions"),
    "kafka.offset": ("offset", "fetch_offset", "committed_offset", "high_watermark", "base_offset",
                     "old_style_offsets", "low_watermark"),
    "kafka.offset_time": ("timestamp", "log_append_time_ms"),
    "kafka.max_offsets": ("max_num_offsets",),
    "kafka.leader_epoch": ("leader_epoch", "committed_leader_epoch", "current_leader_epoch"),
    "kafka.leader_id": ("leader_id", "ungrouped_partition_states.leader"),
    "kafka.node_id": ("node_id", "broker_id", "controller_id", "live_brokers.id"),
    "kafka.host": ("host", "host_name"),
    "kafka.port": ("port",),
    "kafka.rack": ("rack", "rack_id"),
    "kafka.replica_id": ("replica_id", "replica_nodes", "replicas", "UpdateMetadataRequest:isr",
                         "preferred_read_replica"),
    "kafka.isr_id": ("isr_nodes", "LeaderAndIsrRequest:isr"),
    "kafka.controller_epoch": ("controller_epoch",),
    "kafka.zk_version": ("zk_version", "partition_epoch"),
    "kafka.cluster_id": ("cluster_id",),
    # metadata, topics, configs
    "kafka.allow_auto_topic_creation": ("allow_auto_topic_creation",),
    "kafka.include_topic_authorized_ops": ("include_topic_authorized_operations",),
    "kafka.include_cluster_authorized_ops": ("include_cluster_authorized_operations",),
    "kafka.include_group_authorized_ops": ("DescribeGroupsRequest:include_authorized_operations",),
    "kafka.topic_authorized_ops": ("topic_authorized_operations",),
    "kafka.cluster_authorized_ops": ("cluster_authorized_operations",),
    "kafka.group_authorized_ops": ("DescribeGroupsResponse:authorized_operations",),
    "kafka.is_internal": ("is_internal",),
    "kafka.num_partitions": ("num_partitions",),
    "kafka.replication_factor": ("replication_factor",),
    "kafka.validate_only": ("validate_only",),
    "kafka.config_key": ("configs.name",),
    "kafka.config_value": ("configs.value",),
    "kafka.config_resource_type": ("resource_type",),
    "kafka.config_resource_name": ("resource_name",),
    "kafka.config_include_synonyms": ("include_synonyms",),
    "kafka.config_include_documentation": ("include_documentation",),
    "kafka.config_readonly": ("read_only",),
    "kafka.config_source": ("config_source",),
    "kafka.config_sensitive": ("is_sensitive",),
    "kafka.config_data_type": ("config_type",),
    "kafka.config_documentation": ("documentation",),
    "kafka.config_operation": ("config_operation",),
    # api versions
    "kafka.api_versions.api_key": ("api_keys.api_key",),
    "kafka.api_versions.min_version": ("api_keys.min_version",),
    "kafka.api_versions.max_version": ("api_keys.max_version",),
    # produce, fetch, offsets
    "kafka.required_acks": ("acks",),
    "kafka.transactional_id": ("transactional_id", "v3_and_below_transactional_id"),
    "kafka.transaction_timeout": ("transaction_timeout_ms",),
    "kafka.transaction_result": ("committed",),
    "kafka.producer_id": ("producer_id", "v3_and_below_producer_id"),
    "kafka.producer_epoch": ("producer_epoch", "v3_and_below_producer_epoch"),
    "kafka.max_wait_time": ("max_wait_ms",),
    "kafka.min_bytes": ("min_bytes",),
    "kafka.max_bytes": ("max_bytes", "partition_max_bytes"),
    "kafka.isolation_level": ("isolation_level",),
    "kafka.fetch_session_id": ("session_id",),
    "kafka.fetch_session_epoch": ("session_epoch",),
    "kafka.last_fetched_epoch": ("last_fetched_epoch",),
    "kafka.last_stable_offset": ("last_stable_offset",),
    "kafka.log_start_offset": ("log_start_offset",),
    "@records": ("@records",),
    # groups and coordinators
    "kafka.coordinator_key": ("coordinator_keys", "coordinators.key", "FindCoordinatorRequest:key"),
    "kafka.coordinator_type": ("key_type",),
    "kafka.consumer_group": ("group_id", "groups_names", "DescribeGroupsRequest:groups",
                             "FindCoordinatorRequest:key"),
    "kafka.group_id": ("group_id",),
    "kafka.consumer_group_instance": ("group_instance_id",),
    "kafka.member_id": ("member_id",),
    "kafka.member_epoch": ("member_epoch",),
    "kafka.generation_id": ("generation_id", "generation_id_or_member_epoch"),
    "kafka.group_leader_id": ("JoinGroupResponse:leader",),
    "kafka.group_state": ("group_state",),
    "kafka.protocol_type": ("protocol_type",),
    "kafka.protocol_name": ("protocol_name", "protocols.name", "DescribeGroupsResponse:protocol_data"),
    "kafka.protocol_metadata": ("protocols.metadata",),
    "kafka.member_metadata": ("members.metadata", "member_metadata"),
    "kafka.member_assignment": ("assignment", "member_assignment"),
    "kafka.session_timeout": ("session_timeout_ms",),
    "kafka.rebalance_timeout": ("rebalance_timeout_ms",),
    "kafka.leave_reason": ("reason",),
    "kafka.metadata": ("committed_metadata", "partitions.metadata"),
    "kafka.retention_time": ("retention_time_ms",),
    "kafka.require_stable_offset": ("require_stable",),
}  # fmt: skip
# Wireshark fields we have no column for, and why they are not compared.
NOT_COMPARED = {
    "kafka.len": "the frame's size prefix: framing, not a column",
    "kafka.api_key": "the table a row is in says the api key; checked when matching",
    "kafka.request_frame": "a Wireshark frame number",
    "kafka.tagged_field_data": "a tagged field's raw value; its tag is compared, and its value by name where "
    "Wireshark decodes it",
    "kafka.message_compression_reduction": "Wireshark's ratio of compressed to inflated size",
}
# Inside a record batch Wireshark also decodes each record, and a compressed batch's inflated
# records: we keep record sets as bytes (compared whole), so those are counted, not compared.
HEADER_FIELDS = {"kafka.len", "kafka.api_key", "kafka.api_version", "kafka.correlation_id", "kafka.client_id",
                 "kafka.request_frame", "kafka.response.version"}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Getting Wireshark and its dumps


def _wiregasm_dir() -> Path:
    """The unpacked npm package, fetched once into the user cache."""
    target = CACHE / f"wiregasm-{WIREGASM}"
    if (target / "package" / "dist" / "wiregasm.wasm").is_file():
        return target / "package"
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"npm not found: needed once to fetch @goodtools/wiregasm@{WIREGASM} into {target}")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        run = subprocess.run(
            [npm, "pack", f"@goodtools/wiregasm@{WIREGASM}"],
            cwd=tmp, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        tgz = Path(tmp) / f"goodtools-wiregasm-{WIREGASM}.tgz"
        if run.returncode != 0 or not tgz.is_file():
            pytest.fail(
                f"could not fetch @goodtools/wiregasm@{WIREGASM} with `npm pack` (exit {run.returncode}):\n"
                f"{run.stderr.strip()[-2000:]}\nthe Wireshark cross-check cannot run without it"
            )
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(tgz) as tar:
            if hasattr(tarfile, "data_filter"):  # 3.11.4+: no links or paths out of the folder
                tar.extractall(unpacked, filter="data")
            else:
                tar.extractall(unpacked)
        meta = json.loads((unpacked / "package" / "package.json").read_text())
        assert meta["version"] == WIREGASM, meta["version"]
        try:
            unpacked.rename(target)  # atomic: a concurrent run may have won, which is fine
        except OSError:
            if not (target / "package" / "dist" / "wiregasm.wasm").is_file():
                raise
    return target / "package"


def _dump_paths(captures: list[Path]) -> dict[Path, Path]:
    driver = hashlib.sha256(DRIVER.read_bytes()).hexdigest()[:12]
    out = CACHE / "wireshark-dumps"
    return {
        c: out / f"{hashlib.sha256(c.read_bytes()).hexdigest()}-wiregasm{WIREGASM}-{driver}.json"
        for c in captures
    }


def wireshark_dumps(captures: list[Path]) -> tuple[dict[Path, dict[str, Any]], float]:
    """Wireshark's tree of every Kafka PDU per capture, cached by the capture's sha256, the
    wiregasm version and the driver; and the seconds the dump took (0 when cached)."""
    paths = _dump_paths(captures)
    missing = [c for c, p in paths.items() if not p.is_file()]
    seconds = 0.0
    if missing:
        node = shutil.which("node")
        if node is None:
            pytest.fail("node not found: the Wireshark cross-check runs wiregasm under node")
        package = _wiregasm_dir()
        next(iter(paths.values())).parent.mkdir(parents=True, exist_ok=True)
        args: list[str] = []
        for c in missing:
            args += [str(c), str(paths[c]) + ".tmp"]
        start = time.perf_counter()
        run = subprocess.run(
            [node, str(DRIVER), *args], env={**os.environ, "WIREGASM_DIR": str(package)},
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        if run.returncode != 0:
            pytest.fail(f"wiregasm dump failed (exit {run.returncode}):\n{run.stderr[-4000:]}")
        for c in missing:
            os.replace(str(paths[c]) + ".tmp", paths[c])
    dumps = {c: json.loads(p.read_text()) for c, p in paths.items()}
    for d in dumps.values():
        assert d["wireshark"] == WIRESHARK
    return dumps, seconds


# ---------------------------------------------------------------------------------------------
# Wireshark's side: a PDU's fields in tree (= wire) order


@dataclass
class WsPdu:
    frame: int
    client: str
    request: bool
    correlation_id: int | None
    api_key: int | None
    fields: list[tuple[str, str]]  # (kafka.name, text after " == ")
    experts: list[str]  # kafka.* names of expert notes
    malformed: list[str] = field(default_factory=list)  # the notes in Wireshark's "Malformed" group
    inside_records: int = 0  # fields of single records: not compared


def _split(filt: str) -> tuple[str, str | None]:
    name, sep, value = filt.partition(" == ")
    return name, (value if sep else None)


def _hex_bytes(filt: str) -> bytes:
    """The bytes of a node whose filter is `frame[a:n] == aa:bb:...` (or `text` when empty)."""
    _, value = _split(filt)
    return bytes.fromhex(value.replace(":", "")) if value else b""


def _ws_walk(nodes: list[Any], pdu: WsPdu, in_records: bool = False) -> None:
    for filt, label, children in nodes:
        name, value = _split(filt)
        if name == "_ws.expert":
            _ws_expert(children, pdu)
            continue
        if label == "Message Set" and not in_records:
            if name.startswith("frame[") or name == "text":  # "" when Wireshark shows no bytes
                pdu.fields.append(("@records", _hex_bytes(filt).hex()))
            for cfilt, clabel, grand in children:
                if clabel.startswith(("Record Batch", "Message")):
                    _ws_batch(grand, pdu)
                else:
                    _ws_walk([(cfilt, clabel, grand)], pdu, in_records=True)
            continue
        if name.startswith("kafka.") and value is not None:
            if in_records:
                pdu.inside_records += 1
            else:
                pdu.fields.append((name, value))
        _ws_walk(children, pdu, in_records)


def _ws_expert(children: list[Any], pdu: WsPdu) -> None:
    names = [_split(c[0])[0] for c in children if c[0].startswith("kafka.")]
    pdu.experts += names
    if '_ws.expert.group == "Malformed"' in (c[0] for c in children):
        pdu.malformed += names


def _ws_batch(nodes: list[Any], pdu: WsPdu) -> None:
    """A record batch's (or legacy message's) own fields; its records are not compared."""
    for filt, _label, children in nodes:
        name, value = _split(filt)
        if name.startswith("kafka.") and value is not None:
            pdu.fields.append(("@batch:" + name, value))
        elif name == "_ws.expert":
            _ws_expert(children, pdu)
        else:
            _ws_walk(children, pdu, in_records=True)


def ws_pdus(dump: dict[str, Any]) -> list[WsPdu]:
    # a dissector exception ends the frame's last PDU in that direction with "[Malformed Packet]"
    thrown = {(m["frame"], m["src"], m["dst"]) for m in dump["malformed"]}
    last = {(p["frame"], p["src"], p["dst"]): i for i, p in enumerate(dump["pdus"])}
    out = []
    for i, p in enumerate(dump["pdus"]):
        request = p["dst"] in BROKER_PORTS
        client = f"{p['srcip']}:{p['src']}" if request else f"{p['dstip']}:{p['dst']}"
        pdu = WsPdu(p["frame"], client, request, None, None, [], [])
        _ws_walk(p["kafka"], pdu)
        header = dict(f for f in pdu.fields if f[0] in ("kafka.correlation_id", "kafka.api_key"))
        pdu.correlation_id = int(header["kafka.correlation_id"]) if "kafka.correlation_id" in header else None
        pdu.api_key = int(header["kafka.api_key"]) if "kafka.api_key" in header else None
        key = (p["frame"], p["src"], p["dst"])
        if key in thrown and last[key] == i:
            pdu.malformed.append("_ws.malformed")
        out.append(pdu)
    assert len(thrown) == sum(1 for k in thrown if k in last), "an exception outside any Kafka PDU"
    return out


# ---------------------------------------------------------------------------------------------
# Our side: a row's leaf values in wire order, with their column paths


def _tag(f: pa.Field) -> int | None:
    meta = f.metadata or {}
    return int(meta[b"kafka.tag"]) if b"kafka.tag" in meta else None


def _our_walk(fields: list[pa.Field], value: dict[str, Any], path: str) -> Iterator[tuple[str, Any]]:
    """Leaves of one struct: untagged fields in order, then the tagged ones the wire carried, by tag
    (as they are written); a tag section's tags as `<path>@tag`."""
    present = set(value.get("_tags_present") or [])
    unknown = dict(value.get("_unknown_tags") or [])
    untagged = [f for f in fields if _tag(f) is None and not f.name.startswith("_")]
    tagged = sorted((f for f in fields if _tag(f) in present), key=lambda f: _tag(f) or 0)
    for f in untagged + tagged:
        yield from _our_value(f.type, value[f.name], f"{path}.{f.name}" if path else f.name)
    for tag in sorted(present | set(unknown)):
        yield f"{path}@tag", tag


def _our_value(t: pa.DataType, v: Any, path: str) -> Iterator[tuple[str, Any]]:
    if pa.types.is_struct(t):
        if v is not None:
            yield from _our_walk(list(t), v, path)
    elif pa.types.is_list(t) and pa.types.is_struct(t.value_type):
        for item in v or []:
            yield from _our_walk(list(t.value_type), item, path)
    elif pa.types.is_list(t):
        for item in v or []:
            yield path, item
    elif path.endswith("records") and pa.types.is_binary(t):
        yield "@records", v
        for name, value in _batch_headers(v or b""):
            yield "@batch:" + name, value
    else:
        yield path, v


def _batch_headers(data: bytes) -> Iterator[tuple[str, Any]]:
    """The header fields of each record batch (magic 2, KIP-98) or legacy message (magic 0/1)
    of a record set, read here from the bytes we kept, named as Wireshark names them."""
    pos = 0
    while pos + 17 <= len(data):
        base_offset, size, epoch_or_crc, magic = struct.unpack_from(">qiiB", data, pos)
        if pos + 12 + size > len(data):
            return  # a partial batch at the end of a fetch: Wireshark shows no header either
        yield "kafka.offset", base_offset
        yield "kafka.message_size", size
        if magic == 2:
            (crc, attr, last_delta, first_ts, max_ts, producer_id, producer_epoch, base_seq,
             count) = struct.unpack_from(">IhiqqqhiI", data, pos + 17)  # fmt: skip
            yield "kafka.leader_epoch", epoch_or_crc
            yield "kafka.message_magic", magic
            yield "kafka.batch_crc", crc
            yield "kafka.batch_codec", attr & 7
            yield "kafka.batch_timestamp_type", (attr >> 3) & 1
            yield "kafka.batch_transactional", (attr >> 4) & 1
            yield "kafka.batch_control_batch", (attr >> 5) & 1
            yield "kafka.batch_last_offset_delta", last_delta
            yield "kafka.batch_first_timestamp", first_ts
            yield "kafka.batch_last_timestamp", max_ts
            yield "kafka.producer_id", producer_id
            yield "kafka.producer_epoch", producer_epoch
            yield "kafka.batch_base_sequence", base_seq
            yield "kafka.batch_size", count
        else:
            attr = data[pos + 17]
            yield "kafka.message_crc", epoch_or_crc & 0xFFFFFFFF
            yield "kafka.message_magic", magic
            yield "kafka.message_codec", attr & 7
            yield "kafka.message_timestamp_type", (attr >> 3) & 1
            at = pos + 18
            if magic == 1:
                yield "kafka.message_timestamp", struct.unpack_from(">q", data, at)[0]
                at += 8
            (n,) = struct.unpack_from(">i", data, at)
            yield "kafka.message_key", None if n < 0 else data[at + 4 : at + 4 + n]
            if attr & 7 == 0:  # a compressed message's value is a message set Wireshark shows inflated
                (m,) = struct.unpack_from(">i", data, at + 4 + max(n, 0))
                yield "kafka.message_value", None if m < 0 else data[at + 8 + n : at + 8 + n + m]
        pos += 12 + size


# ---------------------------------------------------------------------------------------------
# Comparing one value


def _ws_time_ns(text: str) -> int:
    """`"2026-11-22 02:13:26.694000000Z"` (nanoseconds) to ns since the epoch."""
    day, frac = text.strip('"').rstrip("Z").split(".")
    t = dt.datetime.strptime(day, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
    return int(t.timestamp()) * 10**9 + int(frac.ljust(9, "0"))


def _ws_string(text: str) -> str | None:
    if text == '"[ Null ]"':
        return None
    return str(json.loads(text))  # Wireshark quotes and escapes as JSON does for these strings


_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def same(name: str, ws: str, ours: Any) -> bool:
    """Whether Wireshark's display of a field equals our value."""
    if name.endswith("timestamp") and not name.endswith("_type"):
        return ours is not None and _ws_time_ns(ws) == ours * 1_000_000  # ms on the wire
    if name == "@records":
        return bytes.fromhex(ws) == (ours or b"")
    if isinstance(ours, bool):
        return ws in ("True", "1") if ours else ws in ("False", "0")
    if isinstance(ours, int):
        if ws.startswith("0x"):
            return int(ws, 16) == ours & ((1 << (4 * (len(ws) - 2))) - 1)
        return int(ws) == ours
    if isinstance(ours, uuid.UUID):
        return ws == str(ours)
    if isinstance(ours, bytes) and len(ours) == 16 and _UUID_TEXT.fullmatch(ws):
        return ws == str(uuid.UUID(bytes=ours))  # the Parquet files hold a uuid as its 16 bytes
    if isinstance(ours, bytes) or (ours is None and ws == '""'):
        # Wireshark shows a null byte string (length -1) as an empty one
        return bytes.fromhex(ws.strip('"').replace(":", "")) == (ours or b"")
    if ws.startswith('"'):
        return _ws_string(ws) == ours
    return ours is None and ws in ('"[ Null ]"', "")


# ---------------------------------------------------------------------------------------------
# Matching PDUs to rows and comparing them


@dataclass
class Row:
    message: str
    version: int
    values: dict[str, Any]


@dataclass(frozen=True)
class Disagreement:
    capture: str
    frame: int
    message: str
    version: int  # the version the body was decoded as
    field: str  # Wireshark's name; "@pdu" when a whole PDU differs
    path: str  # our column path, "" when we have no value
    ws: str | None  # None: Wireshark shows no value here
    ours: Any

    def __str__(self) -> str:
        ours = self.ours.hex() if isinstance(self.ours, bytes) else self.ours
        return (f"{self.capture} frame {self.frame} {self.message} v{self.version} {self.field} "
                f"[{self.path}]: wireshark {self.ws!r:.120}, ours {ours!r:.120}")  # fmt: skip


@dataclass
class Tally:
    ws_pdus: int = 0
    matched: int = 0
    header_only: int = 0  # Wireshark shows no body field (an unknown API, an empty body, a lost request)
    request_missing: int = 0  # responses whose request Wireshark could not dissect
    assumed_version: int = 0  # dissected in the layout of an older version it knows
    both_reject: int = 0
    compared: int = 0
    agree: int = 0
    not_compared: Counter[str] = field(default_factory=Counter)
    unmapped: Counter[str] = field(default_factory=Counter)  # Wireshark fields in no table
    disagreements: list[Disagreement] = field(default_factory=list)


def _matches(path: str, pattern: str, message: str) -> bool:
    scope, _, pattern = pattern.rpartition(":")
    if (scope and not message.startswith(scope)) or path[0] == "@" != pattern[0]:
        return False
    return path == pattern or path.endswith("." + pattern) or (pattern[0] == "@" and path.endswith(pattern))


def _our_leaves(row: Row, request: bool, specs: SpecSet) -> list[tuple[str, Any]]:
    v = row.values
    head = [("_api_version", v["_api_version"]), ("_correlation_id", v["_correlation_id"])]
    if request:
        head.append(("_client_id", v["_client_id"]))
    schema = specs.arrow_schema(row.message, row.version)
    return head + list(_our_walk(list(schema), v, ""))


def compare_pdu(capture: str, pdu: WsPdu, row: Row, specs: SpecSet, tally: Tally) -> None:
    ours = _our_leaves(row, pdu.request, specs)
    names = list(dict.fromkeys(n for n, _ in pdu.fields))
    for name in names:
        if name.removeprefix("@batch:") in NOT_COMPARED:
            tally.not_compared[name] += 1
            continue
        ws_values = [v for n, v in pdu.fields if n == name]
        if name.startswith("@batch:"):
            our_values = [(p, v) for p, v in ours if p == name]
        elif name in FIELD_MAP:
            our_values = [
                (p, v) for p, v in ours if any(_matches(p, m, row.message) for m in FIELD_MAP[name])
            ]
        else:
            tally.unmapped[f"{row.message} v{row.version} {name}"] += len(ws_values)
            continue
        for i in range(max(len(ws_values), len(our_values))):
            ws = ws_values[i] if i < len(ws_values) else None
            path, value = our_values[i] if i < len(our_values) else ("", None)
            tally.compared += 1
            if ws is not None and path and same(name.removeprefix("@batch:"), ws, value):
                tally.agree += 1
            else:
                tally.disagreements.append(
                    Disagreement(capture, pdu.frame, row.message, row.version, name, path, ws, value)
                )


def load_rows(outdir: Path) -> dict[tuple[str, bool, int], list[Row]]:
    rows: dict[tuple[str, bool, int], list[Row]] = defaultdict(list)
    for path in sorted(outdir.glob("*.parquet")):
        if path.stem[0].islower():  # rejects and record tables (message tables are CamelCase)
            continue
        message = path.stem
        for v in sorted(pq.read_table(path).to_pylist(), key=lambda r: r["_ts_first"]):
            key = (v["_client"], message.endswith("Request"), v["_correlation_id"])
            rows[key].append(Row(message, v["_version"], v))
    return rows


def compare_capture(capture: str, dump: dict[str, Any], outdir: Path, specs: SpecSet) -> Tally:
    tally = Tally()
    rows = load_rows(outdir)
    rejects = pq.read_table(outdir / "rejects.parquet").to_pylist()

    def disagree(frame: int, message: str, version: int, name: str, ws: str | None, ours: Any) -> None:
        tally.disagreements.append(Disagreement(capture, frame, message, version, name, "", ws, ours))

    for pdu in ws_pdus(dump):
        tally.ws_pdus += 1
        candidates = rows.get((pdu.client, pdu.request, pdu.correlation_id or -1), [])
        if not candidates:  # a body we reject: Wireshark's verdict on it is the comparison
            spec = (specs.request if pdu.request else specs.response)(pdu.api_key or 0)
            why = [r["reason"] for r in rejects if r["client"] == pdu.client and r["message"] == spec.name]
            if why and pdu.malformed:
                tally.both_reject += 1
            else:
                version = int(dict(pdu.fields).get("kafka.api_version") or -1)
                ours = f"rejected: {why}" if why else None
                disagree(pdu.frame, spec.name, version, "@pdu", "decoded", ours)
            continue
        row = candidates.pop(0)
        tally.matched += 1
        if pdu.api_key is not None and specs[row.message].api_key != pdu.api_key:
            disagree(pdu.frame, row.message, row.version, "kafka.api_key", str(pdu.api_key), row.message)
        tally.header_only += all(n in HEADER_FIELDS for n, _ in pdu.fields)
        tally.request_missing += "kafka.request_missing" in pdu.experts
        tally.assumed_version += "kafka.assumed_api_version" in pdu.experts
        if pdu.malformed:  # a body we decoded to its last byte
            disagree(pdu.frame, row.message, row.version, "@malformed", " ".join(pdu.malformed), "decoded")
        tally.not_compared["(inside records)"] += pdu.inside_records
        compare_pdu(capture, pdu, row, specs, tally)
    for left in rows.values():  # rows Wireshark shows no PDU for
        for row in left:
            disagree(-1, row.message, row.version, "@pdu", None, f"{row.values['_client']} "
                     f"correlation id {row.values['_correlation_id']}")  # fmt: skip
    return tally


# ---------------------------------------------------------------------------------------------
# Where Wireshark 4.4.5 is wrong, and why we are right. A disagreement not listed here fails the
# test, and so does an entry no disagreement uses.


@dataclass(frozen=True)
class Known:
    captures: tuple[str, ...]
    messages: tuple[str, ...]
    versions: tuple[int, ...]  # the version we decoded the body as
    fields: tuple[str, ...]  # Wireshark's names; "@malformed": it flags the PDU as malformed
    reason: str
    holds: Callable[[Disagreement], bool] = lambda d: True  # the exact shape of the error

    def covers(self, d: Disagreement) -> bool:
        return (d.capture in self.captures and d.message in self.messages and d.version in self.versions
                and d.field in self.fields and self.holds(d))  # fmt: skip


def _timespec_misread(d: Disagreement) -> bool:
    """Wireshark's time is our int64 milliseconds read as 32-bit seconds and 32-bit nanoseconds."""
    ms = int(d.ours)
    return d.ws is not None and _ws_time_ns(d.ws) == (ms >> 32) * 10**9 + (ms & 0xFFFFFFFF)


KNOWN = [
    Known(("tansu_confluent", "noida_kafka_python"), ("ProduceRequest", "FetchResponse"), (9, 10, 12, 16),
          ("@batch:kafka.batch_first_timestamp", "@batch:kafka.batch_last_timestamp"),
          "A v2 record batch's FirstTimestamp and MaxTimestamp are int64 milliseconds since the epoch "
          "(Kafka's DefaultRecordBatch; the records' own timestamps, which Wireshark shows as "
          "first + delta, are in 2026 as these are). packet-kafka.c adds them with "
          "dissect_kafka_int64 (plain ENC_BIG_ENDIAN) to an FT_ABSOLUTE_TIME field, so Wireshark "
          "reads the 8 bytes as 32-bit seconds and 32-bit nanoseconds: 1970-01-01 00:06:58.",
          _timespec_misread),
    Known(("tansu_confluent",), ("GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse",
                                 "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"), (0,),
          ("@malformed",),
          "API keys 71 (KIP-714) and 69 (KIP-848) are unknown to Wireshark 4.4.5: it shows the header, "
          "dissects no body, and then notes that it did not reach the PDU's end. The bodies decode to "
          "their last byte in the spec's layout."),
    Known(("tansu_confluent", "noida_kafka_python"), ("ListGroupsRequest", "ListGroupsResponse"), (4, 5),
          ("kafka.tagged_field_tag", "@malformed"),
          "Wireshark 4.4.5 knows ListGroups v0-3 and dissects v4/v5 as v3 ('Dissecting assuming v3'). "
          "v4 adds StatesFilter and v5 TypesFilter (compact arrays, here empty: count byte 01) before "
          "the request's tag section, and per group GroupState (v4+) and GroupType (v5+) "
          "(ListGroups*.json). Wireshark reads the filters as a tag section (tag 1 or 0) and, in the "
          "response, the group state string 'Unknown' (length byte 08, then 'U' = 0x55) as tags."),
    Known(("noida_kafka_python",), ("DeleteRecordsRequest", "DeleteRecordsResponse"), (2,),
          ("kafka.timeout", "@malformed"),
          "Wireshark 4.4.5 knows DeleteRecords v0-1 and dissects v2 as v1. v2 is the first flexible "
          "version (DeleteRecords*.json flexibleVersions 2+): compact arrays and strings and tag "
          "sections, so reading it in v1's int32-count layout gives a bad array length and a timeout "
          "made of the wrong bytes (1685073271 against the client's 9998 ms)."),
    Known(("noida_kafka_python",), ("ApiVersionsResponse",), (0,), ("kafka.throttle_time", "@malformed"),
          "noida answers ApiVersions v4 with UNSUPPORTED_VERSION (35) in the v0 layout, which is how "
          "brokers answer a version they do not know and how Kafka's clients parse it "
          "(ApiVersionsResponse.parse falls back to v0); Wireshark reads it in the v3 layout it assumes "
          "for v4, so it takes the v0 array's bytes for a throttle time (256) and a tag section."),
    Known(("kafka091_legacy",), ("FindCoordinatorRequest",), (0,), ("@malformed",),
          "FindCoordinator v0 is one string, the group id (FindCoordinatorRequest.json: Key, v0+; "
          "KeyType from v1). packet-kafka.c reads the v0 group id and then, for versions 0-3, a "
          "coordinator key string as well, which runs past the body's end. Its response then shows "
          "'Request missing' (compared by correlation id only)."),
    Known(("kafka091_legacy",), ("UpdateMetadataRequest",), (1,),
          ("@malformed", "kafka.node_id", "kafka.replica_id", "kafka.topic_name", "kafka.partition_id",
           "kafka.controller_epoch", "kafka.leader_id", "kafka.leader_epoch", "kafka.zk_version"),
          "packet-kafka.c reads an OfflineReplicas array in every partition state, but it exists only "
          "from v4 (UpdateMetadataRequest.json: OfflineReplicas versions 4+). So after the first "
          "partition state (which it reads right, and which agrees with ours) it takes the next bytes "
          "for that array: the live-broker count and broker id 0 (two requests; it then reads the "
          "endpoint's port 9092 as a node id), or the next topic name's length and first bytes "
          "('Invalid array length'). We read each body to its last byte in the v1 layout."),
    Known(("kafka091_legacy",), ("FetchResponse",), (1,),
          ("@malformed", "@batch:kafka.offset", "@batch:kafka.message_size", "@batch:kafka.message_crc",
           "@batch:kafka.message_magic", "@batch:kafka.message_codec", "@batch:kafka.message_timestamp_type"),
          "This build of Wireshark cannot decompress snappy ('Cannot decompress records') and, in a "
          "legacy message set, then goes on reading inside the snappy wrapper's value: the message it "
          "shows after it (offset -9055808383284651776, size 1) is made of compressed bytes. The record "
          "set we keep is 100 plain messages, a gzip and a snappy wrapper (offsets 0-99, 119, 139) that "
          "end exactly at the partition's record bytes.",
          lambda d: d.field == "@malformed" or d.path == ""),
]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The test


@pytest.fixture(scope="module")
def dumps() -> dict[str, dict[str, Any]]:
    paths = [SHARED / "captures" / f"{c}.pcap" for c in CAPTURES]
    out, seconds = wireshark_dumps(paths)
    if seconds:
        print(f"\nwiregasm dump of {len(paths)} captures: {seconds:.1f} s")
    return {p.stem: out[p] for p in paths}


@pytest.mark.parametrize("capture", CAPTURES)
def test_fields_agree_with_wireshark(capture: str, dumps: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    specs = ak.load_specs()
    decode_capture([SHARED / "captures" / f"{capture}.pcap"], tmp_path, specs, broker_ports=BROKER_PORTS)
    tally = compare_capture(capture, dumps[capture], tmp_path, specs)
    assert not tally.unmapped, f"Wireshark fields in neither FIELD_MAP nor NOT_COMPARED: {tally.unmapped}"
    explained: Counter[int] = Counter()
    unexplained = []
    for d in tally.disagreements:
        which = [i for i, k in enumerate(KNOWN) if k.covers(d)]
        if which:
            explained[which[0]] += 1
        else:
            unexplained.append(d)
    print(f"\n{capture}: {tally.ws_pdus} Wireshark PDUs, {tally.matched} matched to our rows "
          f"({tally.header_only} header only, {tally.request_missing} with their request lost, "
          f"{tally.assumed_version} dissected as an older version), "
          f"{tally.both_reject} rejected by both; {tally.compared} fields compared, {tally.agree} agree, "
          f"{len(tally.disagreements) - len(unexplained)} known disagreements "
          f"({dict(sorted(explained.items()))}); not compared: {dict(tally.not_compared)}")  # fmt: skip
    assert not unexplained, "disagreements with Wireshark not in KNOWN:\n" + "\n".join(map(str, unexplained))
    stale = [k.reason[:60] for i, k in enumerate(KNOWN) if capture in k.captures and not explained[i]]
    assert not stale, f"KNOWN entries with no disagreement in {capture}: {stale}"
    # every PDU Wireshark shows is one of our rows (or a body both of us reject)
    assert tally.ws_pdus == tally.matched + tally.both_reject
    assert tally.agree > 0.9 * tally.compared
