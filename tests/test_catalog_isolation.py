"""One bad entry in a spec folder, a name collision, or a stale,
poisoned or mis-shaped spec index never breaks listing, ``zoo doctor`` or loading the others."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry.catalog import Catalog
from registry.errors import CollisionError
from test_catalog import copy_demo

REPO = Path(__file__).resolve().parents[1]


def _cli(args: list[str], env_extra: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=REPO)


def _bad_folder(tmp_path: Path) -> Path:
    """A folder with one good spec and one of every kind of bad entry named *.yaml."""
    d = tmp_path / "specs"
    copy_demo(d, "demo-ok")
    (d / "malformed.yaml").write_text("name: m\ntitle: [unclosed\n")
    (d / "adir.yaml").mkdir()
    os.mkfifo(d / "fifo.yaml")
    (d / "dangling.yaml").symlink_to(d / "nowhere.yaml")
    (d / "devnull.yaml").symlink_to("/dev/zero")
    (d / "notyaml.yaml").write_bytes(b"\xff\xfe\x00garbage")
    return d


BAD_NAMES = ["malformed.yaml", "adir.yaml", "fifo.yaml", "dangling.yaml", "devnull.yaml", "notyaml.yaml"]


def test_bad_entries_are_one_broken_line_each_and_never_opened(tmp_path: Path) -> None:
    d = _bad_folder(tmp_path)
    cat = Catalog()
    cat.add_path(d)
    assert "demo-ok" in cat.list()
    broken = {b.path.name: str(b.error) for b in cat.broken() if d in b.path.parents or b.path.parent == d}
    assert sorted(broken) == sorted(BAD_NAMES), broken
    assert "not a regular file" in broken["fifo.yaml"] and "not a regular file" in broken["devnull.yaml"]
    assert "not a regular file" in broken["adir.yaml"] and "no such file" in broken["dangling.yaml"]
    assert all("\n" not in m for m in broken.values())


@pytest.mark.parametrize("command", [["list"], ["doctor"], ["show", "ddim", "--no-detect"]])
def test_cli_survives_a_bad_folder(tmp_path: Path, command: list[str]) -> None:
    """`zoo list`, `zoo doctor` and `zoo show` of a built-in keep working (a FIFO used to hang them)."""
    d = _bad_folder(tmp_path)
    res = _cli(command, {"ZOO_SPECS_PATH": str(d), "ZOO_CACHE_DIR": str(tmp_path / "cache")})
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    if command[0] == "show":
        assert res.returncode == 0 and res.stdout.startswith("ddim:")
        return
    assert "ddim" in res.stdout and "demo-ok" in res.stdout
    broken_lines = [line for line in (res.stdout + res.stderr).splitlines() if "BROKEN" in line]
    assert len(broken_lines) == len(BAD_NAMES), broken_lines


def test_zoo_load_of_a_builtin_works_beside_a_bad_folder(tmp_path: Path) -> None:
    d = _bad_folder(tmp_path)
    code = "import zoo, sys; zoo.add_specs(sys.argv[1]); p = zoo.load('demo-ok'); print(p.spec.name)"
    env = {**os.environ, "ZOO_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(REPO / "tests" / "fixtures") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "ZOO_ALLOWED_PACKAGES": "zoo_demo_plugin"}
    res = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "demo-ok", res.stderr[-2000:]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode; cannot make one unreadable")
def test_unreadable_file_is_a_broken_line(tmp_path: Path) -> None:
    d = tmp_path / "specs"
    copy_demo(d, "demo-ok")
    p = d / "secret.yaml"
    p.write_text("name: secret\n")
    p.chmod(0)
    cat = Catalog()
    cat.add_path(d)
    assert "demo-ok" in cat.list()
    assert any(b.path.name == "secret.yaml" and "cannot read" in str(b.error) for b in cat.broken())


def test_user_spec_reusing_a_builtin_name_keeps_the_builtin_and_lists_everything(tmp_path: Path) -> None:
    """Rule: the first-discovered file keeps a name (built-ins, then ZOO_SPECS_PATH, then add_specs);
    each later file declaring it is one BROKEN line naming both files."""
    d = tmp_path / "user"
    copy_demo(d, "ddim")
    res = _cli(["list"], {"ZOO_SPECS_PATH": str(d), "ZOO_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    names = [line.split()[0] for line in res.stdout.splitlines()]
    assert {"ddim", "f-dpmsolver", "poe-bridge", "unipc"} <= set(names) and names.count("ddim") == 1
    broken = [line for line in res.stderr.splitlines() if line.startswith("BROKEN")]
    assert len(broken) == 1 and str(d / "ddim.yaml") in broken[0] and "specs/ddim.yaml" in broken[0]
    cat = Catalog()
    cat.add_path(d)
    assert cat.get("ddim").path.parent.name == "specs" and cat.get("ddim").spec.title.startswith("DDIM")
    assert any(isinstance(b.error, CollisionError) for b in cat.broken())


# ----------------------------------------------------------------------------- the index (item 10)
def _indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ZOO_CACHE_DIR", str(cache))
    d = tmp_path / "specs"
    copy_demo(d, "demo-a")
    copy_demo(d, "demo-b")
    cat = Catalog()
    cat.add_path(d)
    assert {"demo-a", "demo-b"} <= set(cat.list())
    return d, cache / "spec-index.json"


def test_quoted_extends_key_is_followed_by_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing a parent that a child names through `"extends":` re-validates the child."""
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "specs"
    copy_demo(d, "demo-parent")
    (d / "child.yaml").write_text('"extends": demo-parent.yaml\nname: demo-child\n')
    (d / "flow.yaml").write_text('{"extends": "demo-parent.yaml", name: demo-flow}\n')
    cat = Catalog()
    cat.add_path(d)
    assert {"demo-child", "demo-flow"} <= set(cat.list())
    parent = d / "demo-parent.yaml"
    parent.write_text(parent.read_text().replace("task: unconditional-sampling", "task: Bad Task"))
    cat2 = Catalog()
    cat2.add_path(d)
    names = cat2.list()
    assert "demo-child" not in names and "demo-flow" not in names, names
    assert {b.path.name for b in cat2.broken()} >= {"child.yaml", "flow.yaml", "demo-parent.yaml"}


