"""Where every intermediate and output of a kernel library lives.

One table of suffixes, so CMake, Bazel and the tests agree on file names:

    <out_dir>/<stem>.<gpu>.ptx        PTX for one target (an intermediate, kept for inspection)
    <out_dir>/<stem>.<gpu>.ptx.json   its launch metadata (written by --emit-metadata)
    <out_dir>/<stem>.<gpu>.ptx.d      its depfile (build systems that use depfiles)
    <out_dir>/<stem>.<gpu>.cubin      the assembled cubin
    <out_dir>/<stem><object_suffix>   host object: fatbin + launchers
    <out_dir>/include/<header>        the target's header (CMake; Bazel keeps its own layout)

Paths are joined as strings with '/', never resolved: relative in, relative
out (Bazel's actions must not hold absolute paths).
"""

from __future__ import annotations

from dataclasses import dataclass

from .options import SOURCE_SUFFIXES, PlanError

PTX_SUFFIX = ".ptx"
METADATA_SUFFIX = ".ptx.json"     # the compiler writes <ptx>.json
DEPFILE_SUFFIX = ".ptx.d"
CUBIN_SUFFIX = ".cubin"
DEFAULT_OBJECT_SUFFIX = ".o"
HEADER_DIR = "include"


def join(directory: str, name: str) -> str:
    if not directory or directory == ".":
        return name
    return directory.rstrip("/") + "/" + name


def basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def source_stem(source: str) -> str:
    name = basename(source)
    for suffix in SOURCE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name.rsplit(".", 1)[0]


def assign_stems(sources: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(stem, source) pairs sorted by stem; two sources may not share a stem."""
    by_stem: dict[str, str] = {}
    for source in sources:
        stem = source_stem(source)
        if not stem:
            raise PlanError(f"source '{source}' has no file name before its extension")
        if stem in by_stem:
            if by_stem[stem] == source:
                raise PlanError(f"source '{source}' is listed twice")
            raise PlanError(f"sources '{by_stem[stem]}' and '{source}' would both produce '{stem}.o'; "
                            "rename one or split the target")
        by_stem[stem] = source
    return sorted(by_stem.items())


@dataclass(frozen=True)
class TargetFiles:
    """The files of one (source, GPU) pair."""

    ptx: str
    metadata: str
    depfile: str
    cubin: str


def target_files(out_dir: str, stem: str, gpu: str) -> TargetFiles:
    base = join(out_dir, f"{stem}.{gpu}")
    return TargetFiles(
        ptx=base + PTX_SUFFIX,
        metadata=base + METADATA_SUFFIX,
        depfile=base + DEPFILE_SUFFIX,
        cubin=base + CUBIN_SUFFIX,
    )


def object_path(out_dir: str, stem: str, object_suffix: str = DEFAULT_OBJECT_SUFFIX) -> str:
    return join(out_dir, stem + object_suffix)


def header_path(out_dir: str, header: str) -> str:
    return join(join(out_dir, HEADER_DIR), header)


def include_dir(out_dir: str) -> str:
    return join(out_dir, HEADER_DIR)
