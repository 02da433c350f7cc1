"""The `tileiras` option surface: one declarative table, an LLVM-cl-style parser.

NVIDIA's tileiras parses its command line with LLVM's `cl` library, so the
spellings (`--opt-level=3`, `--opt-level 3`, `-O3`, `-o file`), the error
messages and the exit codes below follow what that tool observably does:
command-line parse errors exit 1, validation errors exit 2 (the wiki's
table says 2 for both; the observed behaviour wins).

Options after the NVIDIA-compatible block are our build-system extensions.
"""

from __future__ import annotations

from ..ir.record import record
from .errors import ExitCode, TileirasError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Optional

GPU_NAMES: tuple[str, ...] = (
    "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90",
    "sm_100", "sm_103", "sm_107", "sm_110", "sm_120", "sm_121",
)
HOST_ARCHS: tuple[str, ...] = ("x86_64", "aarch64")
HOST_OSES: tuple[str, ...] = ("linux", "windows")
SANITIZERS: tuple[str, ...] = ("memcheck",)
EMIT_KINDS: tuple[str, ...] = ("llvm", "ptx", "cubin", "fatbin", "obj")
BYTECODE_VERSIONS: tuple[str, ...] = ("13.1", "13.2", "13.3", "13.4", "13.5")

# Output extension -> what is written when --emit is not given.
EMIT_BY_EXTENSION: dict[str, str] = {
    ".ll": "llvm", ".ptx": "ptx", ".cubin": "cubin", ".fatbin": "fatbin", ".o": "obj", ".obj": "obj",
}


@record
class OptionSpec:
    """One option: its spellings, what it stores, and its help line."""

    dest: str
    names: tuple[str, ...]             # every spelling, e.g. ("--opt-level", "-O")
    kind: str                          # "flag" | "value" | "list" | "int"
    help: str
    choices: tuple[str, ...] = ()
    metavar: str = ""
    prefix: bool = False               # accepts the value glued on: -O3, -ofile, -MFdeps.d
    hidden: bool = False               # our extensions: listed under their own heading


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("opt_level", ("--opt-level", "-O"), "int", "Specify optimization level. Default Value: 3.", metavar="<N>", prefix=True),
    OptionSpec("gpu_names", ("--gpu-name", "--arch"), "list", "Specify name of NVIDIA GPU to generate code for.", GPU_NAMES, "<value>"),
    OptionSpec("device_debug", ("--device-debug", "-g"), "flag", "Generate debug information (if present in the input bytecode)"),
    OptionSpec("lineinfo", ("--lineinfo",), "flag", "Generate line-number information (if present in the input bytecode)"),
    OptionSpec("host_arch", ("--host-arch",), "value", "Specify the architecture for the generated host code.", HOST_ARCHS, "<value>"),
    OptionSpec("host_os", ("--host-os",), "value", "Specify the operating system for the generated host code.", HOST_OSES, "<value>"),
    OptionSpec("libraries", ("-l",), "list", "Tile libraries to load. Requires the SIMT preview.", metavar="<path>", prefix=True),
    OptionSpec("list_versions", ("--list-versions",), "flag", "List all supported bytecode versions and exit"),
    OptionSpec("output", ("--output-file", "-o"), "value", "Specify name of output file.", metavar="<file>", prefix=True),
    OptionSpec("preview", ("--preview",), "value", "Enable one or more named preview features", metavar="<feature[,feature...]>"),
    OptionSpec("sanitize", ("--sanitize",), "value", "Enable compiler instrumentation for the sanitizer tool specified by the option.", SANITIZERS, "<value>"),
    OptionSpec("help", ("--help", "-h"), "flag", "Display available options"),
    OptionSpec("version", ("--version",), "flag", "Display the version of this program"),
    # -- build-system extensions ----------------------------------------------
    OptionSpec("emit", ("--emit",), "value", "What to write: llvm, ptx, cubin, fatbin or obj (default: from the output extension, else obj).", EMIT_KINDS, "<kind>", hidden=True),
    OptionSpec("emit_metadata", ("--emit-metadata",), "flag", "Also write launch metadata (JSON) to <output>.json.", hidden=True),
    OptionSpec("header", ("--header",), "value", "Write the C header declaring the launchers of an object output.", metavar="<file.h>", hidden=True),
    OptionSpec("depfile_md", ("-MD",), "flag", "Write a Make/Ninja depfile of the files this compile read.", hidden=True),
    OptionSpec("depfile", ("-MF",), "value", "Depfile path (default: <output>.d).", metavar="<file>", prefix=True, hidden=True),
    OptionSpec("depfile_target", ("-MT",), "value", "Target named in the depfile (default: the output).", metavar="<target>", prefix=True, hidden=True),
    OptionSpec("cache_dir", ("--cache-dir",), "value", "Compile cache directory (default: $TILEIRAS_CACHE_DIR or the user cache dir).", metavar="<dir>", hidden=True),
    OptionSpec("no_cache", ("--no-cache",), "flag", "Do not read or write the compile cache.", hidden=True),
    OptionSpec("print_ir_after_all", ("--print-ir-after-all",), "flag", "Print the IR after each pass to stderr.", hidden=True),
    OptionSpec("time_passes", ("--time-passes",), "flag", "Report the time taken by each compile stage.", hidden=True),
)

_BY_NAME: dict[str, OptionSpec] = {name: spec for spec in OPTIONS for name in spec.names}


