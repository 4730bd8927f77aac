"""Text from a spec never reaches the terminal raw, and a spec reads
files only inside its own folder tree unless the caller allows more."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from registry.errors import Location, SpecError, ZooError, printable
from registry.loader import load_spec_file, within
from test_catalog import FIXTURES, copy_demo

REPO = Path(__file__).resolve().parents[1]
ESC = "\x1b[31mRED\x1b[0m"


def _cli(args: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_extra, "PYTHONPATH": str(REPO / "tests" / "fixtures"), "ZOO_ALLOWED_PACKAGES": "zoo_demo_plugin"}
    return subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True, env=env, timeout=120, cwd=REPO)


def _assert_clean(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text, repr(text[-500:])


# ----------------------------------------------------------------------------- item 11
@pytest.mark.parametrize("message,location", [
    (f"bad {ESC}\nINJECTED", Location("f.yaml", 1, 2, "a")),
    ("bad", Location(f"dir\n{ESC}.yaml", 3, 1, f"models.x{ESC}\nFAKE: ok")),
    ("bidi \u202e evil \u2028 sep", Location("f.yaml", None, None, None)),
])
def test_zoo_error_str_is_one_printable_line(message: str, location: Location) -> None:
    for exc in (ZooError(message, location), SpecError(message, location)):
        s = str(exc)
        assert s.isprintable() and "\n" not in s, repr(s)
        _assert_clean(s)
    assert "\\x1b" in str(ZooError(ESC))  # escaped, still visible


def test_printable_escapes_only_what_is_not_printable() -> None:
    assert printable("plain text, ünïcödé ✓") == "plain text, ünïcödé ✓"
    assert printable("a\nb\tc\x1bd\x00\u202e") == "a\\nb\\tc\\x1bd\\x00\\u202e"


def test_list_show_doctor_escape_spec_text(tmp_path: Path) -> None:
    d = tmp_path / "specs"
    copy_demo(d, "demo-esc", **{'title: "Demo: a seeded Gaussian sampler"': 'title: "\\e[31mRED\\e[0m\\nFAKE line\\u202e"',
                                "kind: affine": 'kind: "affine\\e[2J"'})
    (d / "bad.yaml").write_text(f'name: bad\n"ti\\e[31mtle\\nX": 1\n')
    env = {"ZOO_SPECS_PATH": str(d), "ZOO_CACHE_DIR": str(tmp_path / "cache")}
    res = _cli(["list"], env)
    assert res.returncode == 0, res.stderr
    _assert_clean(res.stdout + res.stderr)
    line = [x for x in res.stdout.splitlines() if x.startswith("demo-esc")]
    assert len(line) == 1 and "\\x1b[31mRED" in line[0] and "FAKE line" in line[0]
    assert not any(x.startswith("FAKE") for x in res.stdout.splitlines())
    broken = [x for x in res.stderr.splitlines() if "BROKEN" in x]
    assert len(broken) == 1 and "bad.yaml" in broken[0]
    for args in (["show", "demo-esc", "--no-detect"], ["doctor"], ["validate", str(d / "bad.yaml")]):
        res = _cli(args, env)
        _assert_clean(res.stdout + res.stderr)
        assert "Traceback" not in res.stderr
    lines = [x for x in res.stderr.splitlines() if x.strip()]  # validate: one line per problem, none injected
    assert lines and all(x.startswith(f"{d / 'bad.yaml'}:") for x in lines), lines
    assert any("unknown field 'ti\\x1b[31mtle\\nX'" in x for x in lines), lines


# ----------------------------------------------------------------------------- item 12
def test_within() -> None:
    assert within("/a/b", "/a/b/c/d.yaml") and within("/a/b", "/a/b")
    assert not within("/a/b", "/a/bc/d.yaml") and not within("/a/b", "/a/b/../x.yaml")
    assert not within("/a/b", "/etc/passwd")


def _outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "creds.yaml").write_text("name: leaked-secret-value\ntitle: s3cr3t\n")
    (secret / "blob.safetensors").write_bytes(b"x" * 100)
    return secret


@pytest.mark.parametrize("ref", ["../secret/creds.yaml", "ABS", "link/creds.yaml"])
def test_extends_outside_the_spec_folder_is_refused(tmp_path: Path, ref: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZOO_SPEC_ROOT", raising=False)
    secret = _outside(tmp_path)
    d = tmp_path / "specs"
    d.mkdir()
    (d / "link").symlink_to(secret)
    ref = str(secret / "creds.yaml") if ref == "ABS" else ref
    p = d / "child.yaml"
    p.write_text(f"extends: {ref}\ntitle: x\n")
    with pytest.raises(SpecError) as exc:
        load_spec_file(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}:1:1: extends: ") and "outside" in msg and "ZOO_SPEC_ROOT" in msg
    assert "leaked-secret-value" not in msg and "s3cr3t" not in msg


def test_caller_can_widen_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "specs" / "variants"
    copy_demo(tmp_path / "specs", "demo-base")
    d.mkdir()
    (d / "hot.yaml").write_text("extends: ../demo-base.yaml\nname: demo-hot\n")
    monkeypatch.delenv("ZOO_SPEC_ROOT", raising=False)
    with pytest.raises(SpecError, match="outside"):
        load_spec_file(d / "hot.yaml")
    assert load_spec_file(d / "hot.yaml", root=tmp_path / "specs").name == "demo-hot"
    monkeypatch.setenv("ZOO_SPEC_ROOT", str(tmp_path / "specs"))
    assert load_spec_file(d / "hot.yaml").name == "demo-hot"


def test_weights_outside_the_spec_folder_are_refused_by_loader_and_lint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZOO_SPEC_ROOT", raising=False)
    secret = _outside(tmp_path)
    d = tmp_path / "specs"
    p = copy_demo(d, "demo-w", **{"weights: demo-affine.safetensors": "weights: ../secret/blob.safetensors"})
    with pytest.raises(SpecError) as exc:
        load_spec_file(p)
    assert "models.model.variants.toy.weights" in str(exc.value) and "outside" in str(exc.value)
    from registry.lint import lint

    spec = load_spec_file(p, root=tmp_path)  # the caller allowed it for loading; lint re-checks on its own
    problems = lint(spec, p)
    assert any("outside" in str(e) for e in problems) and not any("sha256" in str(e) for e in problems), problems
    assert (secret / "blob.safetensors").exists()


def test_shipped_and_fixture_specs_still_load() -> None:
    assert load_spec_file(FIXTURES / "demo-gaussian.yaml").name == "demo-gaussian"
    for f in sorted((REPO / "specs").glob("*.yaml")):
        load_spec_file(f)
