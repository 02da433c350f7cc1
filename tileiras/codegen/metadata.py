"""Launch facts of a compiled module: what a launcher needs to call each kernel.

One `ModuleMetadata` per (module, target) compile. It is written next to the
output as JSON (`--emit-metadata`) and read back by `tileir package` and
`tileir header`. The JSON is canonical (sorted keys, fixed separators) so the
same compile always writes the same bytes.
"""

from __future__ import annotations

import re

from tileiras.errors import ExitCode, TileirasError
from tileiras.ir.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: a cache hit reads metadata without importing typing
    from typing import Any

SCHEMA_VERSION = 1
WARPS_PER_SM = 64           # a workspace holds one 128-byte map per (SM, physical warp %warpid, map)
WORKSPACE_PER_MAP = WARPS_PER_SM * 128

# TileIR scalar spellings a kernel parameter may have; any `ptr<...>` is a pointer.
SCALAR_TYPES: frozenset[str] = frozenset(
    {"i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"}
)
_POINTER = re.compile(r"^ptr<[A-Za-z0-9_]+>$")
_GPU = re.compile(r"^sm_[0-9]{2,3}[af]?$")


def is_valid_param_type(spelling: str) -> bool:
    return spelling in SCALAR_TYPES or bool(_POINTER.match(spelling))


@record
class KernelParam:
    name: str
    type: str


@record
class KernelInfo:
    name: str
    params: tuple[KernelParam, ...]
    block: tuple[int, int, int]
    dynamic_smem: int = 0
    cluster: tuple[int, int, int] = (1, 1, 1)
    tma: tuple = ()     # codegen.tma_params.TmaParam of each hidden tensor-map parameter, in order
    # CTAs of the cluster each launched block becomes (PTX `.reqnctapercluster` + `.blocksareclusters`):
    # the launcher still passes one block per tile block and no cluster attribute (`cluster` stays 1)
    cta_cluster: tuple[int, int, int] = (1, 1, 1)
    # tensor maps the kernel makes itself (lowering/kernel_maps.py): its last parameter, hidden after the
    # maps, is a workspace of this many bytes per SM (codegen/nv_host.py), where per-CTA memory is not given
    kernel_maps: int = 0

    @property
    def workspace(self) -> int:
        """Bytes per SM of the workspace the launch gives the kernel (0: none)."""
        return self.kernel_maps * WORKSPACE_PER_MAP


