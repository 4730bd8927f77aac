"""The done-when of the hook-context work: a user who installs the wheel (not editable) gets working methods.

The wheel is built from a copy of the checkout and installed with ``pip install --no-deps`` into a fresh
``venv --system-site-packages`` outside the checkout; the dependencies come from this interpreter's
site-packages through a path entry (``.pth`` lines add folders to ``sys.path`` without running the editable
install's finder there, so the checkout is not importable: asserted). From a temporary working folder it then
builds every spec's CPU variants and runs every listed invariant, runs ``zoo bench NAME --quick`` of four
methods (robuq, probe and deep-forcing, which used to read ``specs/`` through checkout paths, and f-dpmsolver)
and ``zoo train probe --check``; nothing is written into the installed package."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CHECKS = r'''
import json, sys
import zoo
from registry.conformance import checks_for, load_hypothesis_profile, run_check

load_hypothesis_profile()
out = {"zoo": zoo.__file__, "specs": len(zoo.list()), "results": []}
for name in zoo.list():
    for check in checks_for(zoo.entry(name)):
        if any(k in check.id for k in ("::validates", "::builds[", "::invariant[", "::weights[", "::file[")):
            status, msg, _ = run_check(check)
            out["results"].append([check.id, status, msg[:300]])
print(json.dumps(out))
'''


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert res.returncode == 0, f"{' '.join(cmd[:4])}... exited {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.mark.slow
def test_the_installed_wheel_builds_every_spec_runs_invariants_benchmarks_and_training(tmp_path: Path) -> None:
    import json

    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__",
                                                             "out", "zoo-bench-*", "zoo-train-*"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
                   check=True, capture_output=True)
    wheel = next(wheels.glob("*.whl"))
    shutil.rmtree(src)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, capture_output=True)
    py = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    deps = dict.fromkeys([sysconfig.get_paths()["purelib"], *(p for p in sys.path if p.endswith("site-packages"))])
    (purelib / "zoo-test-deps.pth").write_text("\n".join(deps) + "\n")  # paths only: no .pth of theirs is run
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", ZOO_CACHE_DIR=str(tmp_path / "cache"),
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    _run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], env, tmp_path)

    work = tmp_path / "work"
    work.mkdir()
    where = _run([str(py), "-c", "import zoo, registry, zoo_specs; print(zoo.__file__); print(registry.__file__); "
                                  "print(list(zoo_specs.__path__)[0])"], env, work).stdout.split()
    assert all(Path(p).resolve().is_relative_to(purelib.resolve()) for p in where), where  # the wheel, not the checkout
    installed = {p: p.stat().st_mtime_ns for p in (purelib / "zoo_specs").rglob("*")}

    report = json.loads(_run([str(py), "-c", CHECKS], env, work, timeout=1800).stdout.splitlines()[-1])
    assert report["specs"] == len(list((REPO / "specs").glob("*.yaml")))
    failed = [r for r in report["results"] if r[1] == "FAIL"]
    assert not failed, failed
    ran = {r[0] for r in report["results"] if r[1] == "PASS"}
    for must in ("robuq::builds[toy]", "probe::invariant[detector-frozen-bit-identical-during-stage-1]",
                 "deep-forcing::invariant[chunked-cached-generation-equals-causal-recomputation]", "digits::builds[toy]",
                 "robuq::file[dit-w158a4-qat.toy.packed]"):
        assert must in ran, must

    zoo_cli = str(venv / "bin" / "zoo")
    benches = {
        "robuq": ["--per-class", "1", "--steps", "2"],
        "probe": ["--seeds", "0", "--stage1-steps", "2", "--stage2-steps", "2", "--n-eval", "8", "--arms", "probe"],
        "deep-forcing": ["--batch", "2"],
        "f-dpmsolver": ["--rows", "8", "--grids", "vp", "--mixtures", "gaussian", "--out-dir", "zoo-bench-f-dpmsolver"],  # older shape
    }
    for name, extra in benches.items():
        _run([zoo_cli, "bench", name, "--quick", *extra], env, work)
    for name in ("robuq", "probe", "deep-forcing"):
        doc = json.loads((work / f"zoo-bench-{name}" / f"{name}-bench.json").read_text())
        assert doc["quick"] is True and doc["result"], name
    assert (work / "zoo-bench-robuq" / "robuq.png").is_file() and (work / "zoo-bench-probe" / "probe.png").is_file()
    train = _run([zoo_cli, "train", "probe", "--check"], env, work)
    # the spec's sha256, or on a CPU whose kernels round differently the digest the spec records for that CPU (OK*)
    assert re.search(r"^OK[ *]  weights/probe-detector.safetensors", train.stdout, re.M), train.stdout[-2000:]
    assert {p.name for p in work.iterdir()} == {f"zoo-bench-{n}" for n in benches}  # every file inside its --out-dir
    assert {p: p.stat().st_mtime_ns for p in (purelib / "zoo_specs").rglob("*")} == installed  # nothing written there
