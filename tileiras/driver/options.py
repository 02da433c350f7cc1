"""The `tileiras` option surface: one declarative table, an LLVM-cl-style parser.

NVIDIA's tileiras parses its command line with LLVM's `cl` library, so the
spellings (`--opt-level=3`, `--opt-level 3`, `-O3`, `-o file`), the error
messages and the exit codes below follow what that tool observably does:
command-line parse errors exit 1, validation errors exit 2 (the wiki's
table says 2 for both; the observed behaviour wins).

The table holds every option of NVIDIA's tileiras 13.5 (`--help-hidden`), grouped as its help
groups them, then our build-system extensions (group "extension"); `--help` and friends print
it in NVIDIA's layout, and tests/test_options_table.py checks it against NVIDIA's tool.
"""

from __future__ import annotations

from ..ir.record import record
from ..target import BASE_NAMES
from ..errors import ExitCode, TileirasError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Optional

GPU_NAMES: tuple[str, ...] = BASE_NAMES     # the target table's base targets (tileiras/target/table.py)
HOST_ARCHS: tuple[str, ...] = ("x86_64", "aarch64")
HOST_OSES: tuple[str, ...] = ("linux", "windows")
SANITIZERS: tuple[str, ...] = ("memcheck",)
PREVIEW_FEATURES: tuple[str, ...] = ("simt",)
REMARK_FILTERS: tuple[str, ...] = ("none", "all", "memory", "tensorcore")
REMARK_FORMATS: tuple[str, ...] = ("command-line", "yaml")
EMIT_KINDS: tuple[str, ...] = ("llvm", "ptx", "cubin", "fatbin", "obj")
SINGLE_TARGET_KINDS: tuple[str, ...] = ("llvm", "ptx", "cubin")
BYTECODE_VERSIONS: tuple[str, ...] = ("13.1", "13.2", "13.3", "13.4", "13.5")
DEFAULT_OUTPUT = "elf.o"            # NVIDIA's default name; it holds a cubin
DEFAULT_REMARKS_FILE = "tileir_remarks.yaml"
STDOUT = "-"                        # `-o -`: the output goes to stdout
# stdout's own names: written as `-o -` is (an atomic rename cannot replace a pipe or a terminal)
STDOUT_NAMES: tuple[str, ...] = ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


@record
class OptionSpec:
    """One option: its spellings, what it stores, its help line, and where `--help` lists it."""

    dest: str
    names: tuple[str, ...]             # every spelling, e.g. ("--opt-level", "-O")
    kind: str                          # "flag" | "value" | "list" | "int"
    help: str
    choices: tuple[tuple[str, str], ...] = ()   # (value, help) pairs
    metavar: str = ""
    prefix: bool = False               # accepts the value glued on: -O3, -MFdeps.d (not -o or -l, as NVIDIA's)
    group: str = "assembler"           # "generic" | "assembler" | "remarks" | "extension"
    hidden: bool = False               # listed by --help-hidden / --help-list-hidden only


