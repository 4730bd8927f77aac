"""A failing Hypothesis invariant is reported with its falsifying example, the
assertion message and the ``@reproduce_failure`` blob by ``zoo check``, ``zoo --debug check`` (plus
the traceback) and ``pytest --zoo`` -- not reduced to one ``ExceptionGroup`` line."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zoo.cli import main

PLUGIN = '''
from hypothesis import given, strategies as st
from registry.contract import Procedure, invariant


class Echo(Procedure):
    def __call__(self, *, seed=0):
        return seed


@invariant("stays-small")
@given(st.integers(0, 1000))
def stays_small(x):
    """Deliberately false: every integer in [0, 1000] is below 100."""
    assert x < 100, f"x={x} is not below 100"


@invariant("fails-two-ways")
@given(st.integers(0, 1000))
def fails_two_ways(x):
    """Deliberately false in two distinct ways (Hypothesis raises an ExceptionGroup)."""
    if x > 500:
        raise ValueError(f"too big: {x}")
    assert x < 100, f"x={x} is not below 100"
'''

def echo_spec(name: str, pkg: str, extra: str = "") -> str:
    """A minimal spec whose implementation is the temporary plugin ``pkg`` (with an ``Echo`` procedure)."""
    return (f"name: {name}\ntitle: {name}\ntask: demo\nimplementation: {pkg}\n"
            f'samplers: {{echo: {{target: "{pkg}:Echo"}}}}\ndefault: echo\nvariants: [toy]\n'
            f"hardware: {{toy: {{accelerator: cpu}}}}\n{extra}")


def write_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pkg: str, code: str, spec_text: str) -> Path:
    """Write package ``pkg`` (one ``__init__``) and a spec into ``tmp_path``; make it importable and allowed."""
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text(textwrap.dedent(code))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", f"zoo_demo_plugin,{pkg}")
    spec = tmp_path / f"{pkg}.yaml"
    spec.write_text(spec_text)
    return spec


@pytest.fixture
def failing_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_plugin(tmp_path, monkeypatch, "zoo_failing_plugin", PLUGIN,
                        echo_spec("failing-invariants", "zoo_failing_plugin", "invariants: [stays-small, fails-two-ways]\n"))


def _assert_reports_examples(out: str) -> None:
    # the assertion message, the falsifying example, and the reproduction blob, for both invariants
    assert "x=100 is not below 100" in out
    assert "Failing test case: stays_small(" in out and "x=100," in out
    assert "Failing test case: fails_two_ways(" in out
    assert "too big: 501" in out and "x=501," in out  # the second distinct failure of the group
    assert out.count("@reproduce_failure(") >= 3
    assert "2 distinct failures" in out


def test_zoo_check_shows_falsifying_examples(failing_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`zoo check` shows each falsifying example, message and blob; no traceback without --debug."""
    assert main(["check", str(failing_spec), "--only", "invariant"]) == 1
    out = capsys.readouterr().out
    _assert_reports_examples(out)
    assert "Traceback" not in out


def test_zoo_debug_check_adds_the_traceback(failing_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`zoo --debug check` keeps the examples and adds the traceback down to the failing assert."""
    assert main(["--debug", "check", str(failing_spec), "--only", "invariant"]) == 1
    out = capsys.readouterr().out
    _assert_reports_examples(out)
    assert "Traceback (most recent call last)" in out
    assert 'assert x < 100, f"x={x} is not below 100"' in out


def test_pytest_zoo_shows_falsifying_examples(failing_spec: Path, tmp_path: Path) -> None:
    """`pytest --zoo spec.yaml` reports the same examples in its failure section."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "ZOO_ALLOWED_PACKAGES": "zoo_failing_plugin"}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--zoo", str(failing_spec), "-k", "invariant",
         "--rootdir", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert res.returncode == 1, res.stdout[-3000:]
    _assert_reports_examples(res.stdout)
