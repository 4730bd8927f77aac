"""The conformance suite over every discovered spec (built-in ones and the test fixtures).

One test per check: ``zoo check --all`` runs the same checks outside pytest.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from registry.catalog import Catalog
from registry.conformance import Check, run_check, checks_for
from registry.pytest_plugin import record_check_cpu

FIXTURES = Path(__file__).parent / "fixtures" / "specs"


def _all_checks() -> list[Check]:
    cat = Catalog()
    cat.add_path(FIXTURES, origin="test fixtures")
    # slow checks are generated too: they carry the `slow` marker, so only `pytest -m slow` runs them
    return [c for e in [*cat.entries(), *cat.broken()] for c in checks_for(e, slow=True)]


CHECKS = _all_checks()


@pytest.mark.parametrize(
    "check", [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in CHECKS]
)
def test_conformance(check: Check, request: pytest.FixtureRequest) -> None:
    """One conformance check; its CPU seconds go to the per-spec budget (registry.pytest_plugin)."""
    status, message, _ = run_check(check)
    record_check_cpu(request.node, check)
    if status == "SKIP":
        pytest.skip(message)
    assert status == "PASS", message


def test_every_builtin_spec_is_checked() -> None:
    cat = Catalog()
    builtin = [e for e in cat.entries() if e.origin.startswith("entry point builtin")]
    assert not [b for b in cat.broken()], [str(b.error) for b in cat.broken()]
    checked = {c.spec for c in CHECKS}
    assert {e.name for e in builtin} <= checked
