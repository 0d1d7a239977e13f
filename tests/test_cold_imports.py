"""A process's first decodes import no pandas: pyarrow's conversions of Python values (and a
few of its other calls: ``Schema.empty_table``, ``fill_null``, ``combine_chunks``,
``to_numpy``) import it whenever it is installed, as it is with the ``spark`` extra, and that
import alone took 0.2 s of a 0.4 s first decode. Messages (plain-Python tier and compiled,
with a reject), an encode, and record batches (every codec, magic 0 to 2, a reject) are
covered; control batches (transaction markers, KRaft records) still import it, once."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from arrowkafka.assembly.arrays import empty_table
from tests.conftest import ROOT, SHARED

SCRIPT = f"""
import sys
sys.path.insert(0, {str(ROOT / "tests" / "records")!r})
import arrowkafka as ak
from batchtools import Rec, build
small = open({str(SHARED / "vectors" / "fetch_request_v12.bin")!r}, "rb").read()
big = open({str(SHARED / "vectors" / "metadata_response_v12_1t1000p.bin")!r}, "rb").read()
rows, rejects = ak.decode([small, small[:-3]], "FetchRequest", 12, errors="null")
assert rejects.num_rows == 1
batch = ak.decode([big, big], "MetadataResponse", 12)
assert "numba" in sys.modules  # the compiled kernel too
assert ak.encode(batch, "MetadataResponse", 12).to_pylist() == [big, big]
recs = [Rec(b"k", b"v", [("h", b"x")], 1_700_000_000_000)]
good = b"".join(build(2, c, recs) for c in range(5)) + build(1, 0, recs) + build(0, 1, recs)
bad = bytearray(good)
bad[100] ^= 1
got = ak.decode_records([good, bytes(bad)], errors="null")
assert got.rejects.num_rows == 1 and got.records.num_rows == 13
print(sorted(m for m in ("pandas", "pyspark") if m in sys.modules))
"""


def test_first_decodes_import_no_pandas() -> None:
    pytest.importorskip("pandas")  # (installed with the test extra: without it, nothing to show)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


def test_empty_table_is_the_schemas_own() -> None:
    schema = pa.schema(
        [pa.field("a", pa.int64(), nullable=False), ("b", pa.binary()), ("c", pa.list_(pa.string()))]
    )
    made = empty_table(schema)
    made.validate(full=True)
    assert made.schema == schema and made.equals(schema.empty_table())