def _sm(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((n, "SM " + n[3:]) for n in names)


def _filters(what: str) -> tuple[tuple[str, str], ...]:
    kind = f" {what}" if what else ""
    return (("none", f"Disable{kind or ' all'} remarks"), ("all", f"Show all{kind} remarks"),
            ("memory", f"Show memory-related{kind} remarks"), ("tensorcore", f"Show tensor-core{kind} remarks"))


_REMARK_KINDS = ("analysis", "failed", "missed", "passed")

# Every option of NVIDIA's tileiras 13.5 (`--help-hidden` of the nvidia-cuda-tileiras wheel),
# same spelling, value kind and meaning; then our build-system extensions (group "extension").
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("help", ("--help",), "flag", "Display available options (--help-hidden for more)", group="generic"),
    OptionSpec("help", ("-h",), "flag", "Alias for --help", group="generic", hidden=True),
    OptionSpec("help_hidden", ("--help-hidden",), "flag", "Display all available options", group="generic",
               hidden=True),
    OptionSpec("help_list", ("--help-list",), "flag",
               "Display list of available options (--help-list-hidden for more)", group="generic"),
    OptionSpec("help_list_hidden", ("--help-list-hidden",), "flag", "Display list of all available options",
               group="generic", hidden=True),
    OptionSpec("print_all_options", ("--print-all-options",), "flag",
               "Print all option values after command line parsing", group="generic", hidden=True),
    OptionSpec("print_options", ("--print-options",), "flag", "Print non-default options after command line parsing",
               group="generic", hidden=True),
    OptionSpec("version", ("--version",), "flag", "Display the version of this program", group="generic"),
    OptionSpec("opt_level", ("--opt-level", "-O"), "int", "Specify optimization level. Default Value: 3.",
               metavar="<N>", prefix=True),
    OptionSpec("apply_controls", ("--apply-controls",), "value",
               "Composite ACF file forwarded to libNVVM and, when used, direct PTXAS. Paths requiring quoting, "
               "including paths with whitespace, are unsupported.", metavar="<path>"),
    OptionSpec("gpu_names", ("--gpu-name", "--arch"), "list", "Specify name of NVIDIA GPU to generate code for.",
               _sm(GPU_NAMES), "<value>"),
    OptionSpec("device_debug", ("--device-debug", "-g"), "flag",
               "Generate debug information (if present in the input bytecode)"),
    OptionSpec("host_arch", ("--host-arch",), "value", "Specify the architecture for the generated host code.",
               tuple((a, a) for a in HOST_ARCHS), "<value>"),
    OptionSpec("host_os", ("--host-os",), "value", "Specify the operating system for the generated host code.",
               tuple((o, o) for o in HOST_OSES), "<value>"),
    OptionSpec("libraries", ("-l",), "list", "Tile libraries to load. Requires the SIMT preview.", metavar="<path>"),
    OptionSpec("lineinfo", ("--lineinfo",), "flag",
               "Generate line-number information (if present in the input bytecode)"),
    OptionSpec("list_versions", ("--list-versions",), "flag", "List all supported bytecode versions and exit"),
    OptionSpec("output", ("--output-file", "-o"), "value", "Specify name of output file.", metavar="<file>"),
    OptionSpec("preview", ("--preview",), "list", "Enable one or more named preview features",
               metavar="<feature[,feature...]>"),
    OptionSpec("sanitize", ("--sanitize",), "value",
               "Enable compiler instrumentation for the sanitizer tool specified by the option.",
               (("memcheck", "Sanitize memory accesses"),), "<value>"),
    OptionSpec("remark_format", ("--remark-format",), "value", "Specify the format for remark output",
               (("command-line", "Print remarks to command-line"), ("yaml", "Write remarks to YAML file")),
               "<value>", group="remarks"),
    OptionSpec("remarks", ("--remarks",), "value",
               "Enable all remark types (passed, missed, failed, analysis) for the specified category",
               _filters(""), "<value>", group="remarks"),
    *(OptionSpec(f"remarks_{kind}", (f"--remarks-{kind}",), "value", f"Category for {kind} optimization remarks",
                 _filters(kind), "<value>", group="remarks") for kind in _REMARK_KINDS),
    OptionSpec("remarks_output_file", ("--remarks-output-file",), "value",
               f"Output file for YAML remark format. Default is {DEFAULT_REMARKS_FILE}", metavar="<string>",
               group="remarks"),
    # -- build-system extensions ----------------------------------------------
    OptionSpec("emit", ("--emit",), "value", "What to write: llvm, ptx, cubin, fatbin or obj (default: cubin, "
               "like NVIDIA's; fatbin and obj take several --gpu-name).", tuple((k, k) for k in EMIT_KINDS),
               "<kind>", group="extension"),
    OptionSpec("emit_metadata", ("--emit-metadata",), "flag", "Also write launch metadata (JSON) to <output>.json.",
               group="extension"),
    OptionSpec("header", ("--header",), "value", "Write the C header declaring the launchers of an object output.",
               metavar="<file.h>", group="extension"),
    OptionSpec("depfile_md", ("-MD",), "flag", "Write a Make/Ninja depfile of the files this compile read.",
               group="extension"),
    OptionSpec("depfile", ("-MF",), "value", "Depfile path (default: <output>.d).", metavar="<file>", prefix=True,
               group="extension"),
    OptionSpec("depfile_target", ("-MT",), "value", "Target named in the depfile (default: the output).",
               metavar="<target>", prefix=True, group="extension"),
    OptionSpec("cache_dir", ("--cache-dir",), "value",
               "Compile cache directory (default: $TILEIRAS_CACHE_DIR, else $XDG_CACHE_HOME/tileiras or "
               "~/.cache/tileiras).", metavar="<dir>", group="extension"),
    OptionSpec("no_cache", ("--no-cache",), "flag", "Do not read or write the compile cache.", group="extension"),
    OptionSpec("print_ir_after_all", ("--print-ir-after-all",), "flag", "Print the IR after each pass to stderr.",
               group="extension"),
    OptionSpec("time_passes", ("--time-passes",), "flag", "Report the time taken by each compile stage.",
               group="extension"),
)

