"""A loaded set of specs, and the module-level API over the vendored default set.

``load_specs()`` reads the specs vendored in ``specs/`` (shipped as ``arrowkafka.specs``);
``load_specs(dir, dir2, ...)`` reads a user's folders, a later folder overriding an earlier one
by message name. The ``SpecSet`` it returns has the same methods as the module-level
functions, which use the default set.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import os
import pickle
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arrowkafka import ir
from arrowkafka.ir import MessageSpec, load_folders, request_header_version, response_header_version
from arrowkafka.ir.load import spec_files

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SpecSet", "load_specs", "default_specs", "vendored_specs_dir"]


def vendored_specs_dir() -> Path:
    """The folder of Kafka specs shipped with arrowkafka."""
    # by name: the package is mapped from specs/ at install time, and the API layer must not
    # import the package root (which exposes stages above it)
    vendored = importlib.import_module("arrowkafka.specs")
    return Path(str(vendored.__file__)).parent


class SpecSet(Mapping[str, MessageSpec]):
    """Message specs by name (a read-only mapping), with the schema API bound to them."""

    def __init__(self, messages: dict[str, MessageSpec], folders: tuple[str, ...] = ()) -> None:
        self._messages = dict(sorted(messages.items()))
        self.folders = folders
        digest = hashlib.sha256()
        for name, spec in self._messages.items():
            digest.update(f"{name}\0{spec.sha256}\n".encode())
        #: Identifies exactly which spec texts this set holds; part of every cache key.
        self.revision = digest.hexdigest()[:16]
        self._by_key: dict[tuple[str, int], MessageSpec] = {}
        for spec in self.values():
            if spec.type in ("request", "response") and spec.api_key is not None:
                self._by_key[(spec.type, spec.api_key)] = spec
        self._schemas: dict[tuple[str, int | None], pa.Schema] = {}

    def __repr__(self) -> str:
        where = ", ".join(self.folders) or "vendored"
        return f"<SpecSet {len(self)} messages from {where}, revision {self.revision}>"

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[str]:
        return iter(self._messages)

    def __contains__(self, name: object) -> bool:
        return name in self._messages

    def __getitem__(self, name: str) -> MessageSpec:
        try:
            return self._messages[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._messages, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"no message spec named {name!r}{hint}") from None

    def pairs(self) -> Iterator[tuple[str, int]]:
        """Every (message name, version) pair the set defines."""
        for spec in self.values():
            for version in spec.valid_versions:
                yield spec.name, version

    def request(self, api_key: int) -> MessageSpec:
        """The request spec of an API key."""
        return self._api(("request", api_key))

    def response(self, api_key: int) -> MessageSpec:
        """The response spec of an API key."""
        return self._api(("response", api_key))

    def _api(self, key: tuple[str, int]) -> MessageSpec:
        try:
            return self._by_key[key]
        except KeyError:
            raise KeyError(f"no {key[0]} spec for api key {key[1]}") from None

    def arrow_schema(self, name: str, version: int | None = None) -> pa.Schema:
        """The ``pa.Schema`` of one version of a message, or of all its versions.

        Parameters
        ----------
        name : str
            Message name as in its spec, e.g. ``"FetchRequest"``.
        version : int, optional
            A valid version. Without it, the all-versions schema: its ``_version`` column
            carries each row's version and every field of any version is a column.

        Examples
        --------
        >>> import arrowkafka as ak
        >>> ak.arrow_schema("ApiVersionsRequest", 3).names
        ['client_software_name', 'client_software_version', '_unknown_tags']
        """
        key = (name, version)
        schema = self._schemas.get(key)
        if schema is None:
            from arrowkafka.schema import message_schema  # (deferred, as the codec below)

            schema = self._schemas[key] = message_schema(self[name], version)
        return schema

    def decode(
        self,
        bodies: Any,
        name: str,
        version: int,
        *,
        errors: str = "raise",
        all_versions: bool = False,
        threads: int = 1,
        kernel: str = "auto",
        views: bool = False,
    ) -> pa.RecordBatch | tuple[pa.RecordBatch, pa.Table]:
        """Decode a batch of message bodies into one record batch, one row per body.

        Parameters
        ----------
        bodies : pa.BinaryArray, pa.LargeBinaryArray, pa.ChunkedArray of them, list of bytes, or ``Ranges``
            One message body each: no size prefix, no header. ``arrowkafka.codec.decode.Ranges``
            names bodies where they lie in one buffer (no copy).
        name, version : str, int
            The message and the version all the bodies are in.
        errors : {"raise", "null"}
            ``"raise"``: the first bad body raises ``Truncated`` or ``Corrupt`` (both
            ``DecodeError``), naming the message index, byte offset and field path.
            ``"null"``: bad bodies become null rows (every column nullable) and the call
            returns ``(batch, rejects)``; ``rejects`` has the index, error class, reason,
            field path, byte offset and the raw body of each.
        all_versions : bool
            Rows in the all-versions schema of ``arrow_schema(name)``: fields this version
            lacks hold their spec default, ``_version`` holds ``version``; batches of several
            versions then concatenate into one table.
        threads : int
            Decode contiguous ranges of the batch on this many threads.
        kernel : {"auto", "interpreter", "specialised"}
            ``"interpreter"``: one compiled kernel for every message, ready at once.
            ``"specialised"``: a kernel generated for this (message, version), compiled on
            first use (seconds; then cached on disk) and faster.
            ``"auto"`` (default): the interpreter; once the plan has decoded 64 MB in this
            process, its kernel is compiled in a child process (once per machine) and used
            as soon as it is ready (a kernel an earlier process built: after 32 MB).
        views : bool
            ``True``: ``bytes`` and ``records`` fields come as ``binary_view`` arrays pointing
            into the input instead of copies (the batch keeps the input's buffer alive, and
            reads it: a caller that overwrites the buffer behind ``Ranges`` changes the batch);
            a default that is not in the input points into the plan's constants. Strings are
            still copied (they are checked as UTF-8 anyway). Parquet, DuckDB, Polars and
            ``encode`` take views; pyarrow 26's ``take`` and ``filter`` do not, and
            ``.cast(pa.binary())`` copies where something does not. An input of 2 GiB or more
            is copied as usual (a view addresses its buffer with 31 bits).

        Examples
        --------
        >>> import arrowkafka as ak
        >>> ak.decode([bytes.fromhex("0000")], "ApiVersionsRequest", 0).num_rows
        Traceback (most recent call last):
        ...
        arrowkafka.errors.Corrupt: 2 bytes left over after the last field at $ (message 0, byte 0/2, \
ApiVersionsRequest v0)
        """
        # Deferred: ``import arrowkafka`` (and the spec stage alone) stays free of pyarrow and
        # Numba until something is decoded or encoded. The codec never imports this module.
        from arrowkafka.codec.decode import decode_batch

        return decode_batch(
            self[name],
            bodies,
            version,
            errors=errors,
            all_versions=all_versions,
            threads=threads,
            kernel=kernel,
            views=views,
        )

    def encode(
        self, data: Any, name: str, version: int, *, threads: int = 1, kernel: str = "auto"
    ) -> pa.BinaryArray:
        """Encode rows into message bodies (no size prefix, no header), one per row.

        Parameters
        ----------
        data : pa.RecordBatch, pa.Table or pa.StructArray
            In the schema of ``arrow_schema(name, version)``, of ``arrow_schema(name)`` (all
            versions), or of another version: columns ``version`` lacks must hold their spec
            default unless the field is ignorable (then they are dropped), columns it has that
            ``data`` lacks are written as their default.
        name, version : str, int
            The message and the version to write.
        threads : int
            Encode contiguous ranges of rows on this many threads.
        kernel : str
            "auto" (default): the interpreter; once the plan has encoded 64 MB in this
            process, a kernel generated for it is compiled in a child process (once per
            machine) and used as soon as it is ready. "interpreter"; or "specialised"
            (compiled on first use, seconds, then cached on disk).

        Tagged fields equal to their default are left out, as Kafka does; unknown tags kept by
        the decoder are written back among the known ones in ascending order, so
        ``encode(decode(b))`` gives ``b`` back byte for byte. A value the version cannot carry
        raises ``EncodeError`` naming the row and field path.

        Examples
        --------
        >>> import arrowkafka as ak
        >>> batch = ak.decode([bytes.fromhex("0000")], "ApiVersionsResponse", 0, errors="null")[0]
        >>> ak.encode(ak.decode([bytes.fromhex("000000000000")], "ApiVersionsResponse", 0),
        ...           "ApiVersionsResponse", 0).to_pylist()
        [b'\\x00\\x00\\x00\\x00\\x00\\x00']
        """
        from arrowkafka.codec.encode import encode_batch

        return encode_batch(self[name], data, version, threads=threads, kernel=kernel)

    def encoded_size(
        self, data: Any, name: str, version: int, *, threads: int = 1, kernel: str = "auto"
    ) -> pa.Int64Array:
        """The size in bytes of each row's body under ``encode(data, name, version)``,
        computed without writing (Kafka's ``Message#size``); same checks as ``encode``."""
        from arrowkafka.codec.encode import encode_batch

        return encode_batch(self[name], data, version, threads=threads, sizes_only=True, kernel=kernel)

    def request_header_version(self, api_key: int, api_version: int) -> int:
        """Request header version (0, 1 or 2) that frames ``api_key`` at ``api_version``."""
        spec = self.request(api_key)
        return request_header_version(api_key, api_version, spec.is_flexible(api_version))

    def response_header_version(self, api_key: int, api_version: int) -> int:
        """Response header version (0 or 1) that frames ``api_key`` at ``api_version``."""
        spec = self.response(api_key)
        return response_header_version(api_key, api_version, spec.is_flexible(api_version))


_DEFAULT: SpecSet | None = None


def load_specs(*folders: str | Path) -> SpecSet:
    """Load spec folders (later ones override earlier ones by message name).

    With no folder, load the specs vendored with arrowkafka.
    """
    if not folders:
        return default_specs()
    return SpecSet(load_folders(folders), tuple(str(f) for f in folders))


def default_specs() -> SpecSet:
    """The vendored spec set, loaded once per process (read back from the cache where it was
    parsed before: ``cached_folder``)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = SpecSet(cached_folder(vendored_specs_dir()))
    return _DEFAULT


def cached_folder(folder: Path) -> dict[str, MessageSpec]:
    """``load_folders([folder])``, kept as a pickle under ``cache_root()/specs`` named by a hash
    of every spec file's path and text, the spec IR's source and Python's version, so that a
    change to any of them parses afresh. Parsing the 258 vendored specs took 0.13-0.35 s of a
    fresh process's first call (every ``arrowkafka`` command, a Spark worker's first task);
    reading them back takes 0.03 s. A cache that cannot be read or written is parsed past."""
    from arrowkafka.codegen.modules import cache_root  # (not needed by an import of the API)

    key = hashlib.sha256(f"{sys.version_info[:2]}\0{folder}\0".encode())
    for path in [*sorted(Path(str(ir.__file__)).parent.glob("*.py")), *spec_files(folder)]:
        key.update(f"{path}\0".encode() + path.read_bytes())
    try:
        cached: Path | None = cache_root() / "specs" / f"{key.hexdigest()[:32]}.pickle"
    except RuntimeError:  # no home folder to name (a container run as an unknown user)
        cached = None
    if cached is not None:
        try:
            with open(cached, "rb") as f:
                specs = pickle.load(f)
            if isinstance(specs, dict) and all(isinstance(v, MessageSpec) for v in specs.values()):
                return specs
        except Exception:  # (none yet, or not whole: unpickling raises many kinds)
            pass
    specs = load_folders([folder])
    if cached is not None:
        with contextlib.suppress(OSError):  # (a read-only home: parsed each time)
            cached.parent.mkdir(parents=True, exist_ok=True)
            fd, part = tempfile.mkstemp(dir=cached.parent, suffix=".part")  # (processes, threads may race)
            try:
                with os.fdopen(fd, "wb") as f:
                    pickle.dump(specs, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(part, cached)  # (whole or not there)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(part)  # (left only where the replace failed)
    return specs
