"""The README's Spark example runs as written, in the suite's Spark session, and gives what
arrowkafka gives without Spark: the block after ``<!-- spark-example -->`` is executed and its
results checked, so the README cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka import topics
from arrowkafka.spark import spark_arrow_type
from tests.conftest import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore")]


def readme_block(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    found = re.search(rf"<!-- {marker} -->\n```python\n(.*?)\n```\n", text, re.S)
    assert found, f"no python block after <!-- {marker} --> in README.md"
    return found.group(1)


def test_readme_spark_example(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the example writes spark-sample/ where it runs
    ns: dict[str, Any] = {}
    exec(compile(readme_block("spark-example"), "README.md:spark-example", "exec"), ns)
    assert ns["spark"] is spark  # getOrCreate found the suite's session

    # decode_column: the struct equals ak.decode of the same bodies, in the all-versions schema
    bodies = ns["bodies"]
    want = ak.decode(bodies, "MetadataRequest", 12, all_versions=True)
    struct = pa.StructArray.from_arrays(want.columns, fields=list(want.schema))
    got = ns["decoded"].toArrow().column("MetadataRequest").to_pylist()
    assert got == struct.cast(spark_arrow_type(struct.type)).to_pylist()
    assert got[0]["topics"][0]["name"] == "orders" and got[1]["topics"] is None

    # internal topics: the encoder's records come back
    offsets = ns["tables"]["OffsetCommit"].toArrow()
    key = {"_version": 1, "group": "g1", "topic": "orders", "partition": 0}  # the key version: its type
    assert offsets.column("key").to_pylist() == [key]
    assert offsets.column("value").to_pylist()[0]["offset"] == 42
    local = topics.decode_consumer_offsets(ns["keys"], ns["values"])["OffsetCommit"]
    assert offsets.column("value").to_pylist() == local.column("value").to_pylist()
    record = ns["records"]["TopicRecord"].toArrow().column("record").to_pylist()
    assert [(r["name"], r["topic_id"]) for r in record] == [("orders", bytes(range(16)))]

    # the capture: every frame accounted for, as the CLI's sample run does (245 frames)
    summary = ns["summary"]
    assert summary.frames_in == 245 == summary.rows + summary.rejects
    said = summary.render().splitlines()  # the lines the CLI's summary ends with
    cause = "Corrupt: 3 bytes left over after the last field (MetadataRequest v12)"
    assert said[:4] == ["frames in 245 = rows 244 + rejects 1 (all accounted for)",
                        "records 373 in 37 batches (0 batches rejected)",
                        "rejected, by cause (rejects.parquet holds each, with where and its bytes):",
                        f"         1  {cause}"]  # fmt: skip
    assert said[-1].startswith(f"wrote {len(summary.tables)} message tables")
    fetch = ns["spark"].read.parquet(str(tmp_path / "spark-sample" / "FetchResponse.parquet"))
    assert fetch.count() == summary.tables["FetchResponse"] > 0