_BY_NAME: dict[str, OptionSpec] = {name: spec for spec in OPTIONS for name in spec.names}
_BOOLEANS: dict[str, bool] = {"true": True, "TRUE": True, "True": True, "1": True,
                              "false": False, "FALSE": False, "False": False, "0": False}


@record(frozen=False)  # not dataclasses: its import costs a cache hit ~10 ms
class Options:
    input: Optional[str] = None
    opt_level: int = 3
    apply_controls: Optional[str] = None
    gpu_names: tuple[str, ...] = ()
    device_debug: bool = False
    lineinfo: bool = False
    host_arch: str = "x86_64"
    host_os: str = "linux"
    libraries: tuple[str, ...] = ()
    list_versions: bool = False
    output: Optional[str] = None
    preview: tuple[str, ...] = ()      # each --preview= value as given (comma lists kept whole)
    sanitize: Optional[str] = None
    remark_format: str = "command-line"
    remarks: str = "none"
    remarks_analysis: Optional[str] = None   # None: what --remarks says
    remarks_failed: Optional[str] = None
    remarks_missed: Optional[str] = None
    remarks_passed: Optional[str] = None
    remarks_output_file: str = DEFAULT_REMARKS_FILE
    help: bool = False
    help_hidden: bool = False
    help_list: bool = False
    help_list_hidden: bool = False
    print_all_options: bool = False
    print_options: bool = False
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
        out = self.output or DEFAULT_OUTPUT
        return STDOUT if out in STDOUT_NAMES else out

    @property
    def emit_kind(self) -> str:
        """What is written: a cubin for any output name, as NVIDIA's does, unless --emit says otherwise."""
        return self.emit or "cubin"

    @property
    def preview_features(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f for value in self.preview for f in value.split(",")))

    def remark_filter(self, kind: str) -> str:
        """The category filter of one remark kind (passed, missed, failed, analysis)."""
        return getattr(self, f"remarks_{kind}") or self.remarks

    @property
    def remarks_enabled(self) -> bool:
        return any(self.remark_filter(kind) != "none" for kind in _REMARK_KINDS)


def _cl_error(message: str) -> TileirasError:
    return TileirasError(f"tileiras: {message}", ExitCode.NO_INPUT)  # LLVM cl exits 1


def _store(opts: Options, spec: OptionSpec, name: str, value: Optional[str]) -> None:
    if spec.kind == "flag":  # LLVM cl's bool: --flag, or --flag=true|false|1|0
        if value is not None and value not in _BOOLEANS:
            raise _cl_error(f"for the {name} option: '{value}' is invalid value for boolean argument! Try 0 or 1")
        setattr(opts, spec.dest, _BOOLEANS[value] if value is not None else True)
        return
    assert value is not None
    allowed = [c for c, _ in spec.choices]
    if allowed and value not in allowed:
        raise _cl_error(f"for the {name} option: Cannot find option named '{value}'! "
                        f"(valid values: {', '.join(allowed)})")
    if spec.dest == "preview":
        for feature in value.split(","):
            if feature not in PREVIEW_FEATURES:
                raise _cl_error(f"for the {name} option: unknown preview feature '{feature}'; "
                                f"supported features: {', '.join(PREVIEW_FEATURES)}")
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
    if opts.apply_controls is not None:
        # ACF files configure NVIDIA's libNVVM and ptxas builds; neither is what we run.
        raise TileirasError("error: --apply-controls is not supported by this compiler (ACF files configure "
                            "NVIDIA's libNVVM)", ExitCode.INVALID_OPTIONS)
    kind = opts.emit_kind
    targets = tuple(dict.fromkeys(opts.gpu_names))
    if len(targets) > 1 and kind in SINGLE_TARGET_KINDS:
        if opts.emit is None:
            opts.gpu_names = (opts.gpu_names[-1],)  # NVIDIA's: the last --gpu-name wins
        else:
            raise TileirasError(f"error: --emit={kind} takes exactly one --gpu-name; "
                                "several targets need a fatbin or an object output", ExitCode.INVALID_OPTIONS)
    if opts.header and kind != "obj":
        raise TileirasError("error: --header requires an object output (--emit=obj)", ExitCode.INVALID_OPTIONS)
    if opts.output_path == STDOUT and (opts.emit_metadata or (opts.depfile_md and not opts.depfile)):
        raise TileirasError("error: with -o - the side files need their own names (-MF for the depfile; "
                            "--emit-metadata needs a file output)", ExitCode.INVALID_OPTIONS)


