"""Catalog: discovery, listing filters, collisions, broken specs, and no heavy imports."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from registry.catalog import Catalog
from registry.errors import CollisionError, NotFoundError

FIXTURES = Path(__file__).parent / "fixtures" / "specs"
REPO = Path(__file__).resolve().parents[1]


def copy_demo(dst: Path, name: str = "demo-gaussian", **replace: str) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "demo-affine.safetensors", dst / "demo-affine.safetensors")
    text = (FIXTURES / "demo-gaussian.yaml").read_text().replace("name: demo-gaussian", f"name: {name}")
    for old, new in replace.items():
        text = text.replace(old, new)
    p = dst / f"{name}.yaml"
    p.write_text(text)
    return p


def test_user_folder_is_listed_with_filters(tmp_path: Path) -> None:
    copy_demo(tmp_path, "demo-a")
    copy_demo(tmp_path, "demo-b", **{"tags: [demo]": "tags: [demo, extra]"})
    cat = Catalog()
    cat.add_path(tmp_path)
    assert {"demo-a", "demo-b"} <= set(cat.list("demo-*"))
    assert "demo-b" in cat.list(tags=["extra"]) and "demo-a" not in cat.list(tags=["extra"])
    assert "demo-a" in cat.list(task="unconditional-sampling")
    assert "demo-a" not in cat.list(exclude="demo-a")
    assert "demo-a" in cat.list(fits="cpu")


def test_name_collision_names_both_files(tmp_path: Path) -> None:
    first = copy_demo(tmp_path / "one", "demo-same")
    second = copy_demo(tmp_path / "two", "demo-same")
    cat = Catalog()
    cat.add_path(tmp_path / "one")
    cat.add_path(tmp_path / "two")
    assert cat.get("demo-same").path == first.resolve()  # the first file found keeps the name
    [err] = [b.error for b in cat.broken() if isinstance(b.error, CollisionError)]
    assert str(first) in str(err) and str(second) in str(err)


def test_index_cache_revalidates_a_changed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    p = copy_demo(tmp_path / "specs", "demo-cached")
    cat = Catalog()
    cat.add_path(tmp_path / "specs")
    assert "demo-cached" in cat.list()
    assert (tmp_path / "cache" / "spec-index.json").is_file()
    p.write_text(p.read_text().replace("title:", "titel:"))
    cat2 = Catalog()
    cat2.add_path(tmp_path / "specs")
    assert "demo-cached" not in cat2.list()
    assert any("tit" in str(b.error) and b.path == p.resolve() for b in cat2.broken())


def test_broken_spec_is_reported_not_skipped(tmp_path: Path) -> None:
    copy_demo(tmp_path, "demo-ok")
    (tmp_path / "bad.yaml").write_text("name: bad\ntitle: [unclosed\n")
    cat = Catalog()
    cat.add_path(tmp_path)
    assert "demo-ok" in cat.list()
    broken = [b for b in cat.broken() if tmp_path in b.path.parents]
    assert len(broken) == 1 and "bad.yaml:" in str(broken[0].error)


def test_unknown_name_suggests(tmp_path: Path) -> None:
    copy_demo(tmp_path, "demo-gaussian")
    cat = Catalog()
    cat.add_path(tmp_path)
    with pytest.raises(NotFoundError, match="did you mean demo-gaussian"):
        cat.get("demo-gausian")


def test_zoo_specs_path_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy_demo(tmp_path, "demo-env")
    monkeypatch.setenv("ZOO_SPECS_PATH", str(tmp_path))
    assert "demo-env" in Catalog().list()


def test_cli_list_reports_broken_on_stderr(tmp_path: Path) -> None:
    copy_demo(tmp_path, "demo-ok")
    (tmp_path / "dupe.yaml").write_text("name: x\nname: y\n")
    env = {**os.environ, "ZOO_SPECS_PATH": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "zoo.cli", "list", "--strict"], capture_output=True, text=True, env=env)
    assert res.returncode == 1
    assert "demo-ok" in res.stdout
    assert "BROKEN" in res.stderr and "dupe.yaml:2:1: name: duplicate key" in res.stderr


def test_listing_and_validation_import_no_heavy_library(tmp_path: Path) -> None:
    """`import zoo`, `zoo.list()` and validating every spec never import torch & co."""
    copy_demo(tmp_path, "demo-light")
    code = (
        "import sys, zoo; zoo.add_specs(sys.argv[1]); names = zoo.list();"
        "[zoo.spec(n) for n in names];"
        "from registry.lint import lint; [lint(e.spec, e.path) for e in zoo.catalog().entries()];"
        "heavy = [m for m in ('torch', 'transformers', 'diffusers', 'timm', 'hypothesis') if m in sys.modules];"
        "print(len(names), heavy)"
    )
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    count, heavy = res.stdout.strip().split(" ", 1)
    assert int(count) >= 1 and heavy == "[]", res.stdout


def test_committed_json_schema_and_spec_reference_are_fresh() -> None:
    res = subprocess.run([sys.executable, str(REPO / "tools" / "gen_docs.py"), "--check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    from registry.spec import json_schema

    committed = json.loads((REPO / "schemas" / "zoo-spec.schema.json").read_text())
    assert committed == json.loads(json.dumps(json_schema()))
