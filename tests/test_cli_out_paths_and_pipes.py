"""`--out` paths, broken pipes and `zoo check` on an invalid spec."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.cli import main
from zoo.common.out_files import output_path

REPO = Path(__file__).resolve().parents[1]


def _err_lines(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    cap = capsys.readouterr()
    return cap.out, [x for x in cap.err.splitlines() if x.strip()]


def test_out_without_suffix_writes_png_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "samples"
    assert main(["run", "f-dpmsolver", "--n", "64", "--nfe", "4", "--out", str(target)]) == 0
    out, _ = _err_lines(capsys)
    assert (tmp_path / "samples.png").is_file() and not target.exists()
    assert f"wrote {tmp_path / 'samples.png'}" in out


@pytest.mark.parametrize("make,needle", [
    (lambda t: t / "missing" / "x.png", "does not exist"),
    (lambda t: t / "x.txt", ".txt"),
    (lambda t: t, "is a folder"),
])
def test_bad_out_path_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], make, needle: str) -> None:
    code = main(["run", "f-dpmsolver", "--n", "64", "--nfe", "4", "--out", str(make(tmp_path))])
    _, err = _err_lines(capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("zoo: error: --out: ") and needle in err[0], err


def test_output_path_helper(tmp_path: Path) -> None:
    assert output_path(str(tmp_path / "b")) == tmp_path / "b.png"
    assert output_path(str(tmp_path / "b.svg")) == tmp_path / "b.svg"
    with pytest.raises(ValueError, match="pdf, png, svg"):
        output_path("/tmp/x.txt")


@pytest.mark.parametrize("args", [["show", "f-dpmsolver", "--no-detect"], ["list"], ["schema"]])
def test_closed_stdout_is_not_a_traceback(args: list[str]) -> None:
    """`zoo show ... | head`: the reader going away ends the command quietly."""
    proc = subprocess.Popen([sys.executable, "-m", "zoo.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=REPO, env={**os.environ})
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_check_of_an_invalid_spec_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\ntitel: x\n")
    code = main(["check", str(p)])
    out, err = _err_lines(capsys)
    assert code == 2 and out == "" and len(err) == 1 and err[0].startswith(f"{p}:"), (code, out, err)
