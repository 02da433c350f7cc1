"""tileiras: a CUDA Tile IR optimizing assembler for build systems.

Import-light on purpose: heavy dependencies (llvmlite, numpy) are imported
lazily by the stage that needs them, because process start-up is part of
every build step.
"""

__version__ = "0.1.0"
