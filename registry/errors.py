"""Error hierarchy of the engine.

Every error a user can cause is a :class:`ZooError`. Its ``str()`` is one line, shaped
``file:line:col: field.path: message`` when a location is known, so the CLI can print it
as is and exit 2.
"""
from __future__ import annotations

from dataclasses import dataclass


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
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            parts.append(where)
        if self.field:
            parts.append(self.field)
        return ": ".join(parts)


class ZooError(Exception):
    """Base of every error a user can cause; ``str()`` is a single line."""

    def __init__(self, message: str, location: Location | None = None):
        self.message = " ".join(str(message).split())  # always one line
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
