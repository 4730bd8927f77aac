"""pytest plugin: ``pytest --zoo my-spec.yaml`` runs the conformance suite on a spec file,
one test item per check (``zoo check my-spec.yaml`` runs the same checks without pytest)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("zoo", "Zoo conformance")
    group.addoption("--zoo", action="store_true", help="collect YAML files given on the command line as Zoo specs")
    group.addoption("--zoo-slow", action="store_true", help="include slow metric re-checks, nightly hypothesis profile")


def pytest_configure(config: Any) -> None:
    if config.getoption("--zoo"):
        from .conformance import load_hypothesis_profile

        load_hypothesis_profile(config.getoption("--zoo-slow"))


class ConformanceItem(pytest.Item):
    def __init__(self, *, check: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        from .conformance import run_check

        status, msg, _ = run_check(self.check)
        if status == "SKIP":
            pytest.skip(msg)
        if status == "FAIL":
            raise ConformanceFailure(msg)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return f"{self.check.id}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, 0, self.check.id


class ConformanceFailure(Exception):
    pass


class SpecFile(pytest.File):
    def collect(self) -> Any:
        from .catalog import Entry
        from .conformance import checks_for
        from .errors import SpecError
        from .loader import load_spec_file

        path = Path(self.path).resolve()
        try:
            entry = Entry(path, "pytest", spec=load_spec_file(path))
        except SpecError as exc:
            entry = Entry(path, "pytest", error=exc)
        for check in checks_for(entry, slow=self.config.getoption("--zoo-slow")):
            yield ConformanceItem.from_parent(self, name=check.id, check=check)


def pytest_collect_file(parent: Any, file_path: Path) -> Any:
    if parent.config.getoption("--zoo") and file_path.suffix in (".yaml", ".yml"):
        return SpecFile.from_parent(parent, path=file_path)
    return None
