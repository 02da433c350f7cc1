"""The TileIR compiler toolchain: which tileiras/tileir a tileir_library runs.

A toolchain names the two commands of the compile chain and the files they
read (the compiler's sources), so every action declares its whole input set
and the disk cache and remote execution can trust it.

Two ways to describe a compiler:

  * Python sources (the default toolchain): `interpreter` runs `launcher` as
    `launcher tileiras ARGS...` or `launcher tileir ARGS...`; `srcs` are the
    compiler's files. The default launcher is build_rules/launch.py, the one
    the CMake integration uses too; it imports the compiler from the
    directory it sits in.
  * Prebuilt executables: set `tileiras` and `tileir` to executable targets
    (a py_binary from rules_python, a wrapper script, a native build) and leave
    `interpreter` unset.
"""

# A Label, not a string: it resolves against this repository wherever it is loaded from.
TILEIR_TOOLCHAIN_TYPE = Label("//bazel:toolchain_type")

TileirToolchainInfo = provider(
    doc = "How to run the TileIR compiler commands inside Bazel actions.",
    fields = {
        "tileiras": "struct(executable, arguments, tools): the `tileiras` command",
        "tileir": "struct(executable, arguments, tools): the `tileir` command",
        "inputs": "depset of files every action of the chain reads (compiler sources, launcher)",
        "env": "dict of environment variables the actions set",
    },
)

def _command(ctx, tool):
    """The executable, leading arguments and tools of one command."""
    explicit = getattr(ctx.attr, tool)
    if explicit:
        run = explicit[DefaultInfo].files_to_run
        return struct(executable = run, arguments = [], tools = [run])
    interp = ctx.attr.interpreter[DefaultInfo].files_to_run

    # -B: no .pyc files written next to the (read-only, symlinked) sources.
    return struct(
        executable = interp,
        arguments = ["-B", ctx.file.launcher.path, tool],
        tools = [interp],
    )

def _tileir_toolchain_impl(ctx):
    prebuilt = bool(ctx.attr.tileiras) and bool(ctx.attr.tileir)
    if bool(ctx.attr.interpreter) == prebuilt or bool(ctx.attr.tileiras) != bool(ctx.attr.tileir):
        fail("tileir_toolchain %s: set either `interpreter` (run the compiler from `srcs`) " % ctx.label +
             "or both `tileiras` and `tileir` (prebuilt executables)")
    inputs = list(ctx.files.srcs)
    if ctx.attr.interpreter:
        inputs.append(ctx.file.launcher)
    env = dict(ctx.attr.env)
    if ctx.attr.version:
        env["TILEIRAS_TOOLCHAIN_VERSION"] = ctx.attr.version
    info = TileirToolchainInfo(
        tileiras = _command(ctx, "tileiras"),
        tileir = _command(ctx, "tileir"),
        inputs = depset(inputs),
        env = env,
    )
    return [platform_common.ToolchainInfo(tileir = info)]

tileir_toolchain = rule(
    implementation = _tileir_toolchain_impl,
    doc = "Describes a TileIR compiler for `tileir_library`. Register it with " +
          "`toolchain(toolchain_type = \"@tileiras//bazel:toolchain_type\")`.",
    attrs = {
        "interpreter": attr.label(
            doc = "Python that runs `launcher` (with llvmlite, numpy, ml_dtypes and nvidia-cuda-nvcc installed).",
            executable = True,
            cfg = "exec",
            allow_files = True,
        ),
        "launcher": attr.label(
            doc = "Script run as `launcher tileiras|tileir ARGS...`; it finds the compiler next to itself.",
            default = Label("//:build_rules/launch.py"),
            allow_single_file = [".py"],
        ),
        "srcs": attr.label_list(
            doc = "Files the compiler reads: its Python sources and data. Every action declares them as inputs.",
            allow_files = True,
        ),
        "tileiras": attr.label(
            doc = "Prebuilt `tileiras` executable (instead of `interpreter`).",
            executable = True,
            cfg = "exec",
            allow_files = True,
        ),
        "tileir": attr.label(
            doc = "Prebuilt `tileir` executable (instead of `interpreter`).",
            executable = True,
            cfg = "exec",
            allow_files = True,
        ),
        "env": attr.string_dict(
            doc = "Environment of every compile action (e.g. CUDA_ROOT for another ptxas). Keep paths relative or machine-independent: the environment is part of every cache key.",
        ),
        "version": attr.string(
            doc = "Free-form compiler build name; changing it reruns every action.",
            default = "",
        ),
    },
)
