"""Weights that are not a transformers/diffusers folder: one file (local, or inside a hub
repository), read safely and mapped to a factory's keys by a converter; PEFT adapters; and
whether a source's files are available without the network.

Formats: ``.safetensors`` (``safetensors.torch.load_file``) for every file; a hub file may also be
``.pt``/``.pth``/``.ckpt``, read only through ``torch.load(weights_only=True)`` — a checkpoint that
needs pickle globals is refused, naming the file
(https://pytorch.org/docs/stable/generated/torch.load.html). Files shipped with a spec (local
weights) are safetensors only: nothing in a spec's folder reaches the unpickler.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import BuildError, Location, ParamError
from .hardware import offline
from .schema import Adapter, HubFile


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
    from .files import local_path

    path = local_path(rel, base, loc, allow_outside, what)
    if not path.is_file():
        raise BuildError(f"{what} {path} does not exist (its spec's training: entry makes it: zoo train NAME)", loc)
    actual = sha256_file(path)
    if actual != sha256:
        raise BuildError(f"sha256 mismatch for {path.name}: expected {sha256}, file has {actual}", loc)
    return path


def hub_file(ref: HubFile, loc: Location) -> Path:
    """Path of a hub file in the local cache, downloaded unless offline (then cache only)."""
    from .hub import hub_download

    try:
        return hub_download(ref.hub, ref.filename, ref.revision, repo_type=ref.repo_type)
    except Exception as exc:  # noqa: BLE001 - hub errors come in many types; one line
        where = " offline (HF_HUB_OFFLINE is set; the file is not in the local cache)" if offline() else ""
        msg = " ".join(str(exc).split())[:200]
        raise BuildError(f"could not fetch {ref.filename} from {ref.hub}@{ref.revision[:12] if ref.revision else '(unpinned)'}{where}: {msg}", loc) from None


def read_state(path: Path, sha256: str | None, loc: Location, sha_loc: Location | None = None, *,
               torch_format: bool = False) -> Any:
    """The verified contents of a weights file: a state dict (or, for torch files of a hub repository,
    ``torch_format=True``, whatever ``weights_only`` can rebuild: nested dicts/lists of tensors and
    plain values). Without ``torch_format`` only safetensors is read."""
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
    if path.suffix in (".pt", ".pth", ".ckpt") and not torch_format:
        raise BuildError(f"{path.name}: local weights are safetensors only (convert it; a hub file may be a torch checkpoint)", loc)
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
        from .files import check_folder_links, local_path

        folder = local_path(adapter.path, spec_dir, loc, allow_outside, "adapter folder")
        check_folder_links(folder, spec_dir, loc, allow_outside, "adapter folder")  # the weights and config inside too
    else:
        from .hub import hub_download

        try:
            cfg = hub_download(adapter.hub or "", "adapter_config.json", adapter.revision)
            hub_download(adapter.hub or "", adapter.weight_name, adapter.revision)
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


#: Keys of a PEFT adapter config that make peft import code, rewrite the base model or its weights while
#: loading: ``megatron_core`` (a module imported by name when
#: ``megatron_config`` is set), ``layer_replication`` (copies base layers), and every ``*_config`` block
#: (Megatron, LoftQ, EVA, CorDA, ... initialisations). Each must keep peft's default: null / {} (megatron_core
#: its default module name).
ADAPTER_CODE_KEYS = frozenset({"megatron_core", "layer_replication"})
#: Libraries an ``auto_mapping.parent_library`` may name (peft records the base model's class there; the engine
#: drops the key before peft sees it, since only ``AutoPeftModel`` would import it).
_AUTO_MAPPING_LIBRARIES = ("transformers.", "diffusers.")
_ADAPTER_DEFAULTS: dict[str, tuple[Any, ...]] = {"megatron_core": (None, "megatron.core")}


def check_adapter_config(config: Any, where: str) -> dict[str, Any]:
    """A PEFT adapter config (``adapter_config.json``, or a LoRA file's metadata) validated as untrusted input:
    a mapping; no consent key (:data:`registry.spec.CONSENT_KEYS`) at any depth, :data:`ADAPTER_CODE_KEYS` and
    ``*_config`` blocks at peft's defaults, ``auto_mapping`` (peft's record of the base class) only naming a
    transformers/diffusers class, and then dropped; the rank ``r`` and every ``rank_pattern`` entry within
    :data:`registry.limits.ADAPTER_RANK`, ``init_lora_weights`` a bool or ``"gaussian"``, everything else within
    the default caps. Returns the config to hand to peft; a problem is one :class:`ParamError` at ``<where>.<key>``."""
    from .errors import ParamError
    from .limits import ADAPTER_RANK, SizeError, check_tree
    from .schema import refuse_consent_keys

    loc = lambda f: Location(None, None, None, f"{where}.{f}" if f else where)  # noqa: E731
    if not isinstance(config, dict):
        raise ParamError(f"an adapter config is a JSON object, not a {type(config).__name__}", loc(""))
    try:
        refuse_consent_keys(config)
    except ValueError as exc:
        raise ParamError(str(exc), loc("")) from None
    for key, value in config.items():
        k = str(key).lower()
        if k in ADAPTER_CODE_KEYS or k.endswith("_config"):
            allowed = _ADAPTER_DEFAULTS.get(k, (None,))
            if not (any(value == a and type(value) is type(a) for a in allowed) or value == {}):
                raise ParamError(f"{key!r} points at code or rewrites the base model; an adapter config keeps peft's "
                                 f"default ({', '.join(map(repr, allowed))})", loc(str(key)))
    mapping = config.get("auto_mapping")
    if mapping is not None:
        lib = mapping.get("parent_library") if isinstance(mapping, dict) else None
        if not (isinstance(lib, str) and lib.startswith(_AUTO_MAPPING_LIBRARIES) and set(mapping) <= {"base_model_class", "parent_library"}):
            raise ParamError("'auto_mapping' points at code outside transformers/diffusers; refused in an adapter config",
                             loc("auto_mapping"))
        config = {k: v for k, v in config.items() if k != "auto_mapping"}  # informational; never handed to peft
    init = config.get("init_lora_weights", True)
    if not (isinstance(init, bool) or init == "gaussian"):
        raise ParamError(f"expected true, false or 'gaussian' (other initialisations rewrite the base weights), got {init!r}",
                         loc("init_lora_weights"))
    try:
        check_tree(config, "")
        ADAPTER_RANK.check(config.get("r"), "r")
        for name, rank in (config.get("rank_pattern") or {}).items() if isinstance(config.get("rank_pattern"), dict) else ():
            ADAPTER_RANK.check(rank, f"rank_pattern.{name}")
    except SizeError as exc:
        raise ParamError(exc.detail, loc(exc.path)) from None
    return config


def _adapter_config_file(path: Path, where: str) -> dict[str, Any] | None:
    """``adapter_config.json`` next to an adapter's weights (None if absent), size-capped and checked."""
    import json

    from .errors import ParamError, SpecError
    from .files import read_spec_bytes
    from .limits import ADAPTER_CONFIG_BYTES

    if not path.exists():
        return None
    try:
        raw = json.loads(read_spec_bytes(path, limit=ADAPTER_CONFIG_BYTES.value))
    except SpecError as exc:
        raise ParamError(f"{path.name}: {exc.message}", Location(None, None, None, where)) from None
    except (ValueError, RecursionError):
        raise ParamError(f"{path.name} is not valid JSON", Location(None, None, None, where)) from None
    return check_adapter_config(raw, where)


