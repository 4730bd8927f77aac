"""Packaging: the wheel ships specs and weights; the pinned stack imports together."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_heavy_stack_imports_together() -> None:
    """torch + torchvision + timm + transformers + diffusers + peft import in one process (the pinned set)."""
    code = "import torch, torchvision, timm, transformers, diffusers, peft; print(torch.__version__)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_wheel_ships_specs_and_works_without_the_checkout(tmp_path: Path) -> None:
    # build from a copy: an in-tree build/ could carry stale files into a later wheel
    import shutil

    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "out"))
    wheel_dir = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheel_dir), str(src)],
        check=True, capture_output=True,
    )
    wheel = next(wheel_dir.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for spec in (REPO / "specs").glob("*.yaml"):
        assert f"zoo_specs/{spec.name}" in names, spec.name
    for weights in (REPO / "specs" / "weights").glob("*.safetensors"):
        assert f"zoo_specs/weights/{weights.name}" in names, weights.name
    assert "zoo/cli.py" in names and "registry/build.py" in names
    # what zoo validate reads instead of importing torch: each package's params module, the library names
    for static in [*(REPO / "zoo").rglob("params.py"), REPO / "registry" / "library_names.json"]:
        assert str(static.relative_to(REPO)) in names, static
    assert not any(n.endswith("zoo-index.json") for n in names)

    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    # the dependencies' site-packages (a venv layered on another through a .pth file has two; -S skips .pth files)
    deps = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], *(p for p in sys.path if p.endswith("site-packages"))]))
    code = (
        "import zoo, importlib.util; s = importlib.util.find_spec('zoo_specs');"
        "print(zoo.__file__); print(list(s.submodule_search_locations)[0]); print(len(zoo.list()))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(target), deps])
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    zoo_file, specs_dir, count = res.stdout.split()
    assert zoo_file.startswith(str(target)) and specs_dir.startswith(str(target))
    assert int(count) == len(list((REPO / "specs").glob("*.yaml")))

    # `zoo new` templates and a method's benchmark work from the wheel alone
    for template in (REPO / "zoo" / "templates").rglob("*.tmpl"):
        assert f"zoo/{template.relative_to(REPO / 'zoo')}" in names, template
    code = (
        "import sys; from zoo.scaffold import scaffold; print(len(scaffold('wheel-made', 'sampler', 'new')));"
        "from zoo.cli import main;"
        "main(['bench', 'f-dpmsolver', '--quick', '--rows', '8', '--grids', 'vp', '--mixtures', 'gaussian', '--out-dir', 'bench'])"
    )
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.splitlines()[0] == str(len([p for p in (REPO / "zoo" / "templates").rglob("*.tmpl")
                                                  if "/recipe/" not in str(p)]) + 1)  # + zoo-spec.schema.json
    assert (tmp_path / "new" / "wheel-made" / "wheel_made" / "specs" / "wheel-made.yaml").is_file()
    assert (tmp_path / "bench" / "f-dpmsolver-bench.json").is_file()

    # the moved benchmarks: in the wheel, reachable through `zoo bench`, and the PoE-Bridge
    # one builds its models from the wheel's spec and shipped weights
    for pkg in ("poe_bridge", "sae_feature_death", "sae_tm"):
        assert f"zoo/methods/{pkg}/benchmark.py" in names, pkg
    code = (
        "from zoo.cli import main\n"
        "for n in ('sae-feature-death', 'sae-tm', 'ddim'):\n"
        "    try:\n        main(['bench', n, '--help'])\n"
        "    except SystemExit as e:\n        assert e.code == 0, (n, e.code)\n"
        "raise SystemExit(main(['bench', 'poe-bridge', '--quick', '--out-dir', 'bench']))\n"
    )
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "usage: zoo bench sae-tm" in res.stdout and "usage: zoo bench ddim" in res.stdout
    assert "| PoE-Bridge K=4 multinomial_exact (paper)   | 1.000 |" in res.stdout
    assert (tmp_path / "bench" / "poe-bridge-bench.png").stat().st_size > 5000

    # the cards and their figures ship as zoo_docs, and `zoo report` works from the wheel alone
    for card in (REPO / "docs" / "methods").glob("*.md"):
        assert f"zoo_docs/methods/{card.name}" in names, card.name
    for png in (REPO / "docs" / "methods").glob("*.png"):
        assert f"zoo_docs/methods/{png.name}" in names, png.name
    code = "from zoo.cli import main; raise SystemExit(main(['report', '--out', 'html', 'poe-bridge', 'fmrg']))"
    res = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    page = (tmp_path / "html" / "poe-bridge.html").read_text()
    assert 'class="card"' in page and "tokens per AR forward" in (tmp_path / "html" / "index.html").read_text()
    assert (tmp_path / "html" / "figures" / "poe-bridge" / "poe-bridge-bench.png").is_file()
    assert (tmp_path / "html" / "figures" / "fmrg" / "fmrg.png").is_file()  # a card whose docs: path is relative to the checkout root