def test_poisoned_index_cannot_map_a_name_to_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d, index = _indexed(tmp_path, monkeypatch)
    raw = json.loads(index.read_text())
    files = raw["files"]
    a, b = str((d / "demo-a.yaml").resolve()), str((d / "demo-b.yaml").resolve())
    files[a]["header"]["name"], files[b]["header"]["name"] = "demo-b", "demo-a"  # swap the names
    files[a]["header"]["title"] = "poisoned"
    index.write_text(json.dumps(raw))
    cat = Catalog()
    cat.add_path(d)
    assert cat.get("demo-a").spec.name == "demo-a" and cat.get("demo-a").path == Path(a)
    assert cat.get("demo-b").path == Path(b)
    assert all(e.header["title"] != "poisoned" for e in cat.entries())


@pytest.mark.parametrize("content", [
    "[]", "null", "12", '{"fingerprint": 3, "files": []}', "not json", "\xff",
    'FP{"x.yaml": "str"}', 'FP{"A": {"deps": 1, "header": {}, "error": null}}',
    'FP{"A": {"deps": [["A", "SHA"]], "header": {"name": 3}, "error": null}}',
    'FP{"A": {"deps": [["A", "SHA"]], "header": null, "error": {"message": []}}}',
    'FP{"A": {"deps": [["A", "SHA"]], "header": null, "error": null}}',
    'FP{"A": {"deps": [["A", "SHA"], 5], "header": {"name": "demo-a"}, "error": null}}',
    'FP{"A": {"deps": [["/etc/passwd", null]], "header": null, "error": {"message": "x", "file": null, "line": null, "column": null, "field": null}}}',
])
def test_misshaped_index_is_treated_as_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    d, index = _indexed(tmp_path, monkeypatch)
    raw = json.loads(index.read_text())
    a = str((d / "demo-a.yaml").resolve())
    if content.startswith("FP"):
        content = json.dumps({"fingerprint": raw["fingerprint"], "files": "@"}).replace(
            '"@"', content[2:].replace('"A"', json.dumps(a)).replace('"SHA"', json.dumps(raw["files"][a]["deps"][0][1])))
    index.write_text(content)
    cat = Catalog()
    cat.add_path(d)
    assert {"demo-a", "demo-b"} <= set(cat.list())
    assert cat.get("demo-a").spec.name == "demo-a"
    assert not [b for b in cat.broken() if d in b.path.parents]


def test_index_that_is_a_fifo_is_not_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    os.mkfifo(cache / "spec-index.json")
    d = tmp_path / "specs"
    copy_demo(d, "demo-a")
    res = _cli(["list"], {"ZOO_SPECS_PATH": str(d), "ZOO_CACHE_DIR": str(cache)}, timeout=60)
    assert res.returncode == 0 and "demo-a" in res.stdout, res.stderr[-2000:]
