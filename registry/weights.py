"""Weights that are not a transformers/diffusers folder: one file (local, or inside a hub
repository), read safely and mapped to a factory's keys by a converter; PEFT adapters; and
whether a source's files are available without the network.

Formats: ``.safetensors`` (``safetensors.torch.load_file``) and ``.pt``/``.pth``/``.ckpt``
only through ``torch.load(weights_only=True)`` — a checkpoint that needs pickle globals is
refused, naming the file (https://pytorch.org/docs/stable/generated/torch.load.html).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import BuildError, Location
from .hardware import offline
from .spec import Adapter, HubFile, HubSource, ModelSource, RoleSource, TimmSource, ZooSource, looks_remote


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ----------------------------------------------------------------------------- files
def verified_file(rel: str, sha256: str, base: Path, loc: Location, allow_outside: bool | None = None,
                  what: str = "file") -> Path:
    """A file a spec names: ``rel`` resolved against ``base`` (the folder of the spec file that wrote it), inside
    that folder tree unless the caller allows more, present, and with exactly the declared ``sha256``."""
    from .build import local_path

    path = local_path(rel, base, loc, allow_outside, what)
    if not path.is_file():
        raise BuildError(f"{what} {path} does not exist (its spec's training: entry makes it: zoo train NAME)", loc)
    actual = sha256_file(path)
    if actual != sha256:
        raise BuildError(f"sha256 mismatch for {path.name}: expected {sha256}, file has {actual}", loc)
    return path


def hub_file(ref: HubFile, loc: Location) -> Path:
    """Path of a hub file in the local cache, downloaded unless offline (then cache only)."""
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(ref.hub, ref.filename, revision=ref.revision, repo_type=ref.repo_type,
                                    local_files_only=offline()))
    except Exception as exc:  # noqa: BLE001 - hub errors come in many types; one line
        where = " offline (HF_HUB_OFFLINE is set; the file is not in the local cache)" if offline() else ""
        msg = " ".join(str(exc).split())[:200]
        raise BuildError(f"could not fetch {ref.filename} from {ref.hub}@{ref.revision[:12] if ref.revision else '(unpinned)'}{where}: {msg}", loc) from None


def read_state(path: Path, sha256: str | None, loc: Location, sha_loc: Location | None = None) -> Any:
    """The verified contents of a weights file: a state dict (or, for torch files, whatever
    ``weights_only`` can rebuild: nested dicts/lists of tensors and plain values)."""
    if not path.is_file():
        raise BuildError(f"weights file {path} does not exist (its spec's training: entry makes it: zoo train NAME)", loc)
    if sha256 is not None:
        actual = sha256_file(path)
        if actual != sha256:
            raise BuildError(f"sha256 mismatch for {path.name}: expected {sha256}, file has {actual}", sha_loc or loc)
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise BuildError(f"weights {path.name} are not a readable safetensors file: {' '.join(str(exc).split())[:200]}", loc) from None
    if path.suffix in (".pt", ".pth", ".ckpt"):
        import pickle

        import torch

        try:
            return torch.load(str(path), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            first = " ".join(str(exc).split())[:160]
            raise BuildError(
                f"{path.name} needs pickle globals beyond tensors and plain containers, which could run code; "
                f"refused (torch.load weights_only=True: {first}). Convert it to safetensors", loc
            ) from None
        except (RuntimeError, OSError, EOFError, ValueError) as exc:
            raise BuildError(f"{path.name} is not a readable torch checkpoint: {' '.join(str(exc).split())[:200]}", loc) from None
    raise BuildError(f"{path.name}: unsupported weights format {path.suffix!r}", loc)


def flat_state(state: Any, what: str, loc: Location) -> dict[str, Any]:
    """Check that ``state`` is a flat ``{str: Tensor}`` mapping (what ``load_state_dict`` takes)."""
    import torch

    if not isinstance(state, Mapping):
        raise BuildError(f"{what} is a {type(state).__name__}, not a state dict; declare a convert: function", loc)
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise BuildError(f"{what} is not a flat state dict of tensors (e.g. key {bad[0]!r}); declare a convert: function", loc)
    return dict(state)


def convert_state(state: Any, convert: str | None, loc: Location) -> dict[str, Any]:
    """Apply the spec's converter (resolved as kind ``converter``) and check the result."""
    if convert is None:
        return flat_state(state, "the weights file", loc)
    from .resolve import resolve

    fn = resolve(convert, loc, kind="converter")
    try:
        out = fn(state)
    except Exception as exc:  # noqa: BLE001 - a converter may raise anything; one line
        raise BuildError(f"converter {convert} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}", loc) from None
    return flat_state(out, f"the output of {convert}", loc)


