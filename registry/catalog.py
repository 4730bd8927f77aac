"""Discovery and listing of specs: built-in and plugin packages (entry-point group
``zoo.specs``), folders added at run time (:func:`Catalog.add_path`, ``ZOO_SPECS_PATH``).

Listing and validation import no torch/transformers/diffusers/timm. Broken specs are kept
and reported (``zoo list``, ``zoo doctor``), never skipped silently; two files declaring the
same name are an error naming both.

Listing reads a small index cache (``$ZOO_CACHE_DIR`` or ``~/.cache/zoo``) of each file's
header (name, task, tags, variants, accelerators, or its error), keyed by path, content
hash and a fingerprint of the schema code: a warm ``zoo list`` parses no YAML and imports no
pydantic. Any change to a file re-validates it. ``ZOO_NO_INDEX_CACHE=1`` turns it off.
"""
from __future__ import annotations

import fnmatch
import os
import re
import threading
from pathlib import Path

from typing import TYPE_CHECKING, Any

from .errors import CollisionError, Location, NotFoundError, SpecError

if TYPE_CHECKING:
    from .spec import Spec

SPECS_GROUP = "zoo.specs"


class Entry:
    """One spec file: its header (for listing), its validated spec (loaded on first use), or
    the error that makes it unusable."""

    def __init__(self, path: Path, origin: str, spec: "Spec | None" = None, error: SpecError | None = None,
                 header: dict[str, Any] | None = None):
        self.path, self.origin, self.error = path, origin, error
        self._spec = spec
        self.header = header if header is not None else (_header(spec) if spec is not None else None)

    @property
    def spec(self) -> "Spec | None":
        if self._spec is None and self.error is None:
            from .loader import load_spec_file

            try:
                self._spec = load_spec_file(self.path)
            except SpecError as exc:  # the file changed since it was indexed
                self.error = exc
        return self._spec

    @property
    def name(self) -> str:
        if self.header is not None:
            return str(self.header["name"])
        return self.path.stem

    def __repr__(self) -> str:
        return f"Entry({self.name!r}, {str(self.path)!r}, {'broken' if self.error else 'ok'})"


def _header(spec: "Spec") -> dict[str, Any]:
    return {
        "name": spec.name, "title": spec.title, "task": spec.task, "tags": list(spec.tags),
        "variants": list(spec.variants), "accelerators": sorted({h.accelerator for h in spec.hardware.values()}),
        "status": {v: h.status for v, h in spec.hardware.items() if h.status != "runnable"},
    }


def _fingerprint() -> str:
    import hashlib

    here = Path(__file__).parent
    h = hashlib.sha1()
    for name in ("spec.py", "loader.py", "catalog.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


class _IndexCache:
    """Headers of validated files, persisted between processes (best effort, atomic writes)."""

    def __init__(self) -> None:
        self.enabled = os.environ.get("ZOO_NO_INDEX_CACHE", "") in ("", "0")
        root = os.environ.get("ZOO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "zoo")
        self.file = Path(root) / "spec-index.json"
        self.fingerprint = _fingerprint() if self.enabled else ""
        self.data: dict[str, Any] = {}
        self.dirty = False
        if self.enabled:
            import json

            try:
                raw = json.loads(self.file.read_text())
                if raw.get("fingerprint") == self.fingerprint:
                    self.data = raw.get("files", {})
            except (OSError, ValueError):
                pass

    @staticmethod
    def key(path: Path, _seen: frozenset[Path] = frozenset()) -> str:
        """Content hash (mtimes can tie within a filesystem tick), including the files an
        ``extends:`` line inherits from, so editing a parent re-validates its children."""
        import hashlib
        import re

        raw = path.read_bytes()
        h = hashlib.sha1(raw)
        match = re.search(rb"^extends:\s*['\"]?([^'\"\s#]+)", raw, re.MULTILINE)
        if match:
            parent = (path.parent / match.group(1).decode("utf-8", "replace")).resolve()
            if parent.is_file() and parent not in _seen:
                h.update(_IndexCache.key(parent, _seen | {path}).encode())
        return h.hexdigest()

    def get(self, path: Path, key: str) -> dict[str, Any] | None:
        hit = self.data.get(str(path))
        return hit if hit and hit.get("sha1") == key else None

    def put(self, path: Path, key: str, header: dict[str, Any] | None, error: SpecError | None) -> None:
        if not self.enabled:
            return
        err = None
        if error is not None and not isinstance(error, CollisionError):
            loc = error.location
            err = {"message": error.message, "file": loc.file, "line": loc.line, "column": loc.column, "field": loc.field}
        self.data[str(path)] = {"sha1": key, "header": header, "error": err}
        self.dirty = True

    def save(self) -> None:
        if not (self.enabled and self.dirty):
            return
        import json
        import tempfile

        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"fingerprint": self.fingerprint, "files": self.data}, f)
            os.replace(tmp, self.file)
            self.dirty = False
        except OSError:
            pass


def _natural(s: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


class Catalog:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._dirs: list[tuple[Path, str]] = []
        self._entries: dict[str, Entry] | None = None
        self._broken: list[Entry] = []
        self._collisions: dict[str, CollisionError] = {}

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
            collisions: dict[str, CollisionError] = {}
            seen_files: set[Path] = set()
            cache = _IndexCache()
            for root, origin in self._sources():
                for f in self._files(root):
                    rf = f.resolve()
                    if rf in seen_files:
                        continue
                    seen_files.add(rf)
                    entry = self._read(rf, origin, cache)
                    if entry.error is not None:
                        broken.append(entry)
                        continue
                    other = entries.get(entry.name)
                    if other is not None:
                        err = CollisionError(
                            f"spec name {entry.name!r} is declared by both {other.path} and {rf}",
                            Location(str(rf), None, None, "name"),
                        )
                        collisions.setdefault(entry.name, err)
                        broken.append(Entry(rf, origin, error=err))
                        continue
                    entries[entry.name] = entry
            cache.save()
            self._entries, self._broken, self._collisions = entries, broken, collisions
            return entries

    @staticmethod
    def _read(path: Path, origin: str, cache: _IndexCache) -> Entry:
        key = cache.key(path)
        hit = cache.get(path, key)
        if hit is not None:
            if hit["error"] is not None:
                e = hit["error"]
                return Entry(path, origin, error=SpecError(e["message"], Location(e["file"], e["line"], e["column"], e["field"])))
            return Entry(path, origin, header=hit["header"])
        from .loader import load_spec_file

        try:
            entry = Entry(path, origin, spec=load_spec_file(path))
        except SpecError as exc:
            entry = Entry(path, origin, error=exc)
        cache.put(path, key, entry.header, entry.error)
        return entry

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
            if name in self._collisions:
                raise self._collisions[name]
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
            h = e.header
            assert h is not None
            if not any(fnmatch.fnmatchcase(h["name"], p) for p in pats):
                continue
            if any(fnmatch.fnmatchcase(h["name"], p) for p in excl):
                continue
            if task and h["task"] != task:
                continue
            if want_tags and not all(t in h["tags"] for t in want_tags):
                continue
            if fits and not any(a in (fits, "any") or (a == "cpu" and fits == "cuda") for a in h["accelerators"]):
                continue
            out.append(h["name"])
        return out
