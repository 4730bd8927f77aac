"""Readable tables (rich, fitted to the terminal; plain in a pipe), `zoo show` shows the metric
setting, `zoo metrics --plot` puts the paper's bar beside ours and the last measurement, torch dtypes are
accepted, listing filters are validated with did-you-mean, and `--device cuda` on a CPU machine says what
is missing."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zoo
from registry.errors import HardwareError
from zoo.cli import main

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _on_a_terminal(args: list[str], columns: int) -> str:
    """``zoo ARGS`` with stdout on a pseudo-terminal ``columns`` wide (as a user's shell runs it)."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "zoo.cli", *args], stdout=slave, stderr=subprocess.PIPE, cwd=REPO, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 200])
def test_zoo_list_fits_the_terminal_and_loses_nothing(columns: int) -> None:
    out = _on_a_terminal(["list"], columns)
    assert "\x1b[1m" in out  # a bold header: rich on a terminal
    lines = ANSI.sub("", out).splitlines()
    assert lines and max(len(ln) for ln in lines) <= columns, max(lines, key=len)
    text = " ".join(lines).split()
    # what the same command lists (this process's catalog may hold specs other tests added)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    listed = json.loads(subprocess.run([sys.executable, "-m", "zoo.cli", "list", "--json"], capture_output=True, text=True,
                                       cwd=REPO, env=env, timeout=120, check=True).stdout)
    assert listed
    for h in listed:
        assert any(ln.startswith(h["name"] + " ") for ln in lines), h["name"]  # every name starts a row
        assert all(w in text for w in h["title"].split()), h["name"]  # no title word is cut