def inverse_converter(convert: str | None, loc: Location | None = None) -> Any:
    """The inverse of a converter (its ``inverse`` attribute), or the identity when there is none
    to invert; used by the conformance loading-path check."""
    if convert is None:
        return lambda state: state
    from .resolve import resolve

    fn = resolve(convert, loc, kind="converter")
    inv = getattr(fn, "inverse", None)
    if inv is None:
        raise AssertionError(f"converter {convert} has no .inverse, so its loading path cannot be tested offline")
    return inv


def save_state(state: Mapping[str, Any], path: Path) -> None:
    """Write a flat state dict in the format ``path``'s suffix names (the inverse of :func:`read_state`)."""
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    else:
        import torch

        torch.save(dict(state), str(path))


# ----------------------------------------------------------------------------- adapters
def adapter_folder(adapter: Adapter, spec_dir: Path, loc: Location, allow_outside: bool | None = None) -> Path:
    """Local folder holding the adapter's config and verified weights file (a local ``path`` stays
    inside the spec's folder unless the caller allows more)."""
    if adapter.path is not None:
        from .build import local_path

        folder = local_path(adapter.path, spec_dir, loc, allow_outside, "adapter folder")
    else:
        from huggingface_hub import hf_hub_download

        try:
            cfg = hf_hub_download(adapter.hub, "adapter_config.json", revision=adapter.revision, local_files_only=offline())
            hf_hub_download(adapter.hub, adapter.weight_name, revision=adapter.revision, local_files_only=offline())
        except Exception as exc:  # noqa: BLE001
            raise BuildError(f"could not fetch adapter {adapter.hub}: {' '.join(str(exc).split())[:200]}", loc) from None
        folder = Path(cfg).parent
    weights = folder / adapter.weight_name
    if not weights.is_file():
        raise BuildError(f"adapter weights {weights} do not exist", loc)
    actual = sha256_file(weights)
    if actual != adapter.sha256:
        raise BuildError(f"sha256 mismatch for adapter {adapter.adapter_name} ({weights.name}): expected {adapter.sha256}, file has {actual}", loc)
    return folder


def diffusers_lora_file(weights: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A LoRA file's tensors and LoRA config for a diffusers model's ``load_lora_adapter``.

    Two layouts: peft's ``save_pretrained`` (keys ``base_model.model.<module>.lora_A.weight``, config in
    ``adapter_config.json`` beside the file) and diffusers' ``save_lora_adapter`` (bare module keys, config
    in the safetensors header). Without the config diffusers infers ``lora_alpha = r`` from the shapes,
    which silently rescales a peft LoRA saved with another ``lora_alpha``, so the config is always passed."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file

    state = {k.removeprefix("base_model.model."): v for k, v in load_file(str(weights)).items()}
    with safe_open(str(weights), "pt") as f:
        header = f.metadata() or {}
    if "lora_adapter_metadata" in header:  # diffusers.loaders.lora_base.LORA_ADAPTER_METADATA_KEY
        return state, json.loads(header["lora_adapter_metadata"])
    config = weights.parent / "adapter_config.json"
    return state, (json.loads(config.read_text()) if config.is_file() else None)


