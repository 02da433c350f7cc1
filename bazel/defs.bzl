"""tileir_library(): TileIR kernels as a C/C++ library.

    load("@tileiras//bazel:defs.bzl", "tileir_library")

    tileir_library(
        name = "kernels",
        srcs = ["vadd.tileirbc", "vscale.tileirbc"],
        gpu_names = ["sm_90", "sm_100"],
    )

    cc_binary(name = "app", srcs = ["main.c"], deps = [":kernels"])  # #include "kernels.h"

The actions are those of build_rules/actions.py with BAZEL_POLICY (no
depfiles: Bazel declares inputs itself; --no-cache: Bazel caches actions),
one per source and step, so each is cached on its own:

    SRC --(tileiras --emit=ptx, per GPU)-------> NAME/STEM.GPU.ptx + .ptx.json
    .ptx + .ptx.json --(tileiras --emit=cubin)-> NAME/STEM.GPU.cubin
    .ptx.json + cubins + newest PTX --(package)> NAME/STEM.o (fatbin + launchers), NAME/STEM.fatbin
    first GPU's .ptx.json of each source -----> NAME.h (or `header`), by tileir header
    all .o --(the C++ toolchain's ar)----------> libNAME.a

Starlark cannot call Python at analysis time, so this file restates that
plan; tests/test_bazel_rules.py checks it against build_rules action by
action. Editing one source reruns that source's actions, the header and the
archive; a change to cubin-level options reuses the PTX actions.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load(":toolchain.bzl", "TILEIR_TOOLCHAIN_TYPE")

# tileiras.driver.options.GPU_NAMES (tests keep the two in step).
SUPPORTED_GPU_NAMES = [
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_88",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_103",
    "sm_107",
    "sm_110",
    "sm_120",
    "sm_121",
]

# build_rules.options: OPT_LEVELS, DEBUG_OPT_LEVEL, SOURCE_SUFFIXES, HEADER_SUFFIXES.
OPT_LEVELS = [0, 1, 2, 3]
DEBUG_OPT_LEVEL = 0
SOURCE_SUFFIXES = [".tileirbc", ".tileir", ".mlir"]
HEADER_SUFFIXES = [".h", ".hpp"]

# --define=tileiras_remote_cache=grpc://HOST:PORT: PTX and cubins through the compile cache's
# remote tier, shared with CMake's -DTileIR_REMOTE_CACHE (add ..._read_only=1 to only read).
REMOTE_CACHE_DEFINE = "tileiras_remote_cache"

def _sm_number(gpu):
    return int(gpu[len("sm_"):])

def _check_options(ctx):
    """build_rules.options' checks, at analysis time, with its wording."""
    where = "tileir_library %s: " % ctx.label
    gpus = ctx.attr.gpu_names
    if not gpus:
        fail(where + "gpu_names is empty; supported: %s" % " ".join(SUPPORTED_GPU_NAMES))
    for gpu in gpus:
        if gpu not in SUPPORTED_GPU_NAMES:
            fail(where + "unknown GPU name '%s' in gpu_names; supported: %s" % (gpu, " ".join(SUPPORTED_GPU_NAMES)))
    seen = {}
    for gpu in gpus:
        if gpu in seen:
            fail(where + "GPU name '%s' is listed twice in gpu_names" % gpu)
        seen[gpu] = True
    level = ctx.attr.opt_level
    if level not in OPT_LEVELS:
        fail(where + "opt_level must be one of %s, got '%d'" % (" ".join([str(o) for o in OPT_LEVELS]), level))
    if ctx.attr.device_debug and level != DEBUG_OPT_LEVEL:
        fail(where + ("device_debug needs opt_level %d (optimized device debugging is not supported), " +
                      "got opt_level %d") % (DEBUG_OPT_LEVEL, level))
    header = ctx.attr.header
    if header:
        parts = header.split("/")
        if header.startswith("/") or ".." in parts or "" in parts:
            fail(where + "header '%s' must be a relative file name without '..', e.g. kernels.h" % header)
        if not header.endswith(tuple(HEADER_SUFFIXES)):
            fail(where + "header '%s' must end in %s" % (header, " or ".join(HEADER_SUFFIXES)))

def _stem(src):
    for suffix in SOURCE_SUFFIXES:
        if src.basename.endswith(suffix):
            return src.basename[:-len(suffix)]
    return src.basename.rsplit(".", 1)[0]

