"""A Python environment with cuTile and this checkout's tileiras, without NVIDIA's tileiras wheel.

cuTile (cuda/tile/_compile.py, `_find_compiler_bin`) uses the `tileiras` of the
`nvidia-cuda-tileiras` wheel when its distribution metadata is installed, else the
first `tileiras` on PATH. The environment built here is a fresh venv whose
site-packages mirrors the test venv's (symlinks, so nothing is downloaded) except
NVIDIA's tileiras wheel (its metadata, and its `tileiras`/`tileirdisasm` under
`nvidia/cu13/bin`) and the installed copy of this project; a `.pth` file puts this
checkout on the path instead, and `bin/` holds our `tileiras` and `tileirdisasm`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = ("tileiras", "build_rules")                       # this project, from the checkout instead
NVIDIA_TOOLS = ("tileiras", "tileirdisasm")              # what the nvidia-cuda-tileiras wheel installs
SCRIPTS = {"tileiras": "tileiras.driver.tileiras_main", "tileirdisasm": "tileiras.driver.disasm_main"}


def _mirror(src: Path, dst: Path, skip: set[Path]) -> None:
    """`dst` holds a symlink to each entry of `src`, descending only into the directories of `skip`."""
    dst.mkdir(parents=True, exist_ok=True)
    inside = {p.parts[0] for p in skip if len(p.parts) > 1}
    for entry in src.iterdir():
        rel = Path(entry.name)
        if rel in skip:
            continue
        if entry.name in inside and entry.is_dir():
            _mirror(entry, dst / entry.name, {Path(*p.parts[1:]) for p in skip
                                              if len(p.parts) > 1 and p.parts[0] == entry.name})
        else:
            (dst / entry.name).symlink_to(entry)


def make_env(where: Path) -> tuple[Path, dict[str, str]]:
    """(python of the new environment, the environment variables to run it with)."""
    site = Path(sysconfig.get_paths()["purelib"])
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    py = where / "bin" / "python"
    env_site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
    skip = {Path(name) for name in OURS}
    skip |= {Path(p.name) for p in site.glob("tileiras-*.dist-info")}
    skip |= {Path(p.name) for p in site.glob("nvidia_cuda_tileiras-*.dist-info")}
    skip |= {Path("nvidia", "cu13", "bin", tool) for tool in NVIDIA_TOOLS}
    env_site.rmdir() if env_site.exists() and not any(env_site.iterdir()) else None
    _mirror(site, env_site, skip)
    (env_site / "tileiras_checkout.pth").write_text(str(ROOT) + "\n")
    for tool, module in SCRIPTS.items():
        script = where / "bin" / tool
        script.write_text(f"#!{py}\nfrom {module} import main\nmain()\n")
        script.chmod(0o755)
    path = os.pathsep.join([str(where / "bin"), "/usr/bin", "/bin"])
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=path, VIRTUAL_ENV=str(where), PYTHONHASHSEED="0")
    return py, env
