"""``zoo run`` prints every output as field names with shapes / dtypes and a short
summary (it printed a truncated tensor repr for deep-forcing, ipfm, pfgmpp, robuq and unidflow), and
each of those specs has a useful rendering with an ``--out`` file (PNG, or JSON for unidflow)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from registry.contract import summarize
from registry.results import ImageOutput
from zoo.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_summarize_prints_fields_with_shapes_never_a_tensor_repr() -> None:
    out = ImageOutput(samples=torch.linspace(-1, 1, 2 * 1 * 8 * 8).reshape(2, 1, 8, 8))
    text = summarize(out)
    assert text.splitlines() == ["ImageOutput:", "  samples  tensor float32 (2, 1, 8, 8)  min -1  mean 0  max 1"], text
    mixed = summarize({"ids": torch.arange(6).reshape(2, 3), "texts": ["a", "b"], "score": 0.5, "ok": [True, False, True],
                       "bad": torch.tensor([1.0, float("nan")]), "cfg": {"steps": 4, "x": torch.zeros(3)}})
    assert "tensor(" not in mixed
    lines = dict(line.split(None, 1) for line in mixed.splitlines()[1:])
    assert lines == {"ids": "tensor int64 (2, 3)  min 0  mean 2.5  max 5", "texts": "list[2] of str: 'a', 'b'", "score": "0.5",
                     "ok": "list[3] of bool  2 true", "bad": "tensor float32 (2,)  min 1  mean 1  max 1  (1 non-finite)",
                     "cfg": "dict[2]: steps=4, x=tensor float32 (3,)"}, lines
    assert summarize(torch.zeros(4, 2)) == "tensor float32 (4, 2)  min 0  mean 0  max 0"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["run", *argv]) == 0
    out = capsys.readouterr().out
    assert "tensor(" not in out and not re.search(r"\w+Output\(", out), out  # no repr of a tensor or of the output object
    return out


def _fields(out: str, name: str) -> dict[str, str]:
    """``field -> summary`` from the ``Name:`` block of ``summarize``."""
    block = out.split(f"{name}:\n", 1)[1]
    rows: dict[str, str] = {}
    for line in block.splitlines():
        if not line.startswith("  ") or line.startswith("   "):
            break
        key, rest = line.split(None, 1)
        if key in rows:  # the method's own report lines follow the block
            break
        rows[key] = rest
    return rows


def test_pfgmpp(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _run(capsys, "pfgmpp", "--n", "64", "--out", str(tmp_path / "p"))
    f = _fields(out, "SampleOutput")
    assert f["samples"].startswith("tensor float64 (64, 2)") and f["nfe"] == "35"
    assert "sliced W2 to 64 exact data samples:" in out and "mean log p(samples):" in out
    assert (tmp_path / "p.png").read_bytes()[:8] == PNG


def test_ipfm_one_step_and_distillation(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _run(capsys, "ipfm", "--sampler", "one-step", "--n", "64", "--out", str(tmp_path / "one.png"))
    assert _fields(out, "SampleOutput")["samples"].startswith("tensor float64 (64, 2)") and (tmp_path / "one.png").is_file()
    out = _run(capsys, "ipfm", "--steps", "2", "--n", "32", "--param", "init_steps=2", "--param", "eval_every=1", "--param", "eval_n=64")
    f = _fields(out, "DistillOutput")
    assert f["samples"].startswith("tensor float64 (32, 2)") and f["history"].startswith("list[")
    assert f["generator_state"].startswith("dict[") and "IPFM distillation" in out and "history (step: SW2" in out


def test_robuq(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _run(capsys, "robuq", "--per-class", "1", "--param", "num_inference_steps=2", "--out", str(tmp_path / "r.png"))
    f = _fields(out, "QuantSampleOutput")
    assert f["samples"].startswith("tensor float32 (10, 1, 8, 8)") and f["labels"].startswith("tensor int64 (10,)")
    assert "digits-classifier accuracy on the conditioning labels:" in out and "Frechet distance" in out
    assert (tmp_path / "r.png").read_bytes()[:8] == PNG


def test_deep_forcing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _run(capsys, "deep-forcing", "--n", "2", "--frames", "24", "--out", str(tmp_path / "d.png"))
    f = _fields(out, "RolloutOutput")
    assert f["samples"].startswith("tensor float32 (2, 24, ") and f["cache_tokens"].startswith("list[")
    assert f["policy"].startswith("dict[") and re.search(r"identity drift at frame .*21: \d", out) and "cached tokens per chunk:" in out
    assert (tmp_path / "d.png").read_bytes()[:8] == PNG


def test_unidflow(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _run(capsys, "unidflow", "--caption", "red s2 tl", "--n", "3", "--out", str(tmp_path / "rows"))
    f = _fields(out, "UniDFlowOutput")
    assert f["sequences"].startswith("tensor int64 (3, 37)") and f["valid"].startswith("list[3] of bool")
    assert out.count("red s2 tl ") >= 3 and "passed:" in out
    data: dict[str, Any] = json.loads((tmp_path / "rows.json").read_text())
    assert data["task"] == "generate" and len(data["rows"]) == 3 and all(len(r["image"]) == 16 for r in data["rows"])


def test_unidflow_refuses_a_bad_caption_as_an_option_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "unidflow", "--caption", "red s9 tl"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("zoo: error: --caption: caption word 's9' is not one of") and "\n" not in err, err