def _assign_stems(ctx):
    """(stem, source) pairs sorted by stem, as build_rules.naming.assign_stems."""
    by_stem = {}
    for src in ctx.files.srcs:
        stem = _stem(src)
        if not stem:
            fail("tileir_library %s: source '%s' has no file name before its extension" % (ctx.label, src.short_path))
        if stem in by_stem:
            fail("tileir_library %s: sources '%s' and '%s' would both produce '%s.o'; rename one or split the target" %
                 (ctx.label, by_stem[stem].short_path, src.short_path, stem))
        by_stem[stem] = src
    return sorted(by_stem.items())

def _flags(ctx):
    """build_rules.actions._flags under BAZEL_POLICY."""
    flags = ["-O%d" % ctx.attr.opt_level]
    if ctx.attr.lineinfo:
        flags.append("--lineinfo")
    if ctx.attr.device_debug:
        flags.append("-g")
    if ctx.var.get(REMOTE_CACHE_DEFINE):
        # The compile cache's remote tier, shared with CMake builds (tileiras/cache/remote.py);
        # its local tier is the action's scratch directory.
        flags.append("--cache-dir=tileiras-cache")
    else:
        flags.append("--no-cache")  # Bazel caches the actions; the compiler's cache would sit outside the sandbox
    return flags

def _env(ctx, tc):
    """The toolchain's environment, plus the remote compile cache of --define=tileiras_remote_cache=URL."""
    env = dict(tc.env)
    url = ctx.var.get(REMOTE_CACHE_DEFINE)
    if url:
        env["TILEIRAS_REMOTE_CACHE"] = url
        if ctx.var.get(REMOTE_CACHE_DEFINE + "_read_only", "0") not in ("", "0"):
            env["TILEIRAS_REMOTE_CACHE_READ_ONLY"] = "1"
    return env

def _run(ctx, tc, tool, mnemonic, progress, arguments, inputs, outputs):
    """One compiler action: it reads its declared inputs plus the compiler, writes only `outputs`."""
    command = getattr(tc, tool)
    args = ctx.actions.args()
    args.add_all(command.arguments)
    args.add_all(arguments)
    ctx.actions.run(
        executable = command.executable,
        arguments = [args],
        inputs = depset(inputs, transitive = [tc.inputs]),
        outputs = outputs,
        tools = command.tools,
        env = _env(ctx, tc),
        mnemonic = mnemonic,
        progress_message = progress,
    )

def _compile_source(ctx, tc, stem, src):
    """PTX and cubin actions of one source, per GPU; returns the files of each GPU."""
    files = []
    for gpu in ctx.attr.gpu_names:
        base = "%s/%s.%s" % (ctx.label.name, stem, gpu)
        ptx = ctx.actions.declare_file(base + ".ptx")
        meta = ctx.actions.declare_file(base + ".ptx.json")
        cubin = ctx.actions.declare_file(base + ".cubin")
        _run(
            ctx,
            tc,
            "tileiras",
            "TileirPtx",
            "TileIR PTX %s (%s)" % (src.short_path, gpu),
            ["--emit=ptx", "--gpu-name", gpu] + _flags(ctx) + [src.path, "-o", ptx.path, "--emit-metadata"],
            [src],
            [ptx, meta],
        )
        _run(
            ctx,
            tc,
            "tileiras",
            "TileirCubin",
            "TileIR cubin %s (%s)" % (stem, gpu),
            ["--emit=cubin", "--gpu-name", gpu] + _flags(ctx) + [ptx.path, "-o", cubin.path],
            [ptx, meta],  # the compiler reads the .ptx.json beside its PTX input
            [cubin],
        )
        files.append(struct(gpu = gpu, ptx = ptx, meta = meta, cubin = cubin))
    return files

def _package_source(ctx, tc, stem, files):
    """The host object of one source (every cubin plus the newest GPU's PTX, for JIT on newer
    GPUs) and, for the `fatbin` output group, the fatbin it embeds."""
    obj = ctx.actions.declare_file("%s/%s.o" % (ctx.label.name, stem))
    fatbin = ctx.actions.declare_file("%s/%s.fatbin" % (ctx.label.name, stem))
    newest = files[0]
    for entry in files:
        if _sm_number(entry.gpu) > _sm_number(newest.gpu):
            newest = entry
    arguments = ["package"]
    inputs = []
    for entry in files:  # every GPU's metadata: block size and shared memory may differ per GPU
        arguments += ["--metadata", entry.meta.path]
        inputs.append(entry.meta)
    for entry in files:
        arguments += ["--cubin", "%s=%s" % (entry.gpu, entry.cubin.path)]
        inputs.append(entry.cubin)
    arguments += ["--ptx", "%s=%s" % (newest.gpu, newest.ptx.path), "-o", obj.path]
    inputs.append(newest.ptx)

    # Bazel's one addition to build_rules' package step: the fatbin as a file of its own.
    arguments += ["--fatbin-out", fatbin.path]
    _run(ctx, tc, "tileir", "TileirPackage", "TileIR object %s" % stem, arguments, inputs, [obj, fatbin])
    return obj, fatbin

