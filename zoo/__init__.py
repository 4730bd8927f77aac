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
    from collections.abc import Iterator, Mapping

    from registry.build import Pipeline
    from registry.results import ProcedureOutput
    from registry.sampling import SampleReport
    from registry.spec import Spec

__version__ = "0.1.0"
__all__ = ["ZooError", "add_specs", "catalog", "entry", "iter_samples", "list", "load", "read_samples", "sample", "spec"]

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
    from registry.context import build_pipeline

    if _saved_folder(name):
        from registry.context import load_saved

        return load_saved(name, variant=variant, device=device, dtype=dtype, sampler=sampler, params=params)
    e = entry(name)
    assert e.spec is not None
    return build_pipeline(
        e.spec, file=e.path, variant=variant, device=device, dtype=dtype, sampler=sampler,
        trust_remote_code=trust_remote_code, params=params,
    )


def sample(
    name: str,
    num_samples: int,
    out: str | os.PathLike[str],
    *,
    batch_size: int = 16,
    seed: int = 0,
    variant: str | None = None,
    sampler: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    shard_size: int | None = None,
    exact: bool = False,
    progress: bool = True,
    trust_remote_code: bool = False,
    _cli: bool = False,
    **params: Any,
) -> SampleReport:
    """Write rows ``0 .. num_samples - 1`` of ``name``'s sampler to the folder ``out`` in verified shards
    (``manifest.json`` + safetensors / JSON Lines), row ``i`` seeded from ``(seed, i)`` alone; re-running it
    resumes (kept shards are verified, missing or corrupt ones redone). Under ``torchrun`` every process calls
    it and takes its share of the shards. ``shard_size`` (default: ``batch_size``, or the folder's) rows per
    shard; ``exact``: one sampler call per row (a row's bytes then never depend on ``batch_size``, even for a
    batched network); ``params`` override the sampler's parameters as for :func:`load`. See :mod:`registry.sampling`
    (``_cli``: name the options as ``zoo sample``'s flags in errors)."""
    from registry.context import build_pipeline
    from registry.sampling import run_sample

    e = entry(name)
    assert e.spec is not None
    spec_ = e.spec

    def build(dev: str | None) -> Pipeline:
        return build_pipeline(spec_, file=e.path, variant=variant, device=dev, dtype=dtype, sampler=sampler,
                              trust_remote_code=trust_remote_code, params=params)

    return run_sample(spec_, build, num_samples=num_samples, out=out, batch_size=batch_size, seed=seed, sampler=sampler,
                      variant=variant, device=device, shard_size=shard_size, exact=exact, progress=progress,
                      cli=_cli)


def _import_output_class(manifest: Mapping[str, Any]) -> None:
    """Import the module of a run's procedure the way a build does: the spec from the catalog (never from
    the manifest's say), its sampler's target through the allowlisting resolver."""
    from registry.resolve import resolve

    run = manifest.get("run") or {}
    try:
        s = spec(str(run.get("spec")))
        resolve(s.procedure(str(run.get("sampler")))[1].target, kind="procedure")
    except (ZooError, KeyError):
        return


def iter_samples(out: str | os.PathLike[str]) -> Iterator[tuple[range, ProcedureOutput]]:
    """``(rows, output)`` per shard of a ``zoo sample`` folder, in row order, every shard's sha256 verified
    before it is read: for populations too large to hold at once (one shard in memory)."""
    from registry.sampling import iter_samples as impl

    return impl(out, _import_output_class)


def read_samples(out: str | os.PathLike[str]) -> ProcedureOutput:
    """Every row of a ``zoo sample`` folder, in order, as one typed output with the fields a call of its
    sampler returns (tensors concatenated along dim 0, lists joined); every shard's sha256 verified."""
    from registry.sampling import read_samples as impl

    return impl(out, _import_output_class)
