"""Command-line entry points, options, exit codes and diagnostics."""
