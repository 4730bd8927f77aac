"""Where spec files come from, found without importing any plugin or pydantic: the ``zoo.specs`` entry points'
package folders (sorted by name, so the built-ins first), ``$ZOO_SPECS_PATH``, then the caller's folders; and a
source's candidate files. The catalog (:mod:`registry.catalog`) indexes them; the loader (:mod:`registry.loader`)
looks a spec up by name through them for ``extends:`` and ``from_spec:``."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import Location, SpecError, one_line_import_error

SPECS_GROUP = "zoo.specs"


def package_dirs(module: str) -> list[str]:
    """The folders of package ``module`` ("pkg.specs"), found on ``sys.path`` without importing it or
    its parents: ``importlib.util.find_spec("pkg.specs")`` imports ``pkg`` (its ``__init__`` may
    import torch), which made ``zoo list`` take 10-16 s with a plugin installed."""
    import sys
    from importlib.machinery import PathFinder
    from importlib.util import find_spec

    loaded = sys.modules.get(module)
    if loaded is not None:
        return list(getattr(loaded, "__path__", []) or [])
    top, *rest = module.split(".")
    try:
        found = find_spec(top)  # a top-level name is located, not imported (any finder: editable installs too)
    except (ImportError, ValueError):
        return []
    for part in rest:
        if found is None or found.submodule_search_locations is None:
            return []
        found = PathFinder.find_spec(part, list(found.submodule_search_locations))
    if found is None or found.submodule_search_locations is None:
        return []
    return list(found.submodule_search_locations)


def spec_sources(extra: list[tuple[Path, str]] = ()) -> tuple[list[tuple[Path, str]], list[tuple[Path, str, SpecError]]]:
    """``(sources, errors)``: every ``(folder or file, origin)`` specs are read from, in discovery order (the
    ``zoo.specs`` entry points sorted by name, ``$ZOO_SPECS_PATH``, then ``extra``); and for each entry point
    whose package cannot be located, ``(its value, origin, one-line SpecError)`` (a BROKEN line, never a crash)."""
    from importlib.metadata import entry_points

    out: list[tuple[Path, str]] = []
    errors: list[tuple[Path, str, SpecError]] = []
    for ep in sorted(entry_points(group=SPECS_GROUP), key=lambda e: e.name):
        origin = f"entry point {ep.name} ({ep.value})"
        try:
            dirs = package_dirs(ep.value)
            if not dirs:
                raise ModuleNotFoundError(f"no package folder for {ep.value!r}")
        except Exception as exc:  # noqa: BLE001 - arbitrary errors of a third-party package
            err = SpecError(f"{SPECS_GROUP} {origin} cannot be imported: {one_line_import_error(exc)}",
                            Location(None, None, None, f"plugin {ep.name}"))
            errors.append((Path(ep.value), origin, err))
            continue
        for loc in dirs:
            out.append((Path(loc), origin))
    for raw in os.environ.get("ZOO_SPECS_PATH", "").split(os.pathsep):
        if raw.strip():
            out.append((Path(raw).expanduser().resolve(), "ZOO_SPECS_PATH"))
    return out + list(extra), errors


def source_files(path: Path) -> list[Path]:
    """Candidate spec files of a source: the file itself, or a folder's ``*.yaml``/``*.yml``
    entries whatever they are (directories, FIFOs, dangling links are reported, not opened)."""
    try:
        if not path.is_dir():
            return [path] if os.path.lexists(path) else []
        return sorted(p for p in path.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
    except (OSError, ValueError):
        return []
