"""`python -m build_rules`: the action layer from the command line.

    plan       the actions of one or more kernel libraries (JSON or CMake)
    toolchain  compiler facts a build system needs at configure time
    gpu-names  the supported GPU names, one per line

Errors are one line on stderr and exit 2; nothing is written then.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tileiras.errors import ExitCode, TileirasError

from . import naming
from .actions import BuildPolicy, LibraryPlan, library_plan
from .options import (DEFAULT_GPU_NAMES, OPT_LEVELS, SOURCE_SUFFIXES, KernelOptions, PlanError)

FORMATS: tuple[str, ...] = ("json", "cmake")


def plan_from_request(target: dict[str, object], policy: BuildPolicy) -> LibraryPlan:
    """One library plan from a request entry (the JSON shape documented in README.md)."""
    known = {"name", "sources", "out_dir", "header", "gpu_names", "opt_level", "lineinfo", "device_debug",
             "object_suffix"}
    unknown = sorted(set(target) - known)
    name = str(target.get("name") or "")
    if not name:
        raise PlanError("request target has no name")
    if unknown:
        raise PlanError(f"target '{name}': unknown request field(s): {', '.join(unknown)}")
    try:
        options = KernelOptions.resolve(
            gpu_names=list(target.get("gpu_names") or []),  # type: ignore[call-overload]
            opt_level=target.get("opt_level"),  # type: ignore[arg-type]
            lineinfo=bool(target.get("lineinfo", False)),
            device_debug=bool(target.get("device_debug", False)),
        )
        return library_plan(
            name,
            [str(s) for s in target.get("sources") or []],  # type: ignore[union-attr]
            options,
            str(target.get("out_dir") or ""),
            header=str(target.get("header") or "") or None,
            policy=policy,
            object_suffix=str(target.get("object_suffix") or naming.DEFAULT_OBJECT_SUFFIX),
        )
    except PlanError as exc:
        raise PlanError(f"target '{name}': {exc.message}") from None


def _read_request(path: str) -> dict[str, object]:
    from tileiras.input_file import read_regular

    try:
        text = read_regular(path, "request").decode("utf-8")  # a regular file of bounded size
    except TileirasError as exc:
        raise TileirasError(f"cannot read request '{path}': {exc.message.rsplit(': ', 1)[-1]}",
                            ExitCode.UNREADABLE) from None
    except UnicodeDecodeError:
        raise TileirasError(f"cannot read request '{path}': not UTF-8 text", ExitCode.UNREADABLE) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"request '{path}' is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise PlanError(f"request '{path}' must be an object with a 'targets' list")
    return data


def _emit(text: str, output: str | None, inputs: tuple[str, ...] = ()) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    from tileiras.output import write_atomic

    target = Path(output)
    if target.is_file() and target.read_text(encoding="utf-8") == text:
        return  # unchanged: keep the timestamp, so nothing downstream reruns
    write_atomic(target, text, inputs)  # never a device, a FIFO or one of the command's inputs


def cmd_plan(args: argparse.Namespace) -> int:
    if args.request:
        request = _read_request(args.request)
        raw_policy = request.get("policy") or {}
        if not isinstance(raw_policy, dict):
            raise PlanError("request 'policy' must be an object")
        policy = BuildPolicy(depfiles=bool(raw_policy.get("depfiles", True)),
                             use_cache=bool(raw_policy.get("use_cache", True)))
        plans = [plan_from_request(t, policy) for t in request["targets"]]  # type: ignore[union-attr]
    else:
        if not args.name or not args.out_dir:
            raise PlanError("plan needs --request FILE, or --name, --out-dir and sources")
        policy = BuildPolicy(depfiles=not args.no_depfiles, use_cache=not args.no_cache)
        target = {"name": args.name, "sources": args.sources, "out_dir": args.out_dir, "header": args.header,
                  "gpu_names": args.gpu_names, "opt_level": args.opt_level, "lineinfo": args.lineinfo,
                  "device_debug": args.device_debug, "object_suffix": args.object_suffix}
        plans = [plan_from_request(target, policy)]
    if args.format == "cmake":
        from .render_cmake import render_plans

        text = render_plans(plans)
    else:
        text = json.dumps({"targets": [plan.to_dict() for plan in plans]}, indent=2) + "\n"
    _emit(text, args.output, (args.request or "", *(args.sources or ())))
    return 0


def toolchain_facts(python: str | None) -> dict[str, str | list[str]]:
    from tileiras.driver.options import GPU_NAMES

    from .toolchain import compiler_files, compiler_version, default_toolchain, fingerprint, package_root

    files = compiler_files()
    chain = default_toolchain(python)
    return {
        "TileIR_VERSION": compiler_version(),
        "TileIR_ROOT": str(package_root()),
        "TileIR_SUPPORTED_GPU_NAMES": list(GPU_NAMES),
        "TileIR_DEFAULT_GPU_NAMES": list(DEFAULT_GPU_NAMES),
        "TileIR_OPT_LEVELS": [str(level) for level in OPT_LEVELS],
        "TileIR_SOURCE_SUFFIXES": list(SOURCE_SUFFIXES),
        "TileIR_TILEIRAS_COMMAND": list(chain.tileiras),
        "TileIR_TILEIR_COMMAND": list(chain.tileir),
        "TileIR_COMPILER_FILES": [str(f) for f in files],
        "TileIR_COMPILER_FINGERPRINT": fingerprint(files),
    }


def cmd_toolchain(args: argparse.Namespace) -> int:
    from .toolchain import missing_runtime_modules

    missing = [] if args.no_check else missing_runtime_modules()
    if missing:
        raise TileirasError(f"this Python ({sys.executable}) lacks the compiler's dependencies: "
                            f"{', '.join(missing)}; install tileiras into it (pip install tileiras) or "
                            "point the build at the Python that has it", ExitCode.INVALID_OPTIONS)
    facts = toolchain_facts(args.python or sys.executable)
    if args.format == "cmake":
        from .render_cmake import render_variables

        text = render_variables(facts)
    else:
        text = json.dumps(facts, indent=2) + "\n"
    _emit(text, args.output)
    return 0


def cmd_gpu_names(args: argparse.Namespace) -> int:
    from tileiras.driver.options import GPU_NAMES

    print("\n".join(GPU_NAMES))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m build_rules",
                                     description="The TileIR build action layer shared by CMake and Bazel.")
    sub = parser.add_subparsers(dest="command", required=True)

    plan = sub.add_parser("plan", help="print the actions of kernel libraries")
    plan.add_argument("--format", choices=FORMATS, default="json")
    plan.add_argument("--request", help="JSON request with several targets (see build_rules/README.md)")
    plan.add_argument("-o", "--output", help="write here (only when the content changes) instead of stdout")
    plan.add_argument("--name", help="target name (default header NAME.h)")
    plan.add_argument("--out-dir", help="directory for every output of the target")
    plan.add_argument("--header", help="header file name")
    plan.add_argument("--gpu-name", dest="gpu_names", action="append", default=[])
    plan.add_argument("--opt-level", default=None)
    plan.add_argument("--lineinfo", action="store_true")
    plan.add_argument("--device-debug", "-g", action="store_true")
    plan.add_argument("--object-suffix", default=naming.DEFAULT_OBJECT_SUFFIX)
    plan.add_argument("--no-depfiles", action="store_true", help="do not ask the compiler for depfiles")
    plan.add_argument("--no-cache", action="store_true", help="pass --no-cache to the compiler")
    plan.add_argument("sources", nargs="*")
    plan.set_defaults(func=cmd_plan)

    tool = sub.add_parser("toolchain", help="print the compiler facts a build system needs")
    tool.add_argument("--format", choices=FORMATS, default="json")
    tool.add_argument("--python", help="the Python that runs the tools (default: this one)")
    tool.add_argument("--no-check", action="store_true", help="skip the check of the runtime dependencies")
    tool.add_argument("-o", "--output")
    tool.set_defaults(func=cmd_toolchain)

    names = sub.add_parser("gpu-names", help="print the supported GPU names")
    names.set_defaults(func=cmd_gpu_names)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(args.func(args))
    except TileirasError as exc:
        message = exc.message[len("error: "):] if exc.message.startswith("error: ") else exc.message
        print(f"build_rules: error: {message}", file=sys.stderr)
        return int(exc.code)