@record(frozen=False)  # not dataclasses: its import costs a cache hit ~10 ms
class Options:
    input: Optional[str] = None
    opt_level: int = 3
    gpu_names: tuple[str, ...] = ()
    device_debug: bool = False
    lineinfo: bool = False
    host_arch: str = "x86_64"
    host_os: str = "linux"
    libraries: tuple[str, ...] = ()
    list_versions: bool = False
    output: Optional[str] = None
    preview: Optional[str] = None
    sanitize: Optional[str] = None
    help: bool = False
    version: bool = False
    emit: Optional[str] = None
    emit_metadata: bool = False
    header: Optional[str] = None
    depfile_md: bool = False
    depfile: Optional[str] = None
    depfile_target: Optional[str] = None
    cache_dir: Optional[str] = None
    no_cache: bool = False
    print_ir_after_all: bool = False
    time_passes: bool = False

    @property
    def output_path(self) -> str:
        return self.output or "elf.o"

    @property
    def emit_kind(self) -> str:
        if self.emit:
            return self.emit
        for ext, kind in EMIT_BY_EXTENSION.items():
            if self.output_path.endswith(ext):
                return kind
        return "obj"


def _cl_error(message: str) -> TileirasError:
    return TileirasError(f"tileiras: {message}", ExitCode.NO_INPUT)  # LLVM cl exits 1


def _store(opts: Options, spec: OptionSpec, name: str, value: Optional[str]) -> None:
    if spec.kind == "flag":
        if value is not None:
            raise _cl_error(f"for the {name} option: may not take a value!")  # LLVM cl wording
        setattr(opts, spec.dest, True)
        return
    assert value is not None
    if spec.choices and value not in spec.choices:
        raise _cl_error(f"for the {name} option: Cannot find option named '{value}'!")
    if spec.kind == "int":
        try:
            setattr(opts, spec.dest, int(value, 0))
        except ValueError:
            raise _cl_error(f"for the {name} option: '{value}' value invalid for integer argument!") from None
    elif spec.kind == "list":
        setattr(opts, spec.dest, (*getattr(opts, spec.dest), value))
    else:
        setattr(opts, spec.dest, value)


def parse_args(argv: list[str]) -> Options:
    """Parse argv (without the program name); raises TileirasError on bad usage."""
    opts = Options()
    positionals: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positionals.extend(argv[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        name, eq, glued = arg.partition("=")
        spec = _BY_NAME.get(name)
        value: Optional[str] = glued if eq else None
        if spec is None:
            # -O3, -ofile, -MFfile: a prefix option with its value glued on.
            spec = next((s for s in OPTIONS if s.prefix for n in s.names
                         if not n.startswith("--") and arg.startswith(n) and len(arg) > len(n)), None)
            if spec is None:
                raise _cl_error(f"Unknown command line argument '{arg}'.  Try: 'tileiras --help'")
            name = next(n for n in spec.names if not n.startswith("--") and arg.startswith(n))
            value = arg[len(name):]
        if spec.kind != "flag" and value is None:
            if spec.kind == "int" and name == "-O":
                # LLVM cl: -O takes its value glued on (-O3); a separate word is not read.
                raise _cl_error("for the -O option: requires a value!")
            if i >= len(argv):
                raise _cl_error(f"for the {name} option: requires a value!")
            value = argv[i]
            i += 1
        _store(opts, spec, name, value)
    if len(positionals) > 1:
        raise _cl_error("Too many positional arguments specified!\n"
                        "Can specify at most 1 positional arguments: See: tileiras --help")
    opts.input = positionals[0] if positionals else None
    return opts


def validate(opts: Options) -> None:
    """The checks NVIDIA's validator makes after the input is read (exit 2)."""
    if not opts.gpu_names:
        raise TileirasError("error: no GPU architecture specified; use --gpu-name=sm_XX", ExitCode.INVALID_OPTIONS)
    if not 0 <= opts.opt_level <= 3:
        raise TileirasError(f"error: invalid optimization level: {opts.opt_level}", ExitCode.INVALID_OPTIONS)
    if opts.device_debug and opts.opt_level != 0:
        raise TileirasError(
            "error: optimized debugging is currently not supported, change the optimization level to 0 "
            "or disable full debug info", ExitCode.INVALID_OPTIONS)
    kind = opts.emit_kind
    if len(set(opts.gpu_names)) > 1 and kind in ("llvm", "ptx", "cubin"):
        raise TileirasError(f"error: --emit={kind} takes exactly one --gpu-name; "
                            "several targets need a fatbin or an object output", ExitCode.INVALID_OPTIONS)
    if opts.header and kind != "obj":
        raise TileirasError("error: --header requires an object output (--emit=obj)", ExitCode.INVALID_OPTIONS)


def help_text() -> str:
    lines = [
        "OVERVIEW: tileiras: a CUDA Tile IR optimizing assembler (Python)",
        "",
        "USAGE: tileiras [options] <tile bytecode file>",
        "",
        "OPTIONS:",
    ]

    def block(specs: list[OptionSpec]) -> None:
        for spec in specs:
            label = spec.names[0] + (f"={spec.metavar}" if spec.metavar and spec.names[0].startswith("--") else
                                      f" {spec.metavar}" if spec.metavar else "")
            lines.append(f"  {label:<32} - {spec.help}")
            for alias in spec.names[1:]:
                lines.append(f"  {alias:<32} - Alias for {spec.names[0]}")
            for choice in spec.choices:
                lines.append(f"    ={choice:<29} -   {choice}")

    block([s for s in OPTIONS if not s.hidden])
    lines += ["", "Build-system options:", ""]
    block([s for s in OPTIONS if s.hidden])
    return "\n".join(lines)