def check_libraries(opts: Options) -> None:
    """`-l`: NVIDIA's checks and messages (exit 5). A tile library is a compiled object, not TileIR;
    linking one is not implemented here, so a readable one is refused by name."""
    if not opts.libraries:
        return
    if "simt" not in opts.preview_features:
        raise TileirasError("error: libraries require the 'simt' preview feature", ExitCode.COMPILE_FAILED)
    for path in opts.libraries:
        from ..input_file import read_regular

        try:
            read_regular(path, "tile library")  # never a FIFO's wait
        except TileirasError as exc:
            raise TileirasError(f"error: failed to open tile library: {exc.message.rsplit(': ', 1)[-1]}",
                                ExitCode.COMPILE_FAILED) from None
        raise TileirasError(f"error: failed to open tile library: linking tile libraries ('{path}') is not "
                            "supported by this compiler", ExitCode.COMPILE_FAILED)


def print_option_values(opts: Options, every: bool) -> str:
    """--print-options / --print-all-options: `--name=value` lines (non-default ones unless `every`)."""
    default = Options()
    lines = []
    for spec in OPTIONS:
        if spec.group == "generic":
            continue
        value = getattr(opts, spec.dest)
        if (every or value != getattr(default, spec.dest)) and spec.names[0].startswith("--"):
            shown = ",".join(value) if isinstance(value, tuple) else value
            lines.append(f"{spec.names[0]} = {'' if shown is None else shown}")
    return "\n".join(dict.fromkeys(lines))


_GROUP_TITLES: dict[str, str] = {
    "generic": "Generic Options:",
    "assembler": "TileIR Assembler Options:",
    "remarks": "TileIR Assembler Remark Options:\nFilter remarks by category.",
    "extension": "Build-system options (tileiras extensions):",
}


def _label(spec: OptionSpec, name: str) -> str:
    if spec.metavar and name.startswith("--"):
        return f"{name}={spec.metavar}"
    return f"{name} {spec.metavar}" if spec.metavar and spec.dest == "libraries" else name


def _rows(specs: list[OptionSpec]) -> list[str]:
    """Help rows sorted as LLVM's cl sorts them (by name without dashes); an alias names its option."""
    rows: list[tuple[str, list[str]]] = []
    for spec in specs:
        first = spec.names[0]
        rows.append((first, [f"  {_label(spec, first):<32} - {spec.help}"] +
                     [f"    ={value:<29} -   {meaning}" for value, meaning in spec.choices]))
        rows += [(alias, [f"  {alias:<32} - Alias for {first}"]) for alias in spec.names[1:]]
    rows.sort(key=lambda row: row[0].lstrip("-"))
    return [line for _, lines in rows for line in lines]


def help_text(hidden: bool = False, as_list: bool = False) -> str:
    """--help, --help-hidden, --help-list, --help-list-hidden: NVIDIA's layout, our extensions last."""
    lines = ["OVERVIEW: tileiras: a CUDA Tile IR optimizing assembler (Python)", "",
             "USAGE: tileiras [options] <tile bytecode file>", "", "OPTIONS:"]
    shown = [s for s in OPTIONS if hidden or not s.hidden]
    if as_list:
        if not hidden:  # as NVIDIA's (LLVM cl): the short list leaves out --help-list itself
            shown = [s for s in shown if s.dest != "help_list"]
        lines += _rows([s for s in shown if s.group != "extension"])
    else:
        for group in ("generic", "assembler", "remarks"):
            lines += ["", _GROUP_TITLES[group], ""] + _rows([s for s in shown if s.group == group])
    lines += ["", _GROUP_TITLES["extension"], ""] + _rows([s for s in shown if s.group == "extension"])
    return "\n".join(lines)
