"""Error hierarchy of the engine.

Every error a user can cause is a :class:`ZooError`. Its ``str()`` is one printable line
(control characters from a spec are escaped by :func:`printable`), shaped
``file:line:col: field.path: message`` when a location is known, so the CLI can print it
as is and exit 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def printable(text: str) -> str:
    """``text`` with every character that is not printable (control characters such as ESC,
    newlines, tabs, bidi overrides, line separators) written as a Python escape (``\\x1b``,
    ``\\n``, ``\\u202e``), so text from a spec can never move the cursor, recolour the terminal
    or start a fake line. Printable text, non-ASCII included, is returned unchanged."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


@dataclass(frozen=True)
class Location:
    """Where in a spec file a problem sits (1-based line/column, dotted field path)."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    field: str | None = None

    def prefix(self) -> str:
        parts: list[str] = []
        if self.file:
            where = printable(str(self.file))
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            parts.append(where)
        if self.field:
            parts.append(printable(str(self.field)))
        return ": ".join(parts)


class ZooError(Exception):
    """Base of every error a user can cause; ``str()`` is a single line."""

    def __init__(self, message: str, location: Location | None = None):
        # always one printable line: whitespace runs (newlines too) become one space, the rest is escaped
        self.message = printable(" ".join(str(message).split()))
        self.location = location or Location()
        super().__init__(self.__str__())

    def __str__(self) -> str:
        prefix = self.location.prefix()
        return f"{prefix}: {self.message}" if prefix else self.message


class SpecError(ZooError):
    """A spec file is malformed: bad YAML, unknown field, wrong type, ..."""


class SpecErrors(SpecError):
    """All problems of one file at once; ``str()`` is the first, ``lines()`` all of them."""

    def __init__(self, errors: list[SpecError]):
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.message, first.location)

    def lines(self) -> list[str]:
        return [str(e) for e in self.errors]

    def __str__(self) -> str:
        first = str(self.errors[0])
        more = len(self.errors) - 1
        return first + (f" (and {more} more problem{'s' if more > 1 else ''} in this file)" if more else "")


class NotFoundError(ZooError):
    """No spec of that name is known."""


class CollisionError(SpecError):
    """Two spec files declare the same name."""


class ResolveError(ZooError):
    """A ``module:attr`` target in a spec cannot (or may not) be imported."""


class BuildError(ZooError):
    """A model or sampler could not be built (missing weights, sha256 mismatch, offline, ...)."""


class HardwareError(BuildError):
    """The requested variant does not fit this machine."""


class RequirementError(BuildError):
    """A package named in the spec's ``requires`` is missing or of the wrong version."""


class ParamError(ZooError):
    """A sampler or runner parameter is invalid."""


class RunError(ZooError):
    """A built pipeline failed while running (bad input, a size too large, ...)."""


class SampleError(ZooError):
    """``zoo sample`` / ``read_samples``: an output folder, manifest or shard is not what the run needs."""


def validation_error(exc: Any, model: type, where: Any, from_caller: set[str] | frozenset[str] = frozenset()) -> ParamError:
    """The first problem of a params validation (a pydantic ``ValidationError``) as a located one-line ParamError; ``where(field)``
    locates a spec field, ``from_caller`` names keys that came from the caller, not the spec."""
    err = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in err["loc"])
    loc = Location(None, None, None, f"parameter {field}") if err["loc"] and err["loc"][0] in from_caller else where(field)
    if err["type"] == "extra_forbidden":
        import difflib

        names = list(getattr(model, "model_fields", {}))
        close = difflib.get_close_matches(str(err["loc"][-1]), names, n=1, cutoff=0.6) if err["loc"] else []
        listed = f"expected one of: {', '.join(names) or 'none'}"
        msg = f"unknown parameter; did you mean {close[0]!r}? ({listed})" if close else f"unknown parameter; {listed}"
    else:
        msg = f"{err['msg']} (got {err.get('input')!r})"
    return ParamError(msg, loc)


def one_line_import_error(exc: BaseException) -> str:
    """``Type: message`` of an import-time failure, on one line and short."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


class ZooDeprecationWarning(DeprecationWarning):
    """A spec (or engine) spelling of an earlier release that still works for one release: its message is one line,
    ``file:line:col: old_name is deprecated, write new_name`` for a spec key."""


class Skipped(Exception):
    """A check that cannot run here; reported as SKIP with its reason, never as a pass."""
