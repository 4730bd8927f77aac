"""Discovery and listing of specs: built-in and plugin packages (entry-point group
``zoo.specs``), folders added at run time (:func:`Catalog.add_path`, ``ZOO_SPECS_PATH``).

Listing and validation import no torch/transformers/diffusers/timm. Broken specs are kept
and reported (``zoo list``, ``zoo doctor``), never skipped silently; two files declaring the
same name are an error naming both.
"""
from __future__ import annotations

import fnmatch
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from .errors import CollisionError, Location, NotFoundError, SpecError
from .loader import load_spec_file
from .spec import Spec

SPECS_GROUP = "zoo.specs"


@dataclass(frozen=True)
class Entry:
    """One spec file: its validated spec, or the error that makes it unusable."""

    path: Path
    origin: str
    spec: Spec | None = None
    error: SpecError | None = None

    @property
    def name(self) -> str:
        return self.spec.name if self.spec else self.path.stem


def _natural(s: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


class Catalog:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._dirs: list[tuple[Path, str]] = []
        self._entries: dict[str, Entry] | None = None
        self._broken: list[Entry] = []
        self._collisions: list[CollisionError] = []

    # ------------------------------------------------------------------ sources
    def add_path(self, path: str | os.PathLike[str], origin: str = "user") -> None:
        p = Path(path).expanduser().resolve()
        if not p.exists():
            raise SpecError("no such file or directory", Location(str(p)))
        with self._lock:
            if all(d != p for d, _ in self._dirs):
                self._dirs.append((p, origin))
            self._entries = None

    def _sources(self) -> list[tuple[Path, str]]:
        out: list[tuple[Path, str]] = []
        from importlib.metadata import entry_points
        from importlib.util import find_spec

        for ep in sorted(entry_points(group=SPECS_GROUP), key=lambda e: e.name):
            found = find_spec(ep.value)
            locations = list(found.submodule_search_locations or []) if found else []
            for loc in locations:
                out.append((Path(loc), f"entry point {ep.name} ({ep.value})"))
        for raw in os.environ.get("ZOO_SPECS_PATH", "").split(os.pathsep):
            if raw.strip():
                out.append((Path(raw).expanduser().resolve(), "ZOO_SPECS_PATH"))
        return out + list(self._dirs)

    @staticmethod
    def _files(path: Path) -> list[Path]:
        if path.is_file():
            return [path]
        if not path.is_dir():
            return []
        return sorted(p for p in path.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))

    # ------------------------------------------------------------------ index
    def _index(self) -> dict[str, Entry]:
        with self._lock:
            if self._entries is not None:
                return self._entries
            entries: dict[str, Entry] = {}
            broken: list[Entry] = []
            collisions: list[CollisionError] = []
            seen_files: set[Path] = set()
            for root, origin in self._sources():
                for f in self._files(root):
                    rf = f.resolve()
                    if rf in seen_files:
                        continue
                    seen_files.add(rf)
                    try:
                        entry = Entry(rf, origin, spec=load_spec_file(rf))
                    except SpecError as exc:
                        broken.append(Entry(rf, origin, error=exc))
                        continue
                    other = entries.get(entry.name)
                    if other is not None:
                        err = CollisionError(
                            f"spec name {entry.name!r} is declared by both {other.path} and {rf}",
                            Location(str(rf), None, None, "name"),
                        )
                        collisions.append(err)
                        broken.append(Entry(rf, origin, error=err))
                        continue
                    entries[entry.name] = entry
            self._entries, self._broken, self._collisions = entries, broken, collisions
            return entries

    def refresh(self) -> None:
        with self._lock:
            self._entries = None

    # ------------------------------------------------------------------ queries
    def entries(self) -> list[Entry]:
        return sorted(self._index().values(), key=lambda e: _natural(e.name))

    def broken(self) -> list[Entry]:
        self._index()
        return list(self._broken)

    def get(self, name: str) -> Entry:
        idx = self._index()
        if name in idx:
            for c in self._collisions:
                if f"{name!r}" in c.message:
                    raise c
            return idx[name]
        import difflib

        close = difflib.get_close_matches(name, list(idx), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(idx)) or 'none'}"
        for b in self._broken:
            if b.name == name:
                raise b.error  # type: ignore[misc]
        raise NotFoundError(f"no spec named {name!r}{hint}")

    def list(
        self,
        pattern: str | list[str] = "*",
        *,
        task: str | None = None,
        tags: list[str] | str | None = None,
        fits: str | None = None,
        exclude: str | list[str] | None = None,
    ) -> list[str]:
        """Names matching fnmatch ``pattern`` (and ``task``, all ``tags``, an accelerator ``fits``)."""
        pats = [pattern] if isinstance(pattern, str) else list(pattern)
        excl = [exclude] if isinstance(exclude, str) else list(exclude or [])
        want_tags = [tags] if isinstance(tags, str) else list(tags or [])
        out = []
        for e in self.entries():
            s = e.spec
            assert s is not None
            if not any(fnmatch.fnmatchcase(s.name, p) for p in pats):
                continue
            if any(fnmatch.fnmatchcase(s.name, p) for p in excl):
                continue
            if task and s.task != task:
                continue
            if want_tags and not all(t in s.tags for t in want_tags):
                continue
            if fits and not any(h.accelerator in (fits, "any") or (h.accelerator == "cpu" and fits == "cuda") for h in s.hardware.values()):
                continue
            out.append(s.name)
        return out
