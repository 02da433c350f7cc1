"""Every file a command writes goes through here: checked first, then replaced atomically.

A compiler that build systems run as root must harm nothing but its output.
So an output path may name a regular file (replaced through a temp file and a
rename: readers see the old content or the new, a failed run leaves no
partial file) or nothing yet. It is refused, with one line and exit 5 and
the target untouched, when it names a directory, a device, a FIFO or a
socket (renaming over `/dev/null` would replace the system's device with a
file), or a file the command reads (the same inode: also through a hard
link or a symlink), which the output would destroy. A symlink is written
through: its target is replaced and the link stays. The null device is the
one device accepted: `-o /dev/null` discards the output, as it does for
NVIDIA's tileiras, and the device is never opened, replaced or removed. The
side files named after a discarded output (`-MD`'s depfile, `--emit-metadata`'s
JSON) are discarded with it (`side_file`): `-o /dev/null -MD` creates no
`/dev/null.d`.
"""

from __future__ import annotations

import os
import stat

from .atomic import replace_file
from .errors import ExitCode, TileirasError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Iterable, Optional

# st_mode file type -> how a refusal names it
_NOT_REGULAR: tuple[tuple[int, str], ...] = (
    (stat.S_IFDIR, "a directory"),
    (stat.S_IFCHR, "a character device"),
    (stat.S_IFBLK, "a block device"),
    (stat.S_IFIFO, "a FIFO"),
    (stat.S_IFSOCK, "a socket"),
)


def _refuse(path: str, why: str) -> TileirasError:
    return TileirasError(f"error: refusing to write '{path}': {why}", ExitCode.COMPILE_FAILED)


def _identities(inputs: Iterable[str]) -> dict[tuple[int, int], str]:
    """(device, inode) of each input that exists (following links: the file actually read)."""
    found: dict[tuple[int, int], str] = {}
    for name in inputs:
        if not name or name == "-":
            continue
        try:
            st = os.stat(name)
        except (OSError, ValueError):
            continue
        found.setdefault((st.st_dev, st.st_ino), name)
    return found


def _is_null_device(st: os.stat_result) -> bool:
    if not stat.S_ISCHR(st.st_mode):
        return False
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(null.st_mode) and st.st_rdev == null.st_rdev


def side_file(output: str, suffix: str) -> str:
    """Where a side file named after the output goes (`k.cubin.d`, `k.cubin.json`): the null device when
    the output is discarded there (nothing is written beside a device: NVIDIA's tileiras has no
    depfile to follow, and a user discarding the output expects nothing under /dev)."""
    try:
        if _is_null_device(os.stat(output)):
            return os.devnull
    except (OSError, ValueError):
        pass
    return output + suffix


def output_target(path: str | os.PathLike[str], inputs: Iterable[str] = ()) -> Optional[str]:
    """The file writing `path` would replace (links followed), after checking that it is safe to
    replace: a regular file or nothing, and none of `inputs`; None for the null device (the output
    is discarded). Raises TileirasError (exit 5)."""
    name = os.fspath(path)
    if not name:
        raise _refuse(name, "empty file name")
    target = os.path.realpath(name) if os.path.islink(name) else name
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return _in_writable_folder(name, target)
    except OSError as exc:
        raise TileirasError(f"error: cannot write '{name}': {exc.strerror}", ExitCode.COMPILE_FAILED) from None
    if _is_null_device(st):
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = next((what for bits, what in _NOT_REGULAR if stat.S_IFMT(st.st_mode) == bits), "not a regular file")
        raise _refuse(name, f"it is {kind}, not a regular file" if kind.startswith("a ") else kind)
    source = _identities(inputs).get((st.st_dev, st.st_ino))
    if source is not None:
        same = "it is the input" if os.path.abspath(source) == os.path.abspath(name) else \
            f"it is the same file as the input '{source}'"
        raise _refuse(name, f"{same}, which writing would destroy")
    return _in_writable_folder(name, target)


def _in_writable_folder(name: str, target: str) -> str:
    """`target`, once its folder is known to take a new file (the temp file and the rename need
    that), so that a run that could not write its output fails before its work, not after."""
    import errno

    folder = os.path.dirname(target) or "."
    problem = 0 if os.path.isdir(folder) else errno.ENOENT
    if not problem and not os.access(folder, os.W_OK | os.X_OK):
        problem = errno.EROFS if _read_only_mount(folder) else errno.EACCES
    if problem:
        raise TileirasError(f"error: cannot write '{name}': {os.strerror(problem)}", ExitCode.COMPILE_FAILED)
    return target


def _read_only_mount(folder: str) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _same_file_key(path: str) -> str:
    """What `path` would replace, without judging it (for files checked only when written)."""
    try:
        return os.path.abspath(os.path.realpath(path))
    except (OSError, ValueError):
        return os.path.abspath(path)


def check_outputs(paths: Iterable[str], inputs: Iterable[str] = (), others: Iterable[str] = ()) -> None:
    """Check, before any work, every file a command will write: each of `paths` safe, no two the
    same; `others` (checked for safety when written, like the remarks file) only for sameness."""
    inputs = list(inputs)
    seen: dict[str, str] = {}
    for path in others:
        seen.setdefault(_same_file_key(path), path)
    for path in paths:
        found = output_target(path, inputs)
        if found is None:  # discarded: any number of outputs may go to the null device
            continue
        target = _same_file_key(found)
        if target in seen:
            raise TileirasError(f"error: two outputs name the same file: '{seen[target]}' and '{path}'",
                                ExitCode.INVALID_OPTIONS)
        seen[target] = path


def write_atomic(path: str | os.PathLike[str], data: bytes | str, inputs: Iterable[str] = ()) -> Optional[str]:
    """Write `data` to `path` (checked as `output_target` does) via a temp file beside it and a rename;
    returns the file written (a symlink's target), None when the output was discarded (the null
    device: a caller that removes its outputs after a failure must never remove that)."""
    target = output_target(path, inputs)
    if target is None:
        return None
    payload = data.encode() if isinstance(data, str) else data
    try:
        replace_file(target, payload, mode=0o644)
    except OSError as exc:
        raise TileirasError(f"error: cannot write '{os.fspath(path)}': {exc.strerror}", ExitCode.COMPILE_FAILED) \
            from None
    return target
