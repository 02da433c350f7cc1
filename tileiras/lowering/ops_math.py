"""Math ops through libdevice (`__nv_*`), the accuracy NVIDIA's compiler gives.

f16/bf16 inputs are computed in f32 and rounded back, as libdevice has no
half-precision entry points for these functions. The libdevice bitcode is
linked in by the code generator when the module declares `__nv_*` symbols.
"""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import ScalarType, element_of
from .exp_f32 import exp_f32
from .kernel import KernelLowering, op_error
from .llvm_text import llvm_type
from .ops_arith import _map

# op -> libdevice base name (f32 adds the `f` suffix) and its arity
MATH_FUNCTIONS: dict[str, tuple[str, int]] = {
    "cuda_tile.exp": ("exp", 1), "cuda_tile.exp2": ("exp2", 1),
    "cuda_tile.log": ("log", 1), "cuda_tile.log2": ("log2", 1),
    "cuda_tile.sqrt": ("sqrt", 1), "cuda_tile.rsqrt": ("rsqrt", 1),
    "cuda_tile.sin": ("sin", 1), "cuda_tile.cos": ("cos", 1), "cuda_tile.tan": ("tan", 1),
    "cuda_tile.sinh": ("sinh", 1), "cuda_tile.cosh": ("cosh", 1), "cuda_tile.tanh": ("tanh", 1),
    "cuda_tile.pow": ("pow", 2), "cuda_tile.fpowf": ("pow", 2), "cuda_tile.atan2": ("atan2", 2), "cuda_tile.remf": ("fmod", 2),
}

# approximate forms the IR may ask for with rounding_mode = approx (f32 only; exp2 and rsqrt
# are approximate anyway, below)
APPROX: dict[str, str] = {
    "cuda_tile.sqrt": "llvm.nvvm.sqrt.approx.f", "cuda_tile.tanh": "llvm.nvvm.tanh.approx.f32",
}

# libdevice's f32 functions that are one approximate instruction (its .ftz form under
# __CUDA_FTZ): called directly, they honour flush_to_zero, and a kernel whose only math
# functions they are (attention's exp2, rmsnorm's rsqrt) skips the libdevice parse and link
ONE_INSTRUCTION: dict[str, str] = {"cuda_tile.exp2": "ex2.approx", "cuda_tile.rsqrt": "rsqrt.approx"}

# the approximate exp is 2^(x log2 e): ex2.approx of x times log2(e) rounded to f32 (NVIDIA's
# form); libdevice's __nv_expf would cost a dozen instructions and the library's link
LOG2_E_F32 = "0x3FF7154760000000"


def _math(k: KernelLowering, op: Operation) -> None:
    elem = element_of(op.results[0].type)
    assert isinstance(elem, ScalarType)
    ty = llvm_type(elem)
    if ty not in ("half", "bfloat", "float", "double"):
        raise op_error(op, f"does not support element type {elem}")
    base, arity = MATH_FUNCTIONS[op.name]
    mode = str(op.attributes.get("rounding_mode", ""))
    ftz = bool(op.attributes.get("flush_to_zero", False))
    compute = "double" if ty == "double" else "float"
    scale = mode == "approx" and compute == "float" and op.name == "cuda_tile.exp"
    inline = compute == "float" and op.name == "cuda_tile.exp" and not scale   # exp_f32.py
    if scale or inline:
        name = f"llvm.nvvm.ex2.approx{'.ftz' if ftz else ''}.f"
    elif compute == "float" and op.name in ONE_INSTRUCTION:
        name = f"llvm.nvvm.{ONE_INSTRUCTION[op.name]}{'.ftz' if ftz else ''}.f"
    elif mode == "approx" and compute == "float" and op.name in APPROX:
        name = APPROX[op.name]
    elif op.name == "cuda_tile.sqrt":
        # PTX sqrt with its rounding modifier: libdevice's __nv_sqrtf is approximate unless
        # __CUDA_PREC_SQRT is reflected on
        rnd = {"zero": "rz", "negative_inf": "rm", "positive_inf": "rp"}.get(mode, "rn")
        if rnd == "rn" and not ftz:
            name = f"llvm.sqrt.{'f64' if compute == 'double' else 'f32'}"
        else:
            name = f"llvm.nvvm.sqrt.{rnd}{'.ftz' if ftz and compute == 'float' else ''}.{'d' if compute == 'double' else 'f'}"
    else:
        name = f"__nv_{base}" + ("f" if compute == "float" else "")

    def apply(a: list[str]) -> str:
        args = [k.b.op(f"fpext {ty} {x} to float", "m") if ty in ("half", "bfloat") else x for x in a[:arity]]
        if scale:
            args = [k.b.op(f"fmul float {args[0]}, {LOG2_E_F32}", "m")]
        if inline:
            r = exp_f32(k.b, args[0], ftz)
        else:
            r = k.b.call(compute, name, [(compute, x) for x in args])
        return k.b.op(f"fptrunc float {r} to {ty}", "m") if ty in ("half", "bfloat") else r
    _map(k, op, apply)


def _fpowi(k: KernelLowering, op: Operation) -> None:
    """float ** integer: libdevice's powi (exact repeated multiplication semantics)."""
    elem = element_of(op.results[0].type)
    ty = llvm_type(elem)
    ity = llvm_type(element_of(op.operands[1].type))
    compute = "double" if ty == "double" else "float"
    name = "__nv_powi" if compute == "double" else "__nv_powif"

    def apply(a: list[str]) -> str:
        x = k.b.op(f"fpext {ty} {a[0]} to float", "m") if ty in ("half", "bfloat") else a[0]
        n = a[1] if ity == "i32" else k.b.op(
            f"{'trunc' if ity == 'i64' else 'sext'} {ity} {a[1]} to i32", "m")
        r = k.b.call(compute, name, [(compute, x), ("i32", n)])
        return k.b.op(f"fptrunc float {r} to {ty}", "m") if ty in ("half", "bfloat") else r
    _map(k, op, apply)


LOWERINGS = {name: _math for name in MATH_FUNCTIONS}
LOWERINGS["cuda_tile.fpowi"] = _fpowi
