"""A spec's ``requires`` against what is installed, and how to install what is missing.

An unmet requirement is not a failure of the method: ``zoo check`` reports the checks that need it as
SKIP with the command that installs it, ``zoo run`` / ``zoo.load`` refuse in one line naming it, and
``zoo doctor`` lists it (``needs: xgboost-cpu (extra trees)``). When the distribution that ships the
spec's implementation declares the package in one of its optional extras (``pyproject.toml``'s
``[project.optional-dependencies]``, read from the installed package metadata, never from a table
here), the command installs that extra (``pip install "zoo-icml2026[trees]"``); otherwise the
package itself (``pip install "foo>=2"``). Nothing here imports the required packages.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class Unmet:
    """One ``requires`` entry this environment does not satisfy."""

    package: str
    specifier: str
    installed: str | None  # the installed version, None when not installed
    extra: str | None  # the optional extra of ``distribution`` that installs it
    distribution: str | None  # the distribution shipping the spec's implementation

    @property
    def pip(self) -> str:
        """The command that installs what is missing."""
        if self.extra and self.distribution:
            return f'pip install "{self.distribution}[{self.extra}]"'
        return f'pip install "{self.package}{self.specifier}"'

    @property
    def needs(self) -> str:
        """``xgboost-cpu (extra trees)``, or ``foo>=2`` when no extra provides it."""
        return f"{self.package} (extra {self.extra})" if self.extra else f"{self.package}{self.specifier}"

    def reason(self) -> str:
        """One line: what is needed, what is there, and the command."""
        have = "not installed" if self.installed is None else f"{self.installed} is installed"
        return f"needs {self.package}{self.specifier}" + (f" (extra {self.extra})" if self.extra else "") + f", {have}: {self.pip}"


def installed_version(package: str) -> str | None:
    """The installed version of distribution ``package`` (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


@lru_cache(maxsize=64)
def _distribution_of(top_package: str) -> str | None:
    """The installed distribution that ships the import package ``top_package`` (only computed when needed:
    ``packages_distributions`` walks every installed distribution)."""
    from importlib.metadata import packages_distributions

    dists = packages_distributions().get(top_package) or []
    return dists[0] if dists else None


@lru_cache(maxsize=64)
def extras_of(distribution: str) -> dict[str, tuple[str, ...]]:
    """``{canonical package name: extras that install it}`` from a distribution's metadata (``Requires-Dist``
    entries with an ``extra == "..."`` marker)."""
    from importlib.metadata import PackageNotFoundError, metadata

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        meta = metadata(distribution)
    except PackageNotFoundError:
        return {}
    extras = meta.get_all("Provides-Extra") or []
    out: dict[str, list[str]] = {}
    for line in meta.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None:
            continue
        for extra in extras:
            if req.marker.evaluate({"extra": extra}) and not req.marker.evaluate({"extra": ""}):
                out.setdefault(_canonical(req.name), []).append(extra)
    return {k: tuple(v) for k, v in out.items()}


def unmet(spec: Any) -> list[Unmet]:
    """The ``requires`` entries of ``spec`` not satisfied here, in spec order (installed versions are compared
    with pre-releases allowed)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    out: list[Unmet] = []
    for package, specifier in spec.requires.items():
        have = installed_version(package)
        try:
            ok = have is not None and SpecifierSet(specifier).contains(have, prereleases=True)
        except InvalidSpecifier:  # the schema refuses these; a Spec built in Python may not have been validated
            ok = False
        if ok:
            continue
        dist = _distribution_of(spec.implementation.split(".")[0])
        extras = extras_of(dist).get(_canonical(package), ()) if dist else ()
        out.append(Unmet(package, specifier, have, extras[0] if extras else None, dist if extras else None))
    return out
