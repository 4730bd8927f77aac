"""RobuQ (Yang, Zhang et al., ICML 2026, arXiv 2509.23582): quantisation of Diffusion Transformers with
ternary weights + an FP low-rank branch, Hadamard-rotated per-token uniform activation quantisers
(RobustQuantizer), 8-bit attention products and AMPN activation-only mixed precision, on the shared digits DiT."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = [
    "GROUP_KINDS", "QuantLinear", "allocate_bits", "brute_force_bits", "fast_hadamard", "group_costs", "hadamard_block", "hadamard_matrix",
    "install_quantizers", "int_codes", "int_weight", "layer_groups", "load_packed", "measure_sensitivities", "pack_model", "packed_state",
    "quant_modules", "quantize_tokens", "set_enabled", "set_group_bits", "ste_quantize_tokens", "ternarize", "ternary_codes", "unpack_state",
    "QuantAttnProcessor", "attention_bits_of", "install_attention_quantizers", "quantized_attention", "gaussian_step", "quantize_tokens_gaussian",
]

__all__ += ["ampn_allocate", "DiTLatentSampler", "QATDigits", "QATOutput", "QuantDigitsSampler", "QuantSampleOutput", "qat_finetune", "quantize_dit"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "QuantAttnProcessor": ".attention",
    "attention_bits_of": ".attention",
    "install_attention_quantizers": ".attention",
    "quantized_attention": ".attention",
    "GROUP_KINDS": ".model",
    "allocate_bits": ".model",
    "brute_force_bits": ".model",
    "group_costs": ".model",
    "install_quantizers": ".model",
    "layer_groups": ".model",
    "load_packed": ".model",
    "measure_sensitivities": ".model",
    "pack_model": ".model",
    "packed_state": ".model",
    "quant_modules": ".model",
    "set_enabled": ".model",
    "set_group_bits": ".model",
    "unpack_state": ".model",
    "QuantLinear": ".quant",
    "fast_hadamard": ".quant",
    "gaussian_step": ".quant",
    "hadamard_block": ".quant",
    "hadamard_matrix": ".quant",
    "int_codes": ".quant",
    "int_weight": ".quant",
    "quantize_tokens": ".quant",
    "quantize_tokens_gaussian": ".quant",
    "ste_quantize_tokens": ".quant",
    "ternarize": ".quant",
    "ternary_codes": ".quant",
    "DiTLatentSampler": ".procedures",
    "QATDigits": ".procedures",
    "QATOutput": ".procedures",
    "QuantDigitsSampler": ".procedures",
    "QuantSampleOutput": ".procedures",
    "ampn_allocate": ".procedures",
    "qat_finetune": ".procedures",
    "quantize_dit": ".procedures",
})

if TYPE_CHECKING:
    from .attention import QuantAttnProcessor, attention_bits_of, install_attention_quantizers, quantized_attention
    from .model import (
        GROUP_KINDS, allocate_bits, brute_force_bits, group_costs, install_quantizers, layer_groups, load_packed, measure_sensitivities, pack_model,
        packed_state, quant_modules, set_enabled, set_group_bits, unpack_state,
    )
    from .quant import (
        QuantLinear, fast_hadamard, gaussian_step, hadamard_block, hadamard_matrix, int_codes, int_weight, quantize_tokens, quantize_tokens_gaussian,
        ste_quantize_tokens, ternarize, ternary_codes,
    )
    from .procedures import DiTLatentSampler, QATDigits, QATOutput, QuantDigitsSampler, QuantSampleOutput, ampn_allocate, qat_finetune, quantize_dit
