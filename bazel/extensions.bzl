"""Bzlmod module extension: the @tileiras_python repository (Bazel 6+ only).

    tileiras_python = use_extension("@tileiras//bazel:extensions.bzl", "tileiras_python")
    tileiras_python.interpreter(python = "/opt/py311/bin/python3")  # optional
    use_repo(tileiras_python, "tileiras_python")

Kept apart from repositories.bzl because Bazel 4.2.3 cannot load a file that
mentions module_extension or tag_class.
"""

load(":repositories.bzl", _tileiras_python_repo = "tileiras_python")

_interpreter = tag_class(
    doc = "The Python that runs the compiler; TILEIRAS_PYTHON in the environment still wins.",
    attrs = {"python": attr.string(doc = "interpreter path, or a name looked up on PATH")},
)

def _tileiras_python_impl(module_ctx):
    python = ""

    # The root module is listed first: its choice wins over any dependency's.
    for module in module_ctx.modules:
        for tag in module.tags.interpreter:
            if tag.python and not python:
                python = tag.python
    _tileiras_python_repo(name = "tileiras_python", python = python)

tileiras_python = module_extension(
    implementation = _tileiras_python_impl,
    tag_classes = {"interpreter": _interpreter},
)
