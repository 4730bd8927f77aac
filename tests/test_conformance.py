"""The conformance suite over every discovered spec (built-in ones and the test fixtures).

One test per check: ``zoo check --all`` runs the same checks outside pytest.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from registry.catalog import Catalog
from registry import conformance
from registry.conformance import Check, run_check, checks_for

FIXTURES = Path(__file__).parent / "fixtures" / "specs"


def _all_checks() -> list[Check]:
    cat = Catalog()
    cat.add_path(FIXTURES, origin="test fixtures")
    # slow checks are generated too: they carry the `slow` marker, so only `pytest -m slow` runs them
    return [c for e in [*cat.entries(), *cat.broken()] for c in checks_for(e, slow=True)]


CHECKS = _all_checks()
SPECS = list(dict.fromkeys(c.spec for c in CHECKS))
# CPU seconds spent on each spec's default checks in this process, and how many ran
_SPENT: dict[str, float] = {}
_RAN: dict[str, int] = {}


def _params() -> list[object]:
    """Each spec's checks, then its budget item, in one xdist group: with ``-n 2 --dist loadgroup``
    a spec's checks run on one worker, in order, sharing its built pipeline, and the budget item
    sees all of them."""
    out: list[object] = []
    for spec in SPECS:
        group = pytest.mark.xdist_group(spec)
        out += [pytest.param(c, id=c.id, marks=[group, *([pytest.mark.slow] if c.slow else [])]) for c in CHECKS if c.spec == spec]
        out.append(pytest.param(spec, id=f"{spec}::budget", marks=[group]))
    return out


@pytest.mark.parametrize("check", _params())
def test_conformance(check: Check | str) -> None:
    if isinstance(check, str):  # the budget item: after every default check of the spec
        _budget(check)
        return
    status, message, _ = run_check(check)
    if not check.slow:
        _SPENT[check.spec] = _SPENT.get(check.spec, 0.0) + conformance.LAST_CPU
        _RAN[check.spec] = _RAN.get(check.spec, 0) + 1
    if status == "SKIP":
        pytest.skip(message)
    assert status == "PASS", message


def _budget(spec: str) -> None:
    """Invariant: a spec's default (non-slow) checks cost at most the budget (``ZOO_CHECK_BUDGET``,
    default 20 CPU seconds), so the default suite keeps its time as specs are added."""
    expected = sum(1 for c in CHECKS if c.spec == spec and not c.slow)
    if _RAN.get(spec, 0) < expected:
        pytest.skip(f"{spec}: {_RAN.get(spec, 0)} of its {expected} default checks ran in this process (-k/-m or another worker)")
    budget = conformance.budget_seconds()
    assert _SPENT[spec] <= budget, f"{spec}: default checks took {_SPENT[spec]:.1f} s CPU, over the {budget:g} s budget"


def test_every_builtin_spec_is_checked() -> None:
    cat = Catalog()
    builtin = [e for e in cat.entries() if e.origin.startswith("entry point builtin")]
    assert not [b for b in cat.broken()], [str(b.error) for b in cat.broken()]
    checked = {c.spec for c in CHECKS}
    assert {e.name for e in builtin} <= checked