def _write_header(ctx, tc, metas):
    # Bazel keeps the header beside the target (include it as "pkg/NAME.h" or "NAME.h").
    header = ctx.actions.declare_file(ctx.attr.header or ctx.label.name + ".h")
    arguments = ["header"]
    for meta in metas:
        arguments += ["--metadata", meta.path]
    arguments += ["-o", header.path]
    _run(ctx, tc, "tileir", "TileirHeader", "TileIR header %s" % header.basename, arguments, metas, [header])
    return header

def _cc_info(ctx, header, objects):
    """CcInfo: the header on the include path, the objects in an archive, -ldl at link time."""
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    compilation_context = cc_common.create_compilation_context(
        headers = depset([header]),
        quote_includes = depset([header.dirname]),
    )

    # The host objects are position independent, so they serve both link modes.
    outputs = cc_common.create_compilation_outputs(
        objects = depset(objects),
        pic_objects = depset(objects),
    )
    linking_context, linking_outputs = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = outputs,
        user_link_flags = ["-ldl"],  # the launchers dlopen the CUDA driver
        name = ctx.label.name,
        disallow_dynamic_library = True,
    )
    archives = []
    library = linking_outputs.library_to_link
    if library:
        archives = [f for f in [library.static_library, library.pic_static_library] if f]
    return CcInfo(compilation_context = compilation_context, linking_context = linking_context), archives

def _tileir_library_impl(ctx):
    _check_options(ctx)
    tc = ctx.toolchains[str(TILEIR_TOOLCHAIN_TYPE)].tileir
    ptx, cubins, metas, objects, fatbins = [], [], [], [], []
    for stem, src in _assign_stems(ctx):
        files = _compile_source(ctx, tc, stem, src)
        ptx += [f.ptx for f in files]
        cubins += [f.cubin for f in files]
        metas.append(files[0].meta)
        obj, fatbin = _package_source(ctx, tc, stem, files)
        objects.append(obj)
        fatbins.append(fatbin)
    header = _write_header(ctx, tc, metas)
    cc_info, archives = _cc_info(ctx, header, objects)
    return [
        DefaultInfo(files = depset([header] + archives)),
        cc_info,
        OutputGroupInfo(
            ptx = depset(ptx),
            cubin = depset(cubins),
            fatbin = depset(fatbins),
            metadata = depset(metas),
        ),
    ]

_tileir_library = rule(
    implementation = _tileir_library_impl,
    attrs = {
        "srcs": attr.label_list(
            allow_files = SOURCE_SUFFIXES,
            mandatory = True,
            allow_empty = False,
        ),
        "gpu_names": attr.string_list(default = ["sm_90"]),
        "opt_level": attr.int(default = 3),
        "lineinfo": attr.bool(default = False),
        "device_debug": attr.bool(default = False),
        "header": attr.string(),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    toolchains = [str(TILEIR_TOOLCHAIN_TYPE), "@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
    incompatible_use_toolchain_transition = True,
)

def tileir_library(
        name,
        srcs,
        gpu_names = ["sm_90"],
        opt_level = 3,
        lineinfo = False,
        device_debug = False,
        header = None,
        **kwargs):
    """TileIR kernels compiled into a library that `cc_*` rules take in `deps`.

    Args:
      name: target name; the header is NAME.h unless `header` is set.
      srcs: TileIR bytecode (.tileirbc, .tileir) or text (.mlir) files.
      gpu_names: GPU targets to build cubins for (SUPPORTED_GPU_NAMES); the
        newest one's PTX is embedded too, for GPUs newer than all of them.
      opt_level: 0..3, passed to both tileiras steps.
      lineinfo: emit line-number information (for profilers).
      device_debug: emit device debug information (-g); needs opt_level = 0.
      header: header file name, e.g. "my_kernels.h".
      **kwargs: common attributes (visibility, tags, testonly, ...).

    Provides CcInfo (header, archive of the host objects, -ldl), DefaultInfo
    (header, archive) and OutputGroupInfo with `ptx`, `cubin`, `fatbin` (the
    one fatbin per source, also embedded in its host object) and `metadata`.
    """
    _tileir_library(
        name = name,
        srcs = srcs,
        gpu_names = gpu_names,
        opt_level = opt_level,
        lineinfo = lineinfo,
        device_debug = device_debug,
        header = header or "",
        **kwargs
    )
