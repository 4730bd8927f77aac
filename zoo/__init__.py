"""Zoo: a declarative model zoo for the generative-modelling methods of ICML 2026.

    >>> import zoo
    >>> zoo.list("*dpm*")                 # names only; imports no torch
    >>> pipe = zoo.load("poe-bridge")     # the variant this machine can run
    >>> pipe("12+34=", seed=0)

Specs are discovered from installed packages (entry-point group ``zoo.specs``), from
``ZOO_SPECS_PATH`` and from folders added with :func:`add_specs`.
"""
from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

from registry.catalog import Catalog, Entry
from registry.errors import ZooError

if TYPE_CHECKING:
    from registry.build import Pipeline
    from registry.spec import Spec

__version__ = "0.1.0"
__all__ = ["ZooError", "add_specs", "catalog", "entry", "list", "load", "spec"]

_catalog = Catalog()


def catalog() -> Catalog:
    """The process-wide catalog used by the functions below."""
    return _catalog


def add_specs(path: str | os.PathLike[str]) -> builtins.list[str]:
    """Add a spec file or a folder of ``*.yaml`` specs; returns the names it contributes."""
    _catalog.add_path(path)
    root = Path(path).expanduser().resolve()
    return [e.name for e in _catalog.entries() if e.path == root or root in e.path.parents]


def list(  # noqa: A001 - the public name users expect (timm.list_models, zoo.list)
    pattern: str | builtins.list[str] = "*",
    task: str | None = None,
    tags: builtins.list[str] | str | None = None,
    fits: str | None = None,
    exclude: str | builtins.list[str] | None = None,
) -> builtins.list[str]:
    """Spec names matching an fnmatch ``pattern``, a ``task``, all ``tags`` and a device ``fits``."""
    return _catalog.list(pattern, task=task, tags=tags, fits=fits, exclude=exclude)


def _saved_folder(name_or_path: str | os.PathLike[str]) -> bool:
    """Whether ``name_or_path`` names a folder written by ``Pipeline.save_pretrained``. A bare word that is both a
    catalogued spec's name and such a folder in the working directory is ambiguous: one error, never a guess."""
    from registry.saved import is_saved

    text = os.fspath(name_or_path)
    if not is_saved(text):
        return False
    if isinstance(name_or_path, str) and os.sep not in text and not text.startswith(".") and text in _catalog.list():
        raise ZooError(f"{text!r} is both a spec name and a saved pipeline folder here; write ./{text} for the folder")
    return True


def entry(name_or_path: str | os.PathLike[str]) -> Entry:
    """The catalog entry of a spec name, a spec file path (validated, not added), or a saved pipeline's folder."""
    text = os.fspath(name_or_path)
    from registry.saved import SPEC_FILE

    if _saved_folder(name_or_path):  # a saved pipeline's folder: checked as untrusted input first
        from registry.loader import load_spec_file
        from registry.saved import verify_folder

        verify_folder(text)
        p = Path(text).expanduser().resolve() / SPEC_FILE
        return Entry(p, "saved pipeline", spec=load_spec_file(p))
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        from registry.loader import load_spec_file

        p = Path(text).expanduser().resolve()
        return Entry(p, "file", spec=load_spec_file(p))
    return _catalog.get(text)


def spec(name: str) -> Spec:
    """The validated spec of ``name`` (or of a spec file path)."""
    e = entry(name)
    if e.spec is None:
        assert e.error is not None
        raise e.error
    return e.spec


def load(
    name: str | os.PathLike[str],
    variant: str | None = None,
    device: str | None = None,
    dtype: Any = None,
    sampler: str | None = None,
    *,
    trust_remote_code: bool = False,
    **params: Any,
) -> Pipeline:
    """Build the pipeline of ``name`` (a spec name, a spec file, or a folder written by
    ``Pipeline.save_pretrained``): the first declared variant that fits this machine (or ``variant``), on
    ``device``, in ``dtype`` (a name or a ``torch.dtype``); ``params`` override the default sampler's
    parameters. ``trust_remote_code`` must be given here *and* allowed by the spec (never for a saved folder)."""
    from registry.build import build_pipeline

    if _saved_folder(name):
        from registry.saved import load as load_saved

        return load_saved(name, variant=variant, device=device, dtype=dtype, sampler=sampler, params=params)
    e = entry(name)
    assert e.spec is not None
    return build_pipeline(
        e.spec, file=e.path, variant=variant, device=device, dtype=dtype, sampler=sampler,
        trust_remote_code=trust_remote_code, params=params,
    )
