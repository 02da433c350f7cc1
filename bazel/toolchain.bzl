"""The TileIR compiler toolchain: which tileiras/tileir a tileir_library runs.

A toolchain names the two commands of the compile chain and the files they
read (the compiler's sources), so every action declares its whole input set
and the disk cache and remote execution can trust it.

Two ways to describe a compiler:

  * Python sources (the default toolchain): `srcs` are the compiler's files
    and `launcher` the script that runs them as `launcher tileiras ARGS...` /
    `launcher tileir ARGS...` (default build_rules/launch.py, the one the CMake
    integration uses too). One action packs them into a zip with precompiled
    modules (bazel/zip_compiler.py); `interpreter` runs `python -B ZIP TOOL
    ARGS...`, so each compile action has a single compiler input.
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
        "inputs": "depset of files every action of the chain reads (the compiler zip, or `srcs` of prebuilt tools)",
        "env": "dict of environment variables the actions set",
    },
)

def _repo_relative(f):
    """A file's path inside its repository: its path in the compiler zip."""
    path = f.short_path
    if path.startswith("../"):  # ../REPO/path for files of external repositories
        path = path.split("/", 2)[2]
    return path

def _compiler_zip(ctx, interp):
    """One action: the compiler's sources (with .pyc) in one zip that `python ZIP TOOL ...` runs.

    Every compile action then has one compiler input instead of one per source
    file, which is what a sandbox pays for, and imports precompiled modules."""
    out = ctx.actions.declare_file(ctx.label.name + ".compiler.zip")
    files = {}
    for f in ctx.files.srcs + [ctx.file.launcher]:
        files[_repo_relative(f)] = f
    listing = ctx.actions.args()
    listing.set_param_file_format("multiline")
    listing.use_param_file("@%s", use_always = True)
    listing.add_all(["%s=%s" % (name, files[name].path) for name in sorted(files)])
    ctx.actions.run(
        executable = interp,
        arguments = ["-B", ctx.file._zipper.path, "--output", out.path,
                     "--main", _repo_relative(ctx.file.launcher), listing],
        inputs = depset(files.values() + [ctx.file._zipper]),
        outputs = [out],
        tools = [interp],
        mnemonic = "TileirCompilerZip",
        progress_message = "Packing the TileIR compiler (%s)" % ctx.label,
    )
    return out

def _tileir_toolchain_impl(ctx):
    prebuilt = bool(ctx.attr.tileiras) and bool(ctx.attr.tileir)
    if bool(ctx.attr.interpreter) == prebuilt or bool(ctx.attr.tileiras) != bool(ctx.attr.tileir):
        fail("tileir_toolchain %s: set either `interpreter` (run the compiler from `srcs`) " % ctx.label +
             "or both `tileiras` and `tileir` (prebuilt executables)")
    env = dict(ctx.attr.env)
    if ctx.attr.version:
        env["TILEIRAS_TOOLCHAIN_VERSION"] = ctx.attr.version
    if prebuilt:
        commands = {}
        for tool in ("tileiras", "tileir"):
            run = getattr(ctx.attr, tool)[DefaultInfo].files_to_run
            commands[tool] = struct(executable = run, arguments = [], tools = [run])
        inputs = depset(ctx.files.srcs)
    else:
        interp = ctx.attr.interpreter[DefaultInfo].files_to_run
        compiler = _compiler_zip(ctx, interp)

        # -B: never write .pyc files anywhere (the zip carries them).
        commands = {
            tool: struct(executable = interp, arguments = ["-B", compiler.path, tool], tools = [interp])
            for tool in ("tileiras", "tileir")
        }
        inputs = depset([compiler])
    info = TileirToolchainInfo(
        tileiras = commands["tileiras"],
        tileir = commands["tileir"],
        inputs = inputs,
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
            doc = "Files the compiler reads: its Python sources and data, packed with the launcher into " +
                  "one zip that every action takes as input (paths inside it: as in their repository). " +
                  "With prebuilt executables: extra inputs of every action.",
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
        "_zipper": attr.label(
            default = Label("//bazel:zip_compiler.py"),
            allow_single_file = True,
        ),
        "version": attr.string(
            doc = "Free-form compiler build name; changing it reruns every action.",
            default = "",
        ),
    },
)
