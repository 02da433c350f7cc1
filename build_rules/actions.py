"""The compile chain of a kernel library as a list of actions.

    SRC --(tileiras --emit=ptx, per GPU)--> STEM.GPU.ptx (+ .ptx.json, + .ptx.d)
    STEM.GPU.ptx --(tileiras --emit=cubin, per GPU)--> STEM.GPU.cubin
    every GPU's .ptx.json + cubins + newest GPU's PTX --(tileir package)--> STEM.o   (fatbin + launchers)
    every source's first-GPU .ptx.json --(tileir header)--> HEADER

An action is data (tool, args, inputs, outputs, depfile): this module never
runs anything, so CMake and Bazel turn the same list into their own rules and
behave identically. A build system adds the compiler's own files to every
action's inputs (see `toolchain.py`), so upgrading the compiler rebuilds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from . import naming
from .options import KernelOptions, PlanError, check_header, check_path, check_source

TOOLS: tuple[str, ...] = ("tileiras", "tileir")


@dataclass(frozen=True)
class BuildPolicy:
    """What differs between build systems on purpose, and nothing else.

    depfiles: ask the compiler for a Make/Ninja depfile (CMake); Bazel declares
      inputs itself. use_cache: let the compiler use its content-addressed
      cache (CMake); Bazel caches actions and passes --no-cache.
    """

    depfiles: bool = True
    use_cache: bool = True


CMAKE_POLICY = BuildPolicy(depfiles=True, use_cache=True)
BAZEL_POLICY = BuildPolicy(depfiles=False, use_cache=False)


@dataclass(frozen=True)
class Action:
    step: str                      # "ptx" | "cubin" | "package" | "header"
    tool: str                      # "tileiras" | "tileir": which compiler command runs it
    args: tuple[str, ...]          # arguments after the command
    inputs: tuple[str, ...]        # every file it reads (besides the compiler itself)
    outputs: tuple[str, ...]       # every file it writes; outputs[0] is the main one
    depfile: str | None            # Make-format depfile it writes, or None
    description: str

    def argv(self, command: list[str] | tuple[str, ...]) -> list[str]:
        """The full command line, given the argv prefix that runs `self.tool`."""
        return [*command, *self.args]

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}


def _flags(options: KernelOptions, policy: BuildPolicy) -> list[str]:
    flags = [f"-O{options.opt_level}"]
    if options.lineinfo:
        flags.append("--lineinfo")
    if options.device_debug:
        flags.append("-g")
    if not policy.use_cache:
        flags.append("--no-cache")
    return flags


def ptx_action(source: str, stem: str, gpu: str, options: KernelOptions, out_dir: str,
               policy: BuildPolicy) -> Action:
    files = naming.target_files(out_dir, stem, gpu)
    args = ["--emit=ptx", "--gpu-name", gpu, *_flags(options, policy), source, "-o", files.ptx, "--emit-metadata"]
    depfile = None
    if policy.depfiles:
        depfile = files.depfile
        args += ["-MD", "-MF", files.depfile, "-MT", files.ptx]
    return Action("ptx", "tileiras", tuple(args), (source,), (files.ptx, files.metadata), depfile,
                  f"TileIR PTX {naming.basename(source)} ({gpu})")


def cubin_action(stem: str, gpu: str, options: KernelOptions, out_dir: str, policy: BuildPolicy) -> Action:
    files = naming.target_files(out_dir, stem, gpu)
    args = ["--emit=cubin", "--gpu-name", gpu, *_flags(options, policy), files.ptx, "-o", files.cubin]
    # The compiler reads the .ptx.json beside a PTX input when it is there.
    return Action("cubin", "tileiras", tuple(args), (files.ptx, files.metadata), (files.cubin,), None,
                  f"TileIR cubin {stem} ({gpu})")


def package_action(stem: str, options: KernelOptions, out_dir: str, object_suffix: str) -> Action:
    newest_gpu = options.newest_gpu
    newest = naming.target_files(out_dir, stem, newest_gpu)
    obj = naming.object_path(out_dir, stem, object_suffix)
    args = ["package"]
    inputs: list[str] = []
    # Every target's metadata: block size and shared memory may differ per GPU.
    for gpu in options.gpu_names:
        metadata = naming.target_files(out_dir, stem, gpu).metadata
        args += ["--metadata", metadata]
        inputs.append(metadata)
    for gpu in options.gpu_names:
        cubin = naming.target_files(out_dir, stem, gpu).cubin
        args += ["--cubin", f"{gpu}={cubin}"]
        inputs.append(cubin)
    args += ["--ptx", f"{newest_gpu}={newest.ptx}", "-o", obj]
    inputs.append(newest.ptx)
    return Action("package", "tileir", tuple(args), tuple(inputs), (obj,), None, f"TileIR object {stem}")


def header_action(metadata_files: list[str], header_file: str) -> Action:
    args = ["header"]
    for meta in metadata_files:
        args += ["--metadata", meta]
    args += ["-o", header_file]
    return Action("header", "tileir", tuple(args), tuple(metadata_files), (header_file,), None,
                  f"TileIR header {naming.basename(header_file)}")


def source_actions(source: str, stem: str, options: KernelOptions, out_dir: str,
                   policy: BuildPolicy = CMAKE_POLICY,
                   object_suffix: str = naming.DEFAULT_OBJECT_SUFFIX) -> list[Action]:
    """The chain of one source: PTX and cubin per GPU, then its host object."""
    actions: list[Action] = []
    for gpu in options.gpu_names:
        actions.append(ptx_action(source, stem, gpu, options, out_dir, policy))
        actions.append(cubin_action(stem, gpu, options, out_dir, policy))
    actions.append(package_action(stem, options, out_dir, object_suffix))
    return actions


@dataclass(frozen=True)
class LibraryPlan:
    """Everything one kernel library target builds."""

    name: str
    actions: tuple[Action, ...]
    objects: tuple[str, ...]           # link these (archive them, or use as object files)
    header: str                        # the generated header
    include_dir: str                   # put this on the consumers' include path
    ptx: tuple[str, ...] = field(default=())
    cubins: tuple[str, ...] = field(default=())
    metadata: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "actions": [action.to_dict() for action in self.actions],
            "objects": list(self.objects),
            "header": self.header,
            "include_dir": self.include_dir,
            "ptx": list(self.ptx),
            "cubins": list(self.cubins),
            "metadata": list(self.metadata),
        }


def library_plan(name: str, sources: list[str] | tuple[str, ...], options: KernelOptions, out_dir: str,
                 header: str | None = None, policy: BuildPolicy = CMAKE_POLICY,
                 object_suffix: str = naming.DEFAULT_OBJECT_SUFFIX) -> LibraryPlan:
    """All actions of one library: every source's chain, then the header."""
    if not sources:
        raise PlanError(f"target '{name}' has no SOURCES")
    for source in sources:
        check_source(source)
    check_path(out_dir, "output directory")
    header_name = header or f"{name}.h"
    check_header(header_name)
    actions: list[Action] = []
    ptx: list[str] = []
    cubins: list[str] = []
    metadata: list[str] = []
    objects: list[str] = []
    for stem, source in naming.assign_stems(sources):
        actions += source_actions(source, stem, options, out_dir, policy, object_suffix)
        for gpu in options.gpu_names:
            files = naming.target_files(out_dir, stem, gpu)
            ptx.append(files.ptx)
            cubins.append(files.cubin)
        metadata.append(naming.target_files(out_dir, stem, options.gpu_names[0]).metadata)
        objects.append(naming.object_path(out_dir, stem, object_suffix))
    header_file = naming.header_path(out_dir, header_name)
    actions.append(header_action(metadata, header_file))
    return LibraryPlan(name, tuple(actions), tuple(objects), header_file, naming.include_dir(out_dir),
                       tuple(ptx), tuple(cubins), tuple(metadata))
