"""A spec's card (``docs:``): one path base, the folder of the spec file that wrote it, confined to the spec's
folder tree and the shipped cards (``zoo report`` publishes the file). Read by ``zoo validate`` (lint) and
``zoo report``."""
from __future__ import annotations

import os
from pathlib import Path

from .catalog import package_dirs
from .files import within
from .loader import spec_roots


def shipped_docs() -> Path | None:
    """The shipped cards' folder (the one holding ``methods/``): the ``zoo_docs`` data package of a wheel, else the
    ``docs/`` folder beside an editable install's ``specs/`` (located without importing anything)."""
    dirs = [Path(d) for d in package_dirs("zoo_docs")]
    dirs += [Path(d).resolve().parent / "docs" for d in package_dirs("zoo_specs")]
    return next((d for d in dirs if (d / "methods").is_dir()), None)


def card_path(spec_file: str | os.PathLike[str], docs: str, folder: str | os.PathLike[str] | None = None) -> tuple[Path | None, str]:
    """A spec's card, ``docs:`` resolved against ``folder``, the folder of the spec file that wrote it (default:
    ``spec_file``'s; a parent's when inherited through ``extends:``), and ``""``; or ``None``
    and why not. The card must lie inside the spec's folder tree (``$ZOO_SPEC_ROOT`` allows more) or among the
    shipped cards, and be a regular file: ``zoo report`` publishes it, so a spec may not point it anywhere else.
    A built-in spec installed from a wheel (where ``zoo_specs/../docs`` does not exist) finds its card of the
    same base name among the shipped cards."""
    base = Path(folder) if folder is not None else Path(spec_file).parent
    here = base / docs
    shipped = shipped_docs()
    roots = (*spec_roots(spec_file), base.resolve(), *((shipped,) if shipped is not None else ()))
    inside = any(within(r, here) for r in roots)
    if inside and here.is_file():
        return here.resolve(), ""
    parts = Path(docs).parts
    alt = None
    if shipped is not None and "docs" in parts:  # ../docs/common/README.md -> <shipped cards>/common/README.md
        rest = parts[len(parts) - 1 - parts[::-1].index("docs") + 1:]
        alt = shipped.joinpath(*rest) if rest and ".." not in rest else None
    elif shipped is not None and "methods" in parts:
        alt = shipped / "methods" / Path(docs).name
    if alt is not None and not within(shipped, alt):
        alt = None
    if alt is not None and alt.is_file():
        return alt.resolve(), ""
    if not inside:
        return None, f"card {docs} is outside the spec's folder tree and the shipped cards (ZOO_SPEC_ROOT allows more)"
    return None, f"card {docs} does not exist (resolved against {base})"
