"""Run-time artefacts (fitted tables, tree ensembles as arrays, embeddings): computed once,
cached on disk keyed by their configuration and a hash of their data, in safe formats only.

    emb = cached_artifact(["sae-tm", "emb", encoder_id, texts, max_length],
                          lambda: {"emb": embed(texts)}, "safetensors")["emb"]

Formats (never pickle): ``safetensors`` (a ``{str: Tensor}`` mapping), ``json`` (plain JSON
values; NaN/inf refused) and ``npy`` (a numeric numpy array, read with ``allow_pickle=False``).

A cache entry is untrusted on read. Each is two files: the content, then (written after it) a
``<name>.sha256`` record of the content's sha256 and size. Both are written to a unique temp file
in the same folder and renamed into place, so a crash or a concurrent writer never leaves a
half-written file under a final name. A read takes the content's bytes once, checks them against
the record and only then parses those same bytes, so a file rewritten on disk (a crafted XGBoost
model, other tensors) never reaches a parser or a native library: a mismatch is a
:class:`CacheWarning` and the value is recomputed; a missing or unreadable record or file is
recomputed silently. Location: ``registry.contract.cache_dir("artifacts", namespace)``.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

Format = Literal["safetensors", "json", "npy"]
_SUFFIX = {"safetensors": ".safetensors", "json": ".json", "npy": ".npy"}


def data_hash(value: Any) -> str:
    """A stable sha256 of a key part: plain values and containers by canonical JSON; numpy
    arrays and torch tensors by dtype, shape and bytes; ``bytes`` as is; pydantic models by
    their JSON. Anything else is refused (an object's ``repr`` is not a stable key)."""
    h = hashlib.sha256()
    _feed(h, value)
    return h.hexdigest()


def _feed(h: Any, value: Any) -> None:
    if value is None or isinstance(value, (bool, int, float, str)):
        h.update(b"j" + json.dumps(value).encode())
    elif isinstance(value, bytes):
        h.update(b"b%d:" % len(value) + value)
    elif isinstance(value, Path):
        h.update(b"p" + str(value).encode())
    elif isinstance(value, Mapping):
        h.update(b"{%d" % len(value))
        for k in sorted(value, key=str):
            _feed(h, str(k))
            _feed(h, value[k])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[%d" % len(value))
        for v in value:
            _feed(h, v)
        h.update(b"]")
    elif hasattr(value, "model_dump_json"):
        h.update(b"m" + value.model_dump_json().encode())
    elif type(value).__module__ == "numpy" or type(value).__module__.startswith("numpy."):
        import numpy as np

        arr = np.ascontiguousarray(value)
        if arr.dtype.kind == "O":
            raise TypeError("cached_artifact: object arrays cannot be hashed as key parts")
        h.update(f"n{arr.dtype.str}{arr.shape}".encode() + arr.tobytes())
    elif type(value).__module__.startswith("torch"):
        t = value.detach().cpu().contiguous()
        h.update(f"t{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(-1).view(__import__("torch").uint8).numpy().tobytes() if t.numel() else b"")
    else:
        raise TypeError(f"cached_artifact: cannot hash a key part of type {type(value).__name__}")


def artifact_path(key_parts: Sequence[Any], fmt: Format, namespace: str = "artifacts") -> Path:
    """Where the artefact of ``key_parts`` lives (the folder is created)."""
    from .files import cache_dir

    if fmt not in _SUFFIX:
        raise ValueError(f"cached_artifact: fmt must be one of {', '.join(_SUFFIX)}, got {fmt!r}")
    folder = cache_dir("artifacts", namespace) if namespace != "artifacts" else cache_dir("artifacts")
    return folder / f"{data_hash([fmt, *key_parts])[:32]}{_SUFFIX[fmt]}"


def _write(value: Any, fmt: Format, tmp: str) -> None:
    if fmt == "safetensors":
        import torch
        from safetensors.torch import save_file

        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items()):
            raise TypeError("cached_artifact: a safetensors artefact is a {str: Tensor} mapping")
        save_file({k: v.detach().cpu().contiguous() for k, v in value.items()}, tmp)
    elif fmt == "json":
        with open(tmp, "w") as f:
            json.dump(value, f, allow_nan=False)
    else:
        import numpy as np

        if not isinstance(value, np.ndarray) or value.dtype.kind == "O":
            raise TypeError("cached_artifact: an npy artefact is a numeric numpy array (no object dtype)")
        with open(tmp, "wb") as f:
            np.save(f, value, allow_pickle=False)


class CacheWarning(UserWarning):
    """A cache entry did not match its content hash and was recomputed."""


#: Largest content-hash record read (a few dozen bytes are written).
_RECORD_BYTES = 4096


def hash_record_path(path: Path) -> Path:
    """The content-hash record written after the entry ``path``."""
    return path.with_name(path.name + ".sha256")


def _parse(data: bytes, fmt: Format) -> Any:
    if fmt == "safetensors":
        from safetensors.torch import load

        return load(data)
    if fmt == "json":
        return json.loads(data)
    import numpy as np

    return np.load(io.BytesIO(data), allow_pickle=False)


def _read_regular(path: Path, limit: int = 1 << 40) -> bytes | None:
    """The bytes of a regular file (never a FIFO or device; :func:`registry.files.read_spec_bytes`), at most
    ``limit``; None if absent, not one, or larger."""
    from .errors import SpecError
    from .files import read_spec_bytes

    try:
        return read_spec_bytes(path, limit=limit)
    except SpecError:
        return None


def read_verified(path: Path) -> bytes | None:
    """The content of the cache entry ``path`` if it matches its hash record, else None (a mismatch warns)."""
    raw = _read_regular(hash_record_path(path), _RECORD_BYTES)
    if raw is None:
        return None
    try:
        record = json.loads(raw)
        want, size = str(record["sha256"]), int(record["bytes"])
    except (ValueError, TypeError, KeyError):
        return None
    data = _read_regular(path)
    if data is None:
        return None
    if len(data) != size or hashlib.sha256(data).hexdigest() != want:
        warnings.warn(f"cache entry {path} does not match its content hash (changed on disk); recomputing it",
                      CacheWarning, stacklevel=3)
        return None
    return data


def _replace_from_temp(folder: Path, prefix: str, final: Path, write: Callable[[str], None]) -> None:
    """``write(tmp)`` into a fresh temp file (O_EXCL, never an existing name) of ``folder``, then rename it to ``final``."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_entry(path: Path, value: Any, fmt: Format) -> bytes:
    """Store ``value`` as the cache entry ``path``: the content, then its hash record; returns the content."""
    _replace_from_temp(path.parent, path.stem, path, lambda tmp: _write(value, fmt, tmp))
    data = _read_regular(path) or b""
    record = json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "format": fmt})

    def write_record(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(record)

    _replace_from_temp(path.parent, path.stem, hash_record_path(path), write_record)
    return data


def cached_artifact(key_parts: Sequence[Any], produce: Callable[[], Any], fmt: Format, *,
                    namespace: str = "artifacts", use_cache: bool = True) -> Any:
    """``produce()``'s value, computed once per ``key_parts`` (configuration, data hashes) and
    stored as ``fmt``. The first call returns what is parsed back from the bytes it wrote, so every
    call returns the same types (JSON tuples become lists, tensors come back on the CPU)."""
    path = artifact_path(key_parts, fmt, namespace)
    if use_cache:
        data = read_verified(path)
        if data is not None:
            try:
                return _parse(data, fmt)
            except Exception:  # noqa: BLE001 - a verified but unreadable entry (an older writer's bug) is recomputed
                pass
    value = produce()
    if not use_cache:
        return value
    try:
        data = write_entry(path, value, fmt)
    except OSError as exc:  # a read-only or full cache must not fail the computation
        warnings.warn(f"could not store cache entry {path}: {exc.strerror or exc}", CacheWarning, stacklevel=2)
        return value
    return _parse(data, fmt)
