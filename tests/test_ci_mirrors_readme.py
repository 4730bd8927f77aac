"""The README's install and test commands are the ones CI (.ci/run) runs."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"OMP_NUM_THREADS=1 (python -m pytest[^\n`]*)", readme)
    assert len(commands) == 2 and "-n 2" in commands[0], commands
    for command in commands:
        assert re.search(rf"^{re.escape(command.strip())}$", ci, re.MULTILINE), f"CI does not run: {command}"
