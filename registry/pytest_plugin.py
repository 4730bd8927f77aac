"""pytest plugin: ``pytest --zoo my-spec.yaml`` runs the conformance suite on a spec file,
one test item per check (``zoo check my-spec.yaml`` runs the same checks without pytest).

It also keeps the per-spec time budget: every conformance check (here, or in a test that calls
:func:`record_check_cpu`) reports its CPU seconds as a ``user_property``; the controlling process
(also under pytest-xdist, where reports arrive from the workers) sums them per spec and fails the
session when a spec's default checks exceed ``--zoo-budget`` / ``$ZOO_CHECK_BUDGET`` (20 s)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("zoo", "Zoo conformance")
    group.addoption("--zoo", action="store_true", help="collect YAML files given on the command line as Zoo specs")
    group.addoption("--zoo-slow", action="store_true", help="include slow metric re-checks, nightly hypothesis profile")
    group.addoption("--zoo-budget", type=float, default=None, metavar="SECONDS",
                    help="fail the session if a spec's default checks cost more CPU seconds (default $ZOO_CHECK_BUDGET or 20)")


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
        record_check_cpu(self, self.check)
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


# ----------------------------------------------------------------------------- per-spec budget
PROPERTY = "zoo_check_cpu"
_SPEC_CPU: dict[str, float] = {}


def record_check_cpu(item: Any, check: Any) -> None:
    """Attach the CPU seconds of the check just run (``conformance.LAST_CPU``) to the test report."""
    from . import conformance

    item.user_properties.append((PROPERTY, (check.spec, conformance.LAST_CPU, bool(check.slow))))


def pytest_runtest_logreport(report: Any) -> None:
    if report.when != "call":
        return
    for name, value in getattr(report, "user_properties", ()):
        if name == PROPERTY:
            spec, cpu, slow = value
            if not slow:
                _SPEC_CPU[spec] = _SPEC_CPU.get(spec, 0.0) + float(cpu)


def over_budget(config: Any) -> list[str]:
    from .conformance import budget_seconds

    budget = budget_seconds(config.getoption("--zoo-budget"))
    return [f"{spec} ({cpu:.1f} s CPU > {budget:g} s)" for spec, cpu in sorted(_SPEC_CPU.items()) if cpu > budget]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    if hasattr(session.config, "workerinput") or not _SPEC_CPU:  # an xdist worker: the controller decides
        return
    over = over_budget(session.config)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        top = sorted(_SPEC_CPU.items(), key=lambda kv: -kv[1])[:5]
        reporter.write_sep("-", "zoo conformance budget")
        reporter.write_line("zoo conformance CPU per spec (default checks): "
                            + ", ".join(f"{spec} {cpu:.1f}s" for spec, cpu in top))
        for line in over:
            reporter.write_line(f"FAILED zoo budget: {line}", red=True)
    if over and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
