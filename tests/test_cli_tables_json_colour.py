"""Aligned tables, ``--json`` on list/show/doctor/check, colour only on a
terminal (spec text still escaped), and ``zoo show`` / ``zoo doctor`` without importing torch
(hardware from a torch-free probe: CUDA_VISIBLE_DEVICES, nvidia-smi)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zoo.cli
from registry import hardware
from zoo.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "specs"
SPEC = str(FIXTURES / "demo-gaussian.yaml")


@pytest.mark.parametrize("args", [["show", "f-dpmsolver"], ["doctor"], ["show", "f-dpmsolver", "--json"], ["doctor", "--json"]])
def test_show_and_doctor_never_import_torch(args: list[str]) -> None:
    """The 7-10 s of `zoo show`/`zoo doctor` was torch's import for hardware detection."""
    code = ("import sys\nfrom zoo.cli import main\nrc = main(sys.argv[1:])\n"
            "print('HEAVY', [m for m in ('torch', 'transformers', 'diffusers') if m in sys.modules])\nsys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.rstrip().splitlines()[-1] == "HEAVY []"


def test_json_outputs_parse(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", SPEC, "--json"]) == 0
    show = json.loads(capsys.readouterr().out)
    assert show["spec"]["name"] == "demo-gaussian" and show["fit"]["toy"] == "fits"
    assert show["fit"]["full"].startswith("does not fit: needs cuda")
    main(["--specs", str(FIXTURES), "doctor", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert {"name": "demo-gaussian", "runs_here": ["toy"]}.items() <= next(s for s in doc["specs"] if s["name"] == "demo-gaussian").items()
    assert doc["packages"]["pydantic"] and doc["offline"] is True
    assert main(["check", SPEC, "--json", "--no-record", "--only", "loading-path"]) == 0
    out, err = capsys.readouterr()
    checks = json.loads(out)
    assert checks["ok"] is True and checks["checks"] and all(c["status"] == "PASS" for c in checks["checks"])
    assert "loading-path" in checks["checks"][0]["id"] and "PASS" in err  # the report went to stderr


def test_show_columns_are_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", SPEC]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("  variants")))
    rows = lines[start + 1:start + 3]
    assert [r.index("[") for r in rows][0] == [r.index("[") for r in rows][1], rows
    assert "\x1b[" not in "\n".join(lines)  # not a terminal: no colour


def test_colour_only_on_a_terminal_and_spec_text_still_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "demo-esc.yaml"
    spec.write_text(Path(SPEC).read_text().replace('title: "Demo: a seeded Gaussian sampler"', 'title: "\\e[31mRED\\e[0m"')
                    .replace("kind: reproduced", "kind: reproduced"))
    (tmp_path / "demo-affine.safetensors").write_bytes((FIXTURES / "demo-affine.safetensors").read_bytes())
    monkeypatch.setattr(zoo.cli, "_tty", lambda: True)
    assert main(["show", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "\x1b[32m" in out and "fits\x1b[0m" in out  # "fits" in green on a terminal
    assert "\\x1b[31mRED" in out and "\x1b[31m" not in out  # the spec's escape stays escaped text


def test_probe_reads_cuda_visible_devices_and_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch-free probe: no GPU when CUDA_VISIBLE_DEVICES hides them; else nvidia-smi's list."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771, 9.0'\necho 'Tesla T4, 15360, 7.5'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    for env, want in [("", (0, "CUDA_VISIBLE_DEVICES")), ("-1", (0, "CUDA_VISIBLE_DEVICES")), (None, (2, "nvidia-smi")), ("0", (1, "nvidia-smi"))]:
        hardware.probe.cache_clear()
        if env is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
        m = hardware.probe()
        assert (m.cuda_devices, m.how) == want, env
    hardware.probe.cache_clear()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    m = hardware.probe()
    assert m.cuda_names == ("NVIDIA H200", "Tesla T4") and round(m.cuda_memory_gb[0]) == 140 and not m.bf16_cuda
    hardware.probe.cache_clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert hardware.probe().bf16_cuda  # the H200 alone: compute capability 9.0
    hardware.probe.cache_clear()
