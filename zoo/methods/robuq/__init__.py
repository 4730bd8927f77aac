"""RobuQ (Yang, Zhang et al., ICML 2026, arXiv 2509.23582): quantisation of Diffusion Transformers with
ternary weights + an FP low-rank branch, Hadamard-rotated per-token uniform activation quantisers
(RobustQuantizer), 8-bit attention products and AMPN activation-only mixed precision, on the shared digits DiT."""
from .attention import QuantAttnProcessor, attention_bits_of, install_attention_quantizers, quantized_attention
from .model import (
    GROUP_KINDS, allocate_bits, brute_force_bits, group_costs, install_quantizers, layer_groups, load_packed, measure_sensitivities, pack_model,
    packed_state, quant_modules, set_enabled, set_group_bits, unpack_state,
)
from .quant import (
    QuantLinear, fast_hadamard, gaussian_step, hadamard_block, hadamard_matrix, int_codes, int_weight, quantize_tokens, quantize_tokens_gaussian,
    ste_quantize_tokens, ternarize, ternary_codes,
)

__all__ = [
    "GROUP_KINDS", "QuantLinear", "allocate_bits", "brute_force_bits", "fast_hadamard", "group_costs", "hadamard_block", "hadamard_matrix",
    "install_quantizers", "int_codes", "int_weight", "layer_groups", "load_packed", "measure_sensitivities", "pack_model", "packed_state",
    "quant_modules", "quantize_tokens", "set_enabled", "set_group_bits", "ste_quantize_tokens", "ternarize", "ternary_codes", "unpack_state",
    "QuantAttnProcessor", "attention_bits_of", "install_attention_quantizers", "quantized_attention", "gaussian_step", "quantize_tokens_gaussian",
]
from .procedures import DiTLatentSampler, QATDigits, QATOutput, QuantDigitsSampler, QuantSampleOutput, ampn_allocate, qat_finetune, quantize_dit  # noqa: E402

__all__ += ["ampn_allocate", "DiTLatentSampler", "QATDigits", "QATOutput", "QuantDigitsSampler", "QuantSampleOutput", "qat_finetune", "quantize_dit"]
