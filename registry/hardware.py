"""What this machine offers, and whether a variant's hardware target fits it."""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the schema imports nothing of this module's layer
    from .spec import HardwareTarget


@dataclass(frozen=True)
class Machine:
    cuda_devices: int
    cuda_memory_gb: tuple[float, ...]
    cuda_names: tuple[str, ...]
    bf16_cuda: bool
    mps: bool
    how: str = "torch"  # "torch" (detect) or the torch-free probe's source (probe)

    def describe(self) -> str:
        if self.cuda_devices:
            gpus = ", ".join(f"{n} ({m:.0f} GB)" for n, m in zip(self.cuda_names, self.cuda_memory_gb))
            return f"cpu + {self.cuda_devices} cuda ({gpus})"
        return "cpu + mps" if self.mps else "cpu only"


@lru_cache(maxsize=1)
def probe() -> Machine:
    """What this machine offers, without importing torch (for ``zoo show`` / ``zoo doctor``):
    ``CUDA_VISIBLE_DEVICES`` empty or ``-1`` hides every GPU; otherwise ``nvidia-smi`` (when on
    PATH) lists the GPUs' names, memory and compute capability (bf16 from 8.0); Apple silicon
    implies mps. It can differ from :func:`detect` (e.g. a CPU-only torch build on a GPU machine),
    which the builder uses."""
    import platform
    import shutil
    import subprocess
    import sys

    mps = sys.platform == "darwin" and platform.machine() == "arm64"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return Machine(0, (), (), False, mps, "CUDA_VISIBLE_DEVICES")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Machine(0, (), (), False, mps, "no nvidia-smi")
    try:
        out = subprocess.run([smi, "--query-gpu=name,memory.total,compute_cap", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return Machine(0, (), (), False, mps, "nvidia-smi failed")
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.count(",") >= 2]
    if visible is not None:  # a list of indices: keep those
        keep = [int(i) for i in visible.split(",") if i.strip().isdigit()]
        rows = [rows[i] for i in keep if i < len(rows)] if keep else rows
    names, mem, caps = [], [], []
    for name, total, cap in (r[:3] for r in rows):
        try:
            mem.append(float(total) / 1024)
            caps.append(float(cap))
        except ValueError:
            continue
        names.append(name)
    return Machine(len(names), tuple(mem), tuple(names), bool(caps) and min(caps) >= 8.0, mps, "nvidia-smi")


@lru_cache(maxsize=1)
def detect() -> Machine:
    """Inspect the machine (imports torch; only called when something is built or doctored)."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    mem = tuple(torch.cuda.get_device_properties(i).total_memory / 2**30 for i in range(n))
    names = tuple(torch.cuda.get_device_name(i) for i in range(n))
    bf16 = bool(n and torch.cuda.is_bf16_supported())
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    return Machine(n, mem, names, bf16, mps, "torch")


def fits(target: HardwareTarget, machine: Machine, device: str | None = None) -> tuple[bool, str]:
    """``(ok, reason)``: can ``target`` run here (optionally on the requested ``device``)?"""
    want = (device or "").split(":")[0] or None
    acc = target.accelerator
    if want is not None and acc not in ("any", want) and not (acc == "cpu" and want == "cuda"):
        return False, f"needs {acc}, {want} requested"
    if want == "cuda" or (want is None and acc == "cuda"):
        if machine.cuda_devices < target.gpus:
            need = f"{target.gpus}x " if target.gpus > 1 else ""
            mem = f" with ≥{target.min_memory_gb:g} GB" if target.min_memory_gb else ""
            return False, f"needs {need}cuda{mem}; this machine has {machine.describe()}"
        if target.min_memory_gb and sum(sorted(machine.cuda_memory_gb)[-target.gpus :]) < target.min_memory_gb:
            return False, f"needs cuda with ≥{target.min_memory_gb:g} GB; this machine has {machine.describe()}"
    if want == "mps" and not machine.mps:
        return False, "needs mps; this machine has none"
    return True, "fits"


def device_problem(device: str, machine: Machine) -> str | None:
    """Why ``device`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``) cannot be used on ``machine``, naming what is missing
    (no CUDA device, a torch built without CUDA, too few GPUs, no MPS), or None when it can."""
    kind, _, index = device.partition(":")
    if kind == "cpu" and not index:
        return None
    if kind == "cuda":
        if machine.cuda_devices == 0:
            return f"{device} requested, but {_no_cuda(machine)}"
        if index and (not index.isdigit() or int(index) >= machine.cuda_devices):
            return (f"{device} requested, but this machine has {machine.cuda_devices} CUDA device"
                    f"{'s' if machine.cuda_devices != 1 else ''} (cuda:0{f'..cuda:{machine.cuda_devices - 1}' if machine.cuda_devices > 1 else ''})")
        return None
    if kind == "mps" and not index:
        return None if machine.mps else f"{device} requested, but this machine has no MPS device (Apple-silicon GPU)"
    return f"unknown device {device!r}; expected cpu, cuda, cuda:N or mps"


def _no_cuda(machine: Machine) -> str:
    """What is missing for CUDA: torch's own view when ``machine`` came from :func:`detect`."""
    if machine.how != "torch":
        return f"this machine has no CUDA device ({machine.describe()}; found by {machine.how})"
    import torch

    if torch.version.cuda is None:
        return (f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None): "
                "install a CUDA build of torch to use a GPU")
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    why = f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU" if hidden is not None and hidden.strip() in ("", "-1") \
        else "no NVIDIA GPU or driver is visible"
    return (f"no CUDA device is available: torch {torch.__version__} is built with CUDA {torch.version.cuda}, "
            f"but torch.cuda.is_available() is False ({why})")


def default_device(target: HardwareTarget, machine: Machine) -> str:
    if target.accelerator == "cuda" or (target.accelerator == "any" and machine.cuda_devices):
        return "cuda"
    if target.accelerator == "mps":
        return "mps"
    return "cpu"


def offline() -> bool:
    return any(os.environ.get(v, "") not in ("", "0", "false") for v in ("HF_HUB_OFFLINE", "ZOO_OFFLINE", "TRANSFORMERS_OFFLINE"))


#: CPU features whose presence changes which kernels MKL / oneDNN / torch pick for float32 work (and so the last
#: bits of a trained checkpoint): part of :func:`cpu_kernel_signature`
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_tile", "fma", "sve", "asimd")


def cpu_kernel_signature() -> str:
    """Which CPU kernels this machine's torch runs float32 training on: architecture, torch's CPU dispatch level and
    the kernel-relevant CPU flags (from ``/proc/cpuinfo``), e.g. ``x86_64/AVX512/amx_tile+avx2+...``. Two machines with
    one signature may still round differently (a library's own dispatch by CPU model); two signatures usually do."""
    import platform

    import torch

    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    present = "+".join(sorted(flag for flag in KERNEL_FLAGS if flag in flags)) or "none"
    return f"{platform.machine()}/{torch.backends.cpu.get_cpu_capability()}/{present}"
