"""Where the two sides of ``compat`` come from: a spec folder, or a folder at a git revision.

A git revision is read with ``git ls-tree`` and ``git cat-file --batch`` (every blob in one
process), never checked out; each file goes through the same strict loader as a folder's,
named ``REV:path`` in its errors.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from arrowkafka.api import load_specs
from arrowkafka.errors import ArrowKafkaError, SpecError
from arrowkafka.ir import MessageSpec, load_spec_text
from arrowkafka.ir.load import add_spec, in_hidden_folder

__all__ = ["SourceError", "load_folder_side", "load_git_side"]


class SourceError(ArrowKafkaError, ValueError):
    """A side that cannot be read: a missing folder, one without specs, an unknown revision."""


def load_folder_side(folder: str | Path) -> dict[str, MessageSpec]:
    """Every spec under a folder (``*.json``, recursively), loaded strictly."""
    path = Path(folder)
    if not path.exists():
        raise SourceError(f"{folder}: no such folder")
    if not path.is_dir():
        raise SourceError(f"{folder}: not a folder")
    specs = dict(load_specs(path))
    if not specs:
        raise SourceError(f"{folder}: holds no spec files (*.json)")
    return specs


# where Kafka's repository keeps its specs: <module>/src/main/resources/common/message (clients,
# raft, the coordinators), common/metadata (KRaft records), storage's resources/message
KAFKA_SPEC_FOLDERS = re.compile(r"/src/main/resources/(common/)?(message|metadata)/[^/]+\.json$")


def _git(repo: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", repo, *args], input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise SourceError("git is not installed (needed by --git)") from None


def load_git_side(repo: str | Path, spec: str) -> dict[str, MessageSpec]:
    """The specs under ``FOLDER`` at ``REV``, from ``spec`` written ``REV`` or ``REV:FOLDER``
    (a folder relative to the repository's top). Without it, the specs where Kafka keeps them
    (``KAFKA_SPEC_FOLDERS``) wherever the tree has such folders (Kafka's own repository, or
    one holding its tree, as this one's ``specs/``), else every ``*.json`` of the tree."""
    repo = str(repo)
    rev, _, folder = spec.partition(":")
    folder = folder.strip("/")
    if not Path(repo).is_dir():
        raise SourceError(f"{repo}: {'not a folder' if Path(repo).exists() else 'no such folder'}")
    probe = _git(repo, "rev-parse", "--git-dir")
    if probe.returncode != 0:
        said = probe.stderr.decode(errors="replace").strip().splitlines()
        why = f" (git: {said[0]})" if said and "not a git repository" not in said[0] else ""
        raise SourceError(f"{repo}: not a git repository{why}")
    got = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if not rev or got.returncode != 0:
        raise SourceError(f"{repo}: unknown git revision {rev!r}")
    commit = got.stdout.decode().strip()
    listed = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *([folder] if folder else []))
    if listed.returncode != 0:
        raise SourceError(f"{repo}: git ls-tree {rev}: {listed.stderr.decode().strip()}")
    blobs: list[tuple[str, str]] = []  # (object id, path)
    for entry in listed.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.decode("utf-8", "surrogateescape").partition("\t")
        _mode, kind, oid = meta.split()
        if kind == "blob" and name.endswith(".json"):
            blobs.append((oid, name))
    if not folder:  # the whole tree: not its hidden folders' JSON (.github), and Kafka's folders if any
        blobs = [b for b in blobs if not in_hidden_folder(b[1].split("/"))]
        if kafka := [b for b in blobs if KAFKA_SPEC_FOLDERS.search("/" + b[1])]:
            blobs = kafka  # (not the tree's other JSON: build and test files)
    where = f"{rev}:{folder}" if folder else rev
    if not listed.stdout:
        raise SourceError(f"{repo}: {where}: no such folder at that revision")
    if not blobs:
        raise SourceError(f"{repo}: {where}: holds no spec files (*.json)")
    out = _git(repo, "cat-file", "--batch", stdin="".join(f"{oid}\n" for oid, _ in blobs).encode())
    if out.returncode != 0:
        raise SourceError(f"{repo}: git cat-file: {out.stderr.decode().strip()}")
    data, pos = out.stdout, 0
    specs: dict[str, MessageSpec] = {}
    for _oid, name in blobs:
        end = data.index(b"\n", pos)
        size = int(data[pos:end].split()[2])
        body = data[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1
        file = f"{rev}:{name}"
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise SpecError(file, "", f"cannot read: {e}") from None
        add_spec(specs, load_spec_text(text, file), file)
    return specs
