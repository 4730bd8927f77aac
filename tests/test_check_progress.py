"""`zoo check` shows progress ([k/N] per check; a bar for a quiet run on a
terminal) and ends with a per-spec summary."""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from zoo.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
SPECS = [str(FIXTURES / "specs" / "demo-gaussian.yaml"), str(FIXTURES / "metrics" / "demo-paired.yaml")]


def test_check_counts_k_of_n_and_summarises_per_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", *SPECS, "--only", "metric", "--no-record"]) == 0
    out = capsys.readouterr().out
    counters = re.findall(r"^\[(\d)/(\d)\] PASS  ", out, flags=re.M)
    assert counters == [("1", "3"), ("2", "3"), ("3", "3")]
    assert re.search(r"^spec\s+pass\s+fail\s+skip\s+seconds$", out, flags=re.M)
    assert re.search(r"^demo-gaussian\s+1\s+0\s+0\s+\d+\.\d$", out, flags=re.M)
    assert re.search(r"^demo-paired\s+2\s+0\s+0\s+\d+\.\d$", out, flags=re.M)
    assert out.rstrip().endswith("3 passed, 0 failed, 0 skipped")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_quiet_check_on_a_terminal_shows_a_progress_bar(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["check", *SPECS, "--only", "metric", "--no-record", "-q"]) == 0
    assert "3/3" in err.getvalue() and "check" in err.getvalue()  # tqdm's "k/N [..., check/s]"
    out = capsys.readouterr().out
    assert "PASS" not in out and "3 passed, 0 failed, 0 skipped" in out  # quiet: no per-check lines
