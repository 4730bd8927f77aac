"""The one place the project calls a pretrained loader (``from_pretrained``, ``hf_hub_download``,
``snapshot_download``): every call passes an explicit ``trust_remote_code`` and never reaches the
network when offline, and a hub id is only ever a hub id.

* :func:`load_pretrained` ``(cls, ref, ...)``: ``ref`` is an absolute local folder or a hub id
  (``owner/name`` or ``name``, the hub's own pattern :data:`registry.spec.HUB_ID_RE`). A hub id is resolved by
  ``huggingface_hub.snapshot_download`` at the given revision (offline: the local HF cache only)
  into an absolute snapshot folder, so a folder of the same name in the working directory is never
  loaded; a relative path is refused (the builder resolves spec-relative ``./x`` ids first). The
  loader then gets that folder with ``local_files_only=True`` and ``trust_remote_code=<bool>``
  (transformers classes, diffusers pipelines and ``AutoModel``), never ``None``, so transformers
  never asks on stdin. ``trust_remote_code=True`` is refused when ``ZOO_DISABLE_REMOTE_CODE=1``.
* :func:`hub_download` ``(repo, filename, revision)``: one file, cache only when offline.
* :func:`create_timm_model`: timm architectures; ``pretrained=True`` (unpinned timm weights) refused offline.

``tests/test_untrusted_surface.py`` parses every module of ``registry/``, ``zoo/`` and ``tools/`` and fails
when any other module calls one of these loaders directly.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .hardware import offline
from .schema import HUB_ID_RE, is_hub_id  # noqa: F401 - re-exported: the pattern lives with the schema that validates it

#: What a snapshot never fetches: pickle-based and foreign-framework weights (transformers and
#: diffusers load safetensors from these folders; ``.bin``/``.pt`` would go through ``torch.load``).
IGNORED_FILES = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle", "*.h5", "*.msgpack", "*.onnx",
                 "*.onnx_data", "*.gguf", "*.ot", "*.tflite", "*.pb", "*.joblib", "*.npz")


def remote_code_disabled() -> bool:
    """``ZOO_DISABLE_REMOTE_CODE=1``: no remote code, whatever the spec and the caller say."""
    return os.environ.get("ZOO_DISABLE_REMOTE_CODE", "") not in ("", "0", "false")


class RemoteCodeRefused(PermissionError):
    """``trust_remote_code=True`` asked for while ``ZOO_DISABLE_REMOTE_CODE`` is set."""


def snapshot(repo_id: str, revision: str | None = None, *, subfolder: str | None = None,
             repo_type: str = "model") -> Path:
    """The absolute folder of ``repo_id`` at ``revision`` in the local HF cache, downloaded first unless
    offline (then the cache only; missing is an error). Only ``subfolder`` when given, never the
    formats of :data:`IGNORED_FILES`."""
    if not is_hub_id(repo_id):
        raise ValueError(f"{repo_id!r} is not a hub repository id (owner/name)")
    from huggingface_hub import snapshot_download

    allow = [f"{subfolder.strip('/')}/*"] if subfolder else None
    folder = snapshot_download(repo_id, revision=revision, repo_type=repo_type, local_files_only=offline(),
                               allow_patterns=allow, ignore_patterns=list(IGNORED_FILES))
    return Path(folder).resolve()


def hub_download(repo_id: str, filename: str, revision: str | None = None, *, repo_type: str = "model") -> Path:
    """One file of a hub repository (``hf_hub_download``), from the local cache only when offline."""
    if not is_hub_id(repo_id):
        raise ValueError(f"{repo_id!r} is not a hub repository id (owner/name)")
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo_id, filename, revision=revision, repo_type=repo_type, local_files_only=offline()))


def takes_trust_remote_code(cls: Any) -> bool:
    """Whether ``cls.from_pretrained`` understands ``trust_remote_code`` (every transformers class; diffusers
    pipelines and ``diffusers.AutoModel``). Other diffusers classes (models, schedulers) load no code, and
    an unknown keyword would be taken as a config override."""
    module = getattr(cls, "__module__", "") or ""
    if module.split(".")[0] == "transformers":
        return True
    if module.split(".")[0] == "diffusers":
        import diffusers

        return issubclass(cls, diffusers.DiffusionPipeline) or cls.__name__ == "AutoModel"
    return True  # a non-library class: pass it, and let it refuse


def load_pretrained(cls: Any, ref: str | os.PathLike[str], *, trust_remote_code: bool = False,
                    revision: str | None = None, subfolder: str | None = None, **kwargs: Any) -> Any:
    """``cls.from_pretrained`` on an absolute local folder or a hub id (resolved by :func:`snapshot`), with an
    explicit ``trust_remote_code`` and ``local_files_only=True``. ``trust_remote_code`` must already be the
    combination of every consent (the spec's request *and* the caller's); it is refused under
    ``ZOO_DISABLE_REMOTE_CODE``. ``revision`` pins a hub id; ``subfolder`` and ``kwargs`` go to the loader."""
    if not isinstance(trust_remote_code, bool):
        raise TypeError("load_pretrained: trust_remote_code must be True or False, never None (None makes transformers ask on stdin)")
    if trust_remote_code and remote_code_disabled():
        raise RemoteCodeRefused("remote code is refused: ZOO_DISABLE_REMOTE_CODE is set")
    if "local_files_only" in kwargs:
        raise TypeError("load_pretrained: local_files_only is always True here (the folder is local once resolved)")
    if isinstance(ref, os.PathLike) or (isinstance(ref, str) and os.path.isabs(ref)):
        folder = Path(ref)
        if not folder.is_absolute():
            raise ValueError(f"{str(ref)!r}: a local model folder must be an absolute path (never the working directory's)")
    elif isinstance(ref, str) and is_hub_id(ref):
        folder = snapshot(ref, revision, subfolder=subfolder)
    else:
        raise ValueError(f"{ref!r} is neither an absolute folder nor a hub id (owner/name); relative paths are never "
                         "resolved against the working directory")
    if subfolder:
        kwargs["subfolder"] = subfolder
    if takes_trust_remote_code(cls):
        kwargs["trust_remote_code"] = trust_remote_code
    return cls.from_pretrained(str(folder), local_files_only=True, **kwargs)


def create_timm_model(name: str, *, pretrained: bool = False, **kwargs: Any) -> Any:
    """``timm.create_model`` (architecture kwargs only); ``pretrained=True`` downloads timm's default,
    unpinned weights and is refused when offline."""
    if pretrained and offline():
        raise PermissionError(f"timm pretrained weights for {name!r} must be downloaded, but HF_HUB_OFFLINE is set")
    import timm

    return timm.create_model(name, pretrained=bool(pretrained), **kwargs)
