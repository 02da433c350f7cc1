"""The build-system-neutral action layer of tileiras: CMake and Bazel both use it.

Given a kernel library request (sources, GPU names, options, output
directory) it returns the list of actions that build it: argv, inputs,
outputs, depfile. It runs nothing. See README.md for the action contract.
"""

from __future__ import annotations

from .actions import (BAZEL_POLICY, CMAKE_POLICY, Action, BuildPolicy, LibraryPlan, header_action,
                      library_plan, package_action, ptx_action, cubin_action, source_actions)
from .options import KernelOptions, PlanError

__all__ = [
    "Action", "BuildPolicy", "CMAKE_POLICY", "BAZEL_POLICY", "KernelOptions", "LibraryPlan", "PlanError",
    "cubin_action", "header_action", "library_plan", "package_action", "ptx_action", "source_actions",
]
