"""Training helpers: EMA rule, optimiser step, checkpoint sha256, reproduction check; layering rule."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from zoo.common.training import EMA, adamw_one_cycle, optimizer_step, save_checkpoint, setup_deterministic, sha256_file

ROOT = Path(__file__).resolve().parents[2]


def test_ema_follows_the_warmup_rule():
    """EMA decay is min(max, (1 + s)/(10 + s)); shadow = d * shadow + (1 - d) * param; int buffers copied."""
    m = torch.nn.Linear(2, 1)
    m.register_buffer("count", torch.tensor(0))
    ema = EMA(m, 0.999)
    w0 = m.weight.detach().clone()
    with torch.no_grad():
        m.weight.add_(1.0)
        m.count.fill_(7)
    ema.update(m, 0)
    d = 1 / 10
    assert torch.allclose(ema.state_dict()["weight"], d * w0 + (1 - d) * (w0 + 1))
    assert int(ema.state_dict()["count"]) == 7
    assert ema.decay(10**6) == 0.999


def test_optimizer_step_clips_and_schedules():
    """optimizer_step returns the pre-clip norm, applies the clipped gradient and advances the schedule."""
    setup_deterministic(0)
    m = torch.nn.Linear(3, 1, bias=False)
    opt, sched = adamw_one_cycle(m.parameters(), 0.1, 20, pct_start=0.25)
    lr0 = opt.param_groups[0]["lr"]
    loss = (m(torch.full((1, 3), 100.0)) ** 2).sum()
    norm = optimizer_step(m, opt, sched, loss, clip=1.0)
    assert norm > 1.0 and float(m.weight.grad.norm()) == pytest.approx(1.0, rel=1e-5)
    assert opt.param_groups[0]["lr"] != lr0


def test_save_checkpoint_prints_and_returns_the_files_sha256(tmp_path, capsys):
    """save_checkpoint prints and returns the file's sha256 (what a spec's weights: entry pins)."""
    digest = save_checkpoint({"a": torch.arange(3.0)}, tmp_path / "a.safetensors")
    assert digest in capsys.readouterr().out and digest == sha256_file(tmp_path / "a.safetensors")


def test_common_never_imports_methods():
    """No module in zoo/common imports zoo.methods (the layering rule: no arrow back up)."""
    bad = []
    for f in sorted((ROOT / "zoo" / "common").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(m.startswith("zoo.methods") or m.startswith("methods") for m in mods) or (isinstance(node, ast.ImportFrom) and node.level >= 2):
                bad.append(f.name)
    assert not bad, f"zoo/common modules importing from zoo.methods: {bad}"
