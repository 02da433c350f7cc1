"""A stand-in `tileir package|header` for testing the Bazel rules.

`package` writes a real x86-64 relocatable object (via llvmlite) whose
launchers `int NAME_launch(CUstream, uint32_t, uint32_t, uint32_t, ...)`
return TILEIR_ERROR_NO_DRIVER, and which embeds the cubins so the object
changes whenever they do (and the "fatbin" with --fatbin-out). `header`
declares those launchers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

NO_DRIVER, NO_DEVICE = 100, 101


def _values(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def _kernel_names(metadata_files: list[str]) -> list[str]:
    """Kernel names in first-seen order (package passes one metadata file per GPU)."""
    names: dict[str, None] = {}
    for path in metadata_files:
        names.update((k["name"], None) for k in json.loads(Path(path).read_text())["kernels"])
    return list(names)


def _package(argv: list[str]) -> int:
    import llvmlite.binding as llvm

    names = _kernel_names(_values(argv, "--metadata"))
    blob = b"".join(Path(spec.split("=", 1)[1]).read_bytes() for spec in _values(argv, "--cubin") + _values(argv, "--ptx"))
    data = "".join(f"\\{b:02X}" for b in blob)
    ir = [f'@fatbin = internal constant [{len(blob)} x i8] c"{data}"']
    for name in names:
        ir.append(f"define i32 @{name}_launch(ptr %s, i32 %x, i32 %y, i32 %z, ...) {{\n"
                  f"  %p = load volatile i8, ptr @fatbin\n  ret i32 {NO_DRIVER}\n}}")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = llvm.parse_assembly("\n".join(ir))
    machine = llvm.Target.from_triple("x86_64-unknown-linux-gnu").create_target_machine(reloc="pic")
    Path(_values(argv, "-o")[0]).write_bytes(machine.emit_object(module))
    for fatbin in _values(argv, "--fatbin-out"):
        Path(fatbin).write_bytes(b"FAKEFATBIN" + blob)
    return 0


def _header(argv: list[str]) -> int:
    lines = ["#pragma once", "#include <stdint.h>", "typedef struct CUstream_st *CUstream;",
             f"#define TILEIR_ERROR_NO_DRIVER {NO_DRIVER}", f"#define TILEIR_ERROR_NO_DEVICE {NO_DEVICE}"]
    lines += [f"int {n}_launch(CUstream stream, uint32_t gx, uint32_t gy, uint32_t gz, ...);"
              for n in _kernel_names(_values(argv, "--metadata"))]
    Path(_values(argv, "-o")[0]).write_text("\n".join(lines) + "\n")
    return 0


def main(argv: list[str]) -> int:
    commands = {"package": _package, "header": _header}
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
