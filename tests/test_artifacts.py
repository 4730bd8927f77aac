"""``cached_artifact`` — keyed by config and data hash, atomic, safe formats only."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from registry.artifacts import artifact_path, data_hash
from registry.contract import cached_artifact


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


class Counter:
    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


@pytest.mark.parametrize("fmt, value", [
    ("safetensors", {"emb": torch.arange(6.0).reshape(2, 3)}),
    ("json", {"table": [1, 2.5, "x"], "n": 3}),
    ("npy", np.arange(12, dtype=np.int16).reshape(3, 4)),
])
def test_produced_once_then_read_back_identically(fmt: str, value) -> None:
    produce = Counter(value)
    first = cached_artifact(["cfg", 1, np.ones(3)], produce, fmt)
    second = cached_artifact(["cfg", 1, np.ones(3)], produce, fmt)
    assert produce.calls == 1
    if fmt == "safetensors":
        assert torch.equal(first["emb"], value["emb"]) and torch.equal(second["emb"], value["emb"])
    elif fmt == "npy":
        assert np.array_equal(first, value) and np.array_equal(second, value) and second.dtype == np.int16
    else:
        assert first == second == value


def test_key_covers_config_and_data() -> None:
    produce = Counter({"a": 1})
    cached_artifact(["fit", {"k": 3}, np.zeros(4)], produce, "json")
    cached_artifact(["fit", {"k": 4}, np.zeros(4)], produce, "json")            # other config
    cached_artifact(["fit", {"k": 3}, np.array([0, 0, 0, 1.0])], produce, "json")  # other data
    cached_artifact(["fit", {"k": 3}, np.zeros(4, dtype=np.float32)], produce, "json")  # other dtype
    assert produce.calls == 4
    assert data_hash(torch.ones(2)) != data_hash(torch.ones(2, dtype=torch.float64))
    assert data_hash({"a": 1, "b": 2}) == data_hash({"b": 2, "a": 1})


def test_unsafe_values_and_keys_are_refused() -> None:
    with pytest.raises(TypeError, match="numeric numpy array"):
        cached_artifact(["o"], lambda: np.array([object()]), "npy")
    with pytest.raises(TypeError, match=r"\{str: Tensor\} mapping"):
        cached_artifact(["s"], lambda: {"a": [1, 2]}, "safetensors")
    with pytest.raises(ValueError):
        cached_artifact(["j"], lambda: {"a": float("nan")}, "json")
    with pytest.raises(TypeError, match="cannot hash a key part of type object"):
        cached_artifact([object()], lambda: {}, "json")
    with pytest.raises(ValueError, match="fmt must be one of"):
        cached_artifact(["p"], lambda: {}, "pickle")  # type: ignore[arg-type]


def test_failed_write_leaves_no_file_and_a_corrupt_file_is_recomputed() -> None:
    path = artifact_path(["bad"], "npy")
    with pytest.raises(TypeError):
        cached_artifact(["bad"], lambda: "not an array", "npy")
    assert not path.exists() and not [p for p in path.parent.iterdir() if p.suffix == ".tmp"]
    path.write_bytes(b"\x93NUMPY truncated")
    produce = Counter(np.ones(2))
    assert np.array_equal(cached_artifact(["bad"], produce, "npy"), np.ones(2)) and produce.calls == 1
    assert np.array_equal(np.load(path, allow_pickle=False), np.ones(2))


def test_write_is_atomic(monkeypatch: pytest.MonkeyPatch) -> None:
    """The final name appears only through os.replace of a complete temp file in the same folder."""
    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append((Path(src), Path(dst), Path(src).stat().st_size))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    path = artifact_path(["atomic"], "json")
    cached_artifact(["atomic"], lambda: [1, 2, 3], "json")
    # the content first, then its hash record: each from its own temp file of the same folder
    assert [d for _, d, _ in seen] == [path, path.with_name(path.name + ".sha256")], seen
    assert all(src.parent == path.parent and src != dst and size > 0 for src, dst, size in seen)