def load_adapters(model: Any, adapters: list[Adapter], library: str, spec_dir: Path, loc: Location,
                  allow_outside: bool | None = None) -> Any:
    """Load PEFT adapters onto a built transformers/diffusers model (peft must be installed)."""
    if not adapters:
        return model
    try:
        import peft  # noqa: F401
    except ImportError:
        raise BuildError("adapters need peft: pip install peft", loc) from None
    for i, adapter in enumerate(adapters):
        aloc = Location(loc.file, loc.line, loc.column, f"{loc.field}.adapters.{i}" if loc.field else f"adapters.{i}")
        folder = adapter_folder(adapter, spec_dir, aloc, allow_outside)
        try:
            if library == "transformers":  # the verified file itself, never a fallback .bin
                import json

                from safetensors.torch import load_file

                from peft.config import PeftConfig

                config = PeftConfig.from_peft_type(**json.loads((folder / "adapter_config.json").read_text()))
                model.load_adapter(peft_config=config, adapter_state_dict=load_file(str(folder / adapter.weight_name)),
                                   adapter_name=adapter.adapter_name)
            elif hasattr(model, "load_lora_weights"):  # a diffusers pipeline
                model.load_lora_weights(str(folder), weight_name=adapter.weight_name, adapter_name=adapter.adapter_name)
            else:  # a diffusers model: the verified file itself, in peft's or diffusers' own layout
                if not hasattr(model, "load_lora_adapter"):
                    raise BuildError(f"{type(model).__name__} takes no adapters: diffusers has no LoRA loading for it "
                                     "(no load_lora_adapter)", aloc)
                state, config = diffusers_lora_file(folder / adapter.weight_name)
                model.load_lora_adapter(state, metadata=config, adapter_name=adapter.adapter_name, prefix=None)
        except BuildError:
            raise
        except Exception as exc:  # noqa: BLE001 - peft/transformers raise many types; one line
            raise BuildError(f"adapter {adapter.adapter_name} does not load: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}", aloc) from None
    return model


# ----------------------------------------------------------------------------- offline availability
def _cached(repo: str, revision: str | None, filename: str, repo_type: str = "model") -> bool:
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(repo, filename, revision=revision, repo_type=repo_type)
    return isinstance(hit, str) and os.path.isfile(hit)


def _snapshot_cached(repo: str, revision: str | None) -> bool:
    from huggingface_hub.constants import HF_HUB_CACHE

    folder = Path(HF_HUB_CACHE) / ("models--" + repo.replace("/", "--"))
    if revision is None:
        ref = folder / "refs" / "main"
        if not ref.is_file():
            return False
        revision = ref.read_text().strip()
    snap = folder / "snapshots" / revision
    return snap.is_dir() and any(snap.iterdir())


def missing_offline(source: ModelSource, spec_dir: Path) -> str | None:
    """What a source would fetch that is not on this machine (None: everything is local)."""
    if isinstance(source, ZooSource):
        if isinstance(source.weights, HubFile) and not _cached(source.weights.hub, source.weights.revision,
                                                               source.weights.filename, source.weights.repo_type):
            return f"{source.weights.hub}/{source.weights.filename}"
        return None
    if isinstance(source, HubSource):
        if looks_remote(source.id) and not (spec_dir / (source.id or "")).is_dir():
            if not _snapshot_cached(source.id or "", source.revision):
                return f"{source.id}" + (f"@{source.revision[:12]}" if source.revision else "")
        for a in source.adapters:
            if a.hub is not None and not _cached(a.hub, a.revision, a.weight_name):
                return f"adapter {a.hub}"
        return None
    if isinstance(source, TimmSource):
        if source.pretrained and source.weights is None:
            return f"timm pretrained weights of {source.model_name}"
        return None
    assert isinstance(source, RoleSource)
    return None
