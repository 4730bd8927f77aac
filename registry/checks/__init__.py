"""The conformance checks of a spec, one module per family, registered in a list (:data:`FAMILIES`):

* :mod:`.files` -- the spec validates, its ``requires`` hold, its shipped files match their sha256;
* :mod:`.build` -- every CPU variant builds; every hub-loaded role's loading path works on a tiny local checkpoint;
* :mod:`.procedures` -- every sampler/recipe bounds its sizes and keeps the contract (determinism, strict
  parameters, batch independence, ``zoo sample``'s population, ``produces``);
* :mod:`.invariants` -- each listed invariant is registered and passes;
* :mod:`.metrics` -- each cheap ``reproduced`` metric is re-measured within tolerance.

:func:`checks_for` is a loop over the registered families; :mod:`registry.conformance` runs the checks."""
from __future__ import annotations

from ..catalog import Entry
from .base import FAMILIES, Check, Skipped, SpecUnderCheck, Target, family

# importing a family module registers its families; the order of these lines is the order checks are listed and run
from . import files  # noqa: E402,I001  isort: skip
from . import build  # noqa: E402  isort: skip
from . import procedures  # noqa: E402  isort: skip
from . import invariants  # noqa: E402  isort: skip
from . import metrics  # noqa: E402  isort: skip

__all__ = ["FAMILIES", "Check", "Skipped", "SpecUnderCheck", "Target", "checks_for", "family"]

#: the checks that still run when an optional requirement is missing (they say what is missing)
_ALWAYS = ("::validates", "::requires")


def checks_for(entry: Entry, slow: bool = False, target: Target = Target(), allow_remote_code_stub: bool = False) -> list[Check]:
    """All conformance checks of one spec file (cheap to create; work happens when run): every registered
    family's, in registration order.

    ``allow_remote_code_stub`` is the caller's consent to load a ``trust_remote_code`` role's
    tiny, code-free checkpoint with ``trust_remote_code=True``; without it that check is SKIP.
    The spec's own ``trust_remote_code`` is never taken as consent."""
    if entry.spec is None:
        err = entry.error

        def broken() -> None:
            raise AssertionError(str(err))

        return [Check(entry.name, f"{entry.name}::validates", broken)]
    from ..requirements import unmet

    # an optional package that is not installed: every check that needs it is SKIP with the pip command
    missing = "; ".join(u.reason() for u in unmet(entry.spec))
    s = SpecUnderCheck(entry, slow=slow, target=target, allow_remote_code_stub=allow_remote_code_stub, missing=missing)
    checks = [c for fam in FAMILIES for c in fam(s)]
    if missing:
        for check in checks:
            if not check.id.endswith(_ALWAYS):

                def skip(why: str = missing) -> None:
                    raise Skipped(why)

                check.fn = skip
    return checks