def diffusers_lora_file(weights: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A LoRA file's tensors and LoRA config for a diffusers model's ``load_lora_adapter``.

    Two layouts: peft's ``save_pretrained`` (keys ``base_model.model.<module>.lora_A.weight``, config in
    ``adapter_config.json`` beside the file) and diffusers' ``save_lora_adapter`` (bare module keys, config
    in the safetensors header). Without the config diffusers infers ``lora_alpha = r`` from the shapes,
    which silently rescales a peft LoRA saved with another ``lora_alpha``, so the config is always passed."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file

    from .errors import ParamError
    from .limits import ADAPTER_CONFIG_BYTES

    state = {k.removeprefix("base_model.model."): v for k, v in load_file(str(weights)).items()}
    with safe_open(str(weights), "pt") as f:
        header = f.metadata() or {}
    if "lora_adapter_metadata" in header:  # diffusers.loaders.lora_base.LORA_ADAPTER_METADATA_KEY
        meta = header["lora_adapter_metadata"]
        where = f"{weights.name} metadata"
        if len(meta) > ADAPTER_CONFIG_BYTES.value:
            raise ParamError(f"{len(meta):,} bytes is over the limit ADAPTER_CONFIG_BYTES = {ADAPTER_CONFIG_BYTES.value:,}",
                             Location(None, None, None, where))
        try:
            return state, check_adapter_config(json.loads(meta), where)
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, ParamError):
                raise
            raise ParamError("lora_adapter_metadata is not valid JSON", Location(None, None, None, where)) from None
    return state, _adapter_config_file(weights.parent / "adapter_config.json", "adapter_config.json")


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
                from safetensors.torch import load_file

                from peft.config import PeftConfig

                raw = _adapter_config_file(folder / "adapter_config.json", f"{aloc.field}.adapter_config.json")
                if raw is None:
                    raise BuildError(f"adapter {adapter.adapter_name}: no adapter_config.json beside its weights", aloc)
                config = PeftConfig.from_peft_type(**raw)
                model.load_adapter(peft_config=config, adapter_state_dict=load_file(str(folder / adapter.weight_name)),
                                   adapter_name=adapter.adapter_name)
            elif hasattr(model, "load_lora_weights"):  # a diffusers pipeline
                _adapter_config_file(folder / "adapter_config.json", f"{aloc.field}.adapter_config.json")
                model.load_lora_weights(str(folder), weight_name=adapter.weight_name, adapter_name=adapter.adapter_name)
            else:  # a diffusers model: the verified file itself, in peft's or diffusers' own layout
                if not hasattr(model, "load_lora_adapter"):
                    raise BuildError(f"{type(model).__name__} takes no adapters: diffusers has no LoRA loading for it "
                                     "(no load_lora_adapter)", aloc)
                state, config = diffusers_lora_file(folder / adapter.weight_name)
                model.load_lora_adapter(state, metadata=config, adapter_name=adapter.adapter_name, prefix=None)
        except (BuildError, ParamError):
            raise
        except Exception as exc:  # noqa: BLE001 - peft/transformers raise many types; one line
            raise BuildError(f"adapter {adapter.adapter_name} does not load: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}", aloc) from None
    return model


# ----------------------------------------------------------------------------- offline availability
def hub_file_cached(repo: str, revision: str | None, filename: str, repo_type: str = "model") -> bool:
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(repo, filename, revision=revision, repo_type=repo_type)
    return isinstance(hit, str) and os.path.isfile(hit)


def snapshot_cached(repo: str, revision: str | None) -> bool:
    from huggingface_hub.constants import HF_HUB_CACHE

    folder = Path(HF_HUB_CACHE) / ("models--" + repo.replace("/", "--"))
    if revision is None:
        ref = folder / "refs" / "main"
        if not ref.is_file():
            return False
        revision = ref.read_text().strip()
    snap = folder / "snapshots" / revision
    return snap.is_dir() and any(snap.iterdir())


def missing_offline(source: Any, spec_dir: Path) -> str | None:
    """What a source would fetch that is not on this machine (None: everything is local): the kind's own answer
    (:meth:`registry.sources.base.SourceKind.missing_offline`)."""
    return source.missing_offline(spec_dir)