def test_zoo_list_in_a_pipe_is_one_plain_line_per_spec(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a terminal: no colour, nothing wrapped, and no column padded to the widest cell of 200 characters
    (ramac's seven variants are summarised: zoo show lists them)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "\x1b" not in "\n".join(lines)
    assert len(lines) == 1 + len(zoo.list()) and lines[0].split() == ["name", "task", "variants", "title"]
    title_at = lines[0].index("title")
    assert title_at < 110, title_at  # name + task + variants columns
    (ramac,) = [ln for ln in lines if ln.startswith("ramac ")]
    assert "toy, +6 declared-only" in ramac


def test_rich_is_imported_only_for_a_terminal() -> None:
    code = "import sys; from zoo.cli import main; main(['list']); print('rich' in sys.modules, 'torch' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert res.stdout.splitlines()[-1] == "False False", res.stdout[-300:]


def test_spec_text_cannot_inject_markup_or_escapes() -> None:
    from zoo.tables import fitted

    lines = fitted([["[red]x[/red]", "a\x1b[31mb"]], 60, color=True, styles=["ok"])
    plain = ANSI.sub("", "\n".join(lines))
    assert "[red]x[/red]" in plain and "\\x1b[31mb" in plain  # markup shown as text, the escape escaped
    assert "\x1b[31m" not in "\n".join(lines)


@pytest.mark.parametrize("args,needle", [
    (["list", "--fits", "gpu"], "--fits: 'gpu' matches no spec; did you mean cuda?"),
    (["list", "--task", "text-generaton"], "--task: 'text-generaton' matches no spec; did you mean text-generation"),
    (["list", "--tag", "difusion"], "--tag: 'difusion' matches no spec; did you mean diffusion"),
])
def test_mistyped_filters_are_one_line_with_did_you_mean(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    cap = capsys.readouterr()
    err = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert cap.out == "" and len(err) == 1 and err[0].startswith(needle), err


def test_valid_filters_still_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--fits", "cuda", "--task", "text-generation", "--tag", "diffusion-lm"]) == 0
    assert "poe-bridge" in capsys.readouterr().out
    assert "poe-bridge" in zoo.list(task="text-generation", tags=["diffusion-lm"], fits="cpu")
    with pytest.raises(zoo.ZooError, match="did you mean"):
        zoo.list(task="text-generaton")


def test_show_lists_the_metric_setting(capsys: pytest.CaptureFixture[str]) -> None:
    """Five `fid cifar10-cond-edm` rows used to look identical: the setting (nfe) tells them apart."""
    assert main(["show", "f-dpmsolver", "--no-detect"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if "cifar10-cond-edm" in ln and " fid " in f" {ln} "]
    settings = [r[r.index("fid") + 1] for r in rows]
    assert len(rows) >= 5 and len(set(settings)) == len(settings) and all(s.startswith("nfe=") for s in settings), rows


def test_metrics_plot_pairs_the_paper_bar_with_ours_and_the_measurement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The paper's number (on its dataset) stands beside ours and the last measurement (on the toy) in one
    cluster of the same metric and setting; it used to sit alone at its own x position."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    spec = tmp_path / "demo-cross.yaml"
    spec.write_text((REPO / "tests" / "fixtures" / "metrics" / "demo-paired.yaml").read_text()
                    .replace("name: demo-paired", "name: demo-cross").replace("zoo check demo-paired", "zoo check demo-cross")
                    + "  - {name: ratio, dataset: paper-benchmark, setting: {nfe: 10}, variant: full, kind: reported, value: 2.0}\n"
                    "  - {name: ratio, dataset: toy-stand-in, setting: {nfe: 10}, variant: toy, kind: reproduced, value: 1.5,\n"
                    "     tolerance: 0.1, command: \"zoo check demo-cross\"}\n")
    monkeypatch.setenv("ZOO_METRICS_DIR", str(tmp_path / "store"))
    from registry import metrics_store

    metric = next(m for m in zoo.spec(str(spec)).metrics if m.name == "ratio" and m.kind == "reproduced")
    metrics_store.record(zoo.spec(str(spec)), metric, 1.55, spec_file=spec)
    figures: list[Figure] = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (figures.append(self), real(self, *a, **k))[1])
    assert main(["metrics", str(spec), "--plot", str(tmp_path / "m.png")]) == 0
    (fig,) = figures
    (ax,) = [a for a in fig.axes if a.get_title() == "ratio"]
    bars = [(p.get_x() + p.get_width() / 2, p.get_height(), p.get_facecolor()) for p in ax.patches]
    from matplotlib.colors import to_rgba

    from zoo.metrics_report import COLOURS

    by_kind = {kind: [(x, h) for x, h, c in bars if c == to_rgba(colour)] for kind, colour in COLOURS.items()}
    (paper,), (ours,), (measured,) = by_kind["paper"], by_kind["ours"], by_kind["measured"]
    assert (paper[1], ours[1], measured[1]) == (2.0, 1.5, 1.55)
    assert abs(paper[0] - measured[0]) <= 2.0 and abs(paper[0] - ours[0]) <= 1.0  # side by side, one cluster
    assert [t.get_text() for t in ax.get_xticklabels()] == ["paper-benchmark", "toy-stand-in", "toy-stand-in"]
    assert any("≠ data" in t.get_text() for t in ax.texts)  # says the datasets differ


def test_torch_dtypes_are_accepted() -> None:
    import torch

    pipe = zoo.load("f-dpmsolver", variant="toy", dtype=torch.float64)
    assert pipe.dtype == "float64"
    with pytest.raises(zoo.ZooError, match="expected one of float32, float16, bfloat16, float64"):
        zoo.load("f-dpmsolver", variant="toy", dtype=torch.int8)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a CUDA device")
def test_device_cuda_on_a_cpu_machine_says_what_is_missing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from registry.hardware import detect, device_problem

    assert main(["run", "ddim", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert "needs cuda" not in err and "cuda requested, but" in err, err
    assert ("CPU-only build" in err) == (torch.version.cuda is None)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert "torch " + torch.__version__ + " is a CPU-only build" in (device_problem("cuda", detect()) or "")
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    assert "built with CUDA 12.4, but torch.cuda.is_available() is False" in (device_problem("cuda:0", detect()) or "")
    with pytest.raises(HardwareError, match="unknown device 'tpu'"):
        zoo.load("ddim", device="tpu")
