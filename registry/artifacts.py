"""Run-time artefacts (fitted tables, tree ensembles as arrays, embeddings): computed once,
cached on disk keyed by their configuration and a hash of their data, in safe formats only.

    emb = cached_artifact(["sae-tm", "emb", encoder_id, texts, max_length],
                          lambda: {"emb": embed(texts)}, "safetensors")["emb"]

Formats (never pickle): ``safetensors`` (a ``{str: Tensor}`` mapping), ``json`` (plain JSON
values; NaN/inf refused) and ``npy`` (a numeric numpy array, read with ``allow_pickle=False``).
Files are written atomically (temp file in the same folder, then ``os.replace``), so a crash or
a concurrent writer never leaves a half-written artefact under the final name; an unreadable
file is recomputed. Location: ``registry.contract.cache_dir("artifacts", namespace)``.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
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
    from .contract import cache_dir

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


def _read(path: Path, fmt: Format) -> Any:
    if fmt == "safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    if fmt == "json":
        return json.loads(path.read_text())
    import numpy as np

    return np.load(path, allow_pickle=False)


def cached_artifact(key_parts: Sequence[Any], produce: Callable[[], Any], fmt: Format, *,
                    namespace: str = "artifacts", use_cache: bool = True) -> Any:
    """``produce()``'s value, computed once per ``key_parts`` (configuration, data hashes) and
    stored as ``fmt``. The first call returns what is read back from the file it wrote, so every
    call returns the same types (JSON tuples become lists, tensors come back on the CPU)."""
    path = artifact_path(key_parts, fmt, namespace)
    if use_cache and path.is_file():
        try:
            return _read(path, fmt)
        except Exception:  # noqa: BLE001 - a truncated/corrupt artefact is recomputed
            pass
    value = produce()
    if not use_cache:
        return value
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    os.close(fd)
    try:
        _write(value, fmt, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return _read(path, fmt)