@record
class ModuleMetadata:
    kernels: tuple[KernelInfo, ...]
    gpu: str

    def to_document(self) -> dict[str, Any]:
        """The JSON document of to_json (the compile cache writes it without importing json)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "gpu": self.gpu,
            "kernels": [
                {
                    "name": k.name,
                    "params": [{"name": p.name, "type": p.type} for p in k.params],
                    "block": list(k.block),
                    "dynamic_smem": k.dynamic_smem,
                    "cluster": list(k.cluster),
                    **({"tma": [t.to_json() for t in k.tma]} if k.tma else {}),
                    **({"cta_cluster": list(k.cta_cluster)} if tuple(k.cta_cluster) != (1, 1, 1) else {}),
                    **({"kernel_maps": k.kernel_maps} if k.kernel_maps else {}),
                }
                for k in self.kernels
            ],
        }

    def to_json(self) -> str:
        import json  # only when metadata is written: not on the compile path

        return json.dumps(self.to_document(), sort_keys=True, indent=1, separators=(",", ": ")) + "\n"

    @staticmethod
    def from_json(text: str | bytes) -> "ModuleMetadata":
        import json

        try:
            document = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _bad(f"not JSON ({exc})") from None
        return _parse_module(document)


# --- validation of the JSON document ------------------------------------------------


def _bad(why: str) -> TileirasError:
    return TileirasError(f"error: malformed kernel metadata: {why}", ExitCode.COMPILE_FAILED)


def _field(obj: Any, key: str, where: str, default: Any = ...) -> Any:
    if not isinstance(obj, dict):
        raise _bad(f"{where} must be an object")
    if key not in obj:
        if default is ...:
            raise _bad(f"{where} has no '{key}'")
        return default
    return obj[key]


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(f"{where} must be an integer >= {minimum}")
    return value


def _dim3(value: Any, where: str) -> tuple[int, int, int]:
    if not isinstance(value, list) or len(value) != 3:
        raise _bad(f"{where} must be a list of 3 integers")
    x, y, z = (_int(v, where, 1) for v in value)
    return (x, y, z)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or "\0" in value:
        raise _bad(f"{where} must be a non-empty string")
    return value


def _parse_param(obj: Any, where: str) -> KernelParam:
    name = _field(obj, "name", where)
    if not isinstance(name, str):
        raise _bad(f"{where}.name must be a string")
    spelling = _field(obj, "type", where)
    if not isinstance(spelling, str) or not is_valid_param_type(spelling):
        raise _bad(f"{where}.type {spelling!r} is not a TileIR scalar or pointer type")
    return KernelParam(name, spelling)


def _parse_kernel(obj: Any, where: str) -> KernelInfo:
    name = _name(_field(obj, "name", where), f"{where}.name")
    params = _field(obj, "params", where)
    if not isinstance(params, list):
        raise _bad(f"{where}.params must be a list")
    return KernelInfo(
        name=name,
        params=tuple(_parse_param(p, f"{where}.params[{i}]") for i, p in enumerate(params)),
        block=_dim3(_field(obj, "block", where), f"{where}.block"),
        dynamic_smem=_int(_field(obj, "dynamic_smem", where, 0), f"{where}.dynamic_smem", 0),
        cluster=_dim3(_field(obj, "cluster", where, [1, 1, 1]), f"{where}.cluster"),
        tma=_parse_tma(_field(obj, "tma", where, []), f"{where}.tma", len(params)),
        cta_cluster=_dim3(_field(obj, "cta_cluster", where, [1, 1, 1]), f"{where}.cta_cluster"),
        kernel_maps=_int(_field(obj, "kernel_maps", where, 0), f"{where}.kernel_maps", 0),
    )


def _parse_tma(value: Any, where: str, nparams: int) -> tuple:
    """The hidden tensor maps of a kernel (each field a user parameter's index or a constant)."""
    from tileiras.codegen.tensormap import DTYPES, SWIZZLES
    from tileiras.codegen.tma_params import TmaParam

    if not isinstance(value, list):
        raise _bad(f"{where} must be a list")
    out = []
    for i, doc in enumerate(value):
        try:
            spec = TmaParam.from_json(doc)
        except (KeyError, TypeError, ValueError, IndexError):
            raise _bad(f"{where}[{i}] is not a tensor-map record") from None
        fields = (*spec.dims, *spec.strides)
        rank = len(spec.dims)
        if spec.dtype not in DTYPES or spec.swizzle not in SWIZZLES or not 1 <= rank <= 5 \
                or len(spec.strides) != rank or len(spec.box) != rank \
                or not 0 <= spec.address < nparams or any(f.param >= nparams for f in fields):
            raise _bad(f"{where}[{i}] names a parameter, type, rank or swizzle the kernel does not have")
        out.append(spec)
    return tuple(out)


def _parse_module(document: Any) -> ModuleMetadata:
    version = _field(document, "schema_version", "metadata", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise _bad(f"unsupported schema_version {version!r} (expected {SCHEMA_VERSION})")
    gpu = _field(document, "gpu", "metadata")
    if not isinstance(gpu, str) or not _GPU.match(gpu):
        raise _bad(f"gpu {gpu!r} is not a target name like sm_90")
    kernels = _field(document, "kernels", "metadata")
    if not isinstance(kernels, list):
        raise _bad("kernels must be a list")
    parsed = tuple(_parse_kernel(k, f"kernels[{i}]") for i, k in enumerate(kernels))
    names = [k.name for k in parsed]
    if len(set(names)) != len(names):
        raise _bad("duplicate kernel name")
    return ModuleMetadata(kernels=parsed, gpu=gpu)


def sm_number(gpu: str) -> int:
    """`sm_90a` -> 90."""
    match = re.match(r"^sm_([0-9]+)[af]?$", gpu)
    if not match:
        raise TileirasError(f"error: '{gpu}' is not a target name like sm_90", ExitCode.INVALID_OPTIONS)
    return int(match.group(1))
