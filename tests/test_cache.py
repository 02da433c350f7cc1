"""The content-addressed compile cache: hits, corruption, races, eviction, faults, keys."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

from build_rules.toolchain import compiler_files, fingerprint
from tileiras.cache import keys, tool_digest, versions
from tileiras.cache.store import HEADER, Cache, NullCache, default_cache_dir, open_cache, parse_size
from tileiras.codegen.metadata import KernelInfo, KernelParam, ModuleMetadata

ROOT = Path(__file__).parent.parent
KEY = "ab" * 32
OVERHEAD = HEADER.size + len(KEY)  # an entry's bytes besides its payload: header and key


def entry_path(cache: Cache, key: str = KEY) -> Path:
    return Path(cache.root, "v1", key[:2], key)


def test_miss_then_hit(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    assert cache.get(KEY) is None
    cache.put(KEY, b"cubin bytes")
    assert cache.get(KEY) == b"cubin bytes"
    stats = cache.stats()
    assert (stats.entries, stats.hits, stats.misses) == (1, 1, 1)
    assert stats.bytes == OVERHEAD + len(b"cubin bytes")


def test_entries_survive_a_new_process(tmp_path: Path) -> None:
    Cache(tmp_path).put(KEY, b"persisted")
    script = f"from tileiras.cache.store import Cache; import sys; sys.stdout.write(Cache(sys.argv[1]).get('{KEY}').decode())"
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, check=True)
    assert done.stdout == "persisted"


@pytest.mark.parametrize("damage", ["truncate", "flip_payload", "flip_digest", "flip_key", "empty", "garbage"])
def test_corrupt_entry_is_a_miss_with_one_warning_and_is_removed(tmp_path: Path, damage: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cache = Cache(tmp_path)
    cache.put(KEY, b"x" * 100)
    path = entry_path(cache)
    blob = bytearray(path.read_bytes())
    if damage == "truncate":
        blob = blob[:-10]
    elif damage == "flip_payload":
        blob[-1] ^= 0xFF
    elif damage == "flip_digest":
        blob[HEADER.size - 1] ^= 0x01
    elif damage == "flip_key":
        blob[HEADER.size + 3] ^= 0x01
    elif damage == "empty":
        blob = bytearray()
    else:
        blob = bytearray(b"not a cache entry at all" * 4)
    path.write_bytes(bytes(blob))
    assert cache.get(KEY) is None
    assert not path.exists()
    cache.put(KEY, b"x" * 100)  # recompiled and stored again
    assert cache.get(KEY) == b"x" * 100
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"tileiras: warning: compile cache: ignoring '{path}'")


def test_ptx_with_metadata_round_trip(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    meta = ModuleMetadata((KernelInfo("k", (KernelParam("a", "ptr<f32>"),), (128, 1, 1)),), "sm_90")
    cache.put_ptx(KEY, ".version 8.8\n", meta)
    assert cache.get_ptx(KEY) == (".version 8.8\n", meta)
    cache.put_ptx("cd" * 32, ".version 8.8\n")
    assert cache.get_ptx("cd" * 32) == (".version 8.8\n", None)
    cache.put("ef" * 32, b"valid entry, but not a PTX document")
    assert cache.get_ptx("ef" * 32) is None
    from tileiras.hashing import digest
    from tileiras.cache.store import PTX_PAYLOAD, _pack_ptx

    whole, whole_digest = _pack_ptx(".version 8.8\n", meta)
    assert whole_digest == digest(whole).digest()  # the PTX's hash, continued: the entry's own digest
    too_long = whole[:-len(PTX_PAYLOAD) - 8] + (len(whole)).to_bytes(8, "little") + PTX_PAYLOAD
    # cut into the closing line, the metadata's length and the metadata; a length past the start
    for damaged in (whole[:-1], whole[:-len(PTX_PAYLOAD) - 3], whole[:-len(PTX_PAYLOAD) - 9], too_long):
        cache.put("12" * 32, damaged)
        assert cache.get_ptx("12" * 32) is None and cache.get("12" * 32) is None  # a miss, and removed


def test_the_ptx_is_hashed_once_for_its_cubin_key_and_its_entry(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A miss hashes its PTX once: the cubin's key names the digest of the PTX (as _canonical names
    bytes), and the PTX's entry continues that hash over its metadata."""
    from tileiras import hashing

    ptx = ".version 8.8\n.target sm_90\n" + "// body\n" * 4000
    passes: list[int] = []
    real = hashing.digest
    monkeypatch.setattr(hashing, "digest", lambda data=b"": passes.append(len(data)) or real(data))
    cache = Cache(tmp_path / "c", defer_writes=True)
    opts = options(tmp_path)
    cubin = keys.Key(keys.cubin_key, ptx, "sm_90", opts)
    assert cache.get_blob(cubin) is None
    cache.put_ptx(KEY, ptx, None)
    cache.idle()
    cache.flush()
    assert sum(length >= len(ptx) for length in passes) == 1, passes
    assert cubin.value == keys.make_key(**{**_cubin_parts(ptx, opts), "ptx": ptx.encode("utf-8")})
    assert Cache(tmp_path / "c").get_ptx(KEY) == (ptx, None)


def _cubin_parts(ptx: str, opts: object) -> dict[str, object]:
    """keys.cubin_key's parts but the PTX, to check that naming its digest is naming its bytes."""
    return {"stage": "cubin", "gpu": "sm_90", "opt_level": 3, "lineinfo": False, "debug": False,
            "ptxas_options": [], "ptxas": versions.ptxas_identity(keys._memo_dir(opts))}


def _writer(root: str, key: str, payload: bytes, rounds: int, results: "multiprocessing.Queue[str]") -> None:
    cache = Cache(root)
    bad = 0
    for _ in range(rounds):
        cache.put(key, payload)
        got = cache.get(key)
        if got is not None and got != payload:
            bad += 1
    results.put(f"{bad}:{cache.writes_enabled}")


def test_concurrent_writers_of_one_key(tmp_path: Path) -> None:
    payload = os.urandom(256 * 1024)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_writer, args=(str(tmp_path), KEY, payload, 40, results)) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert sorted(results.get(timeout=10) for _ in workers) == ["0:True"] * 6
    assert Cache(tmp_path).get(KEY) == payload
    leftovers = [p.name for p in entry_path(Cache(tmp_path)).parent.iterdir()]
    assert leftovers == [KEY]  # no temp files left behind


def test_lru_eviction(tmp_path: Path) -> None:
    cache = Cache(tmp_path, max_bytes=10_000)
    keys_in_order = [f"{i:02x}" * 32 for i in range(5)]
    now = time.time()
    for age, key in enumerate(keys_in_order):
        cache.put(key, b"z" * 1000)
        os.utime(entry_path(cache, key), (now - 100 + age, now - 100 + age))
    assert cache.get(keys_in_order[0]) is not None  # a hit makes the oldest entry the newest
    assert cache.trim(3 * (1000 + OVERHEAD)) == 2
    assert [cache.get(k) is not None for k in keys_in_order] == [True, False, False, True, True]


def test_size_limit_is_enforced_on_put(tmp_path: Path) -> None:
    limit = 5 * (2000 + OVERHEAD)
    cache = Cache(tmp_path, max_bytes=limit)
    for i in range(20):
        cache.put(f"{i:02x}" * 32, os.urandom(2000))
        time.sleep(0.002)
    stats = cache.stats()
    assert stats.bytes <= limit
    assert cache.get(f"{19:02x}" * 32) is not None  # the newest entry stays
    assert cache.get(f"{0:02x}" * 32) is None


def test_unwritable_cache_warns_once_and_degrades(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    cache = Cache(blocker / "cache")
    cache.put(KEY, b"data")
    cache.put("cd" * 32, b"more")
    assert cache.get(KEY) is None
    assert not cache.writes_enabled
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("tileiras: warning: compile cache disabled")


def test_stale_temp_files_are_cleaned(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.put(KEY, b"data")
    stale = entry_path(cache).parent / ".tmp-killed-writer"
    stale.write_bytes(b"half an entr")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    fresh = entry_path(cache).parent / ".tmp-live-writer"
    fresh.write_bytes(b"being written")
    assert cache.stats().entries == 1
    assert not stale.exists() and fresh.exists()


def test_clear(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    for i in range(3):
        cache.put(f"{i:02x}" * 32, b"data")
    assert cache.clear() == 3
    assert cache.stats().entries == 0


def test_null_cache() -> None:
    cache = open_cache(None, disabled=True)
    assert isinstance(cache, NullCache)
    cache.put(KEY, b"data")
    assert cache.get(KEY) is None and cache.get_ptx(KEY) is None


def test_invalid_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Cache(tmp_path).get("../../etc/passwd")


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == str(tmp_path / "explicit")
    monkeypatch.delenv("TILEIRAS_CACHE_DIR")
    assert default_cache_dir() == str(tmp_path / "xdg" / "tileiras")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == str(tmp_path / "home" / ".cache" / "tileiras")
    assert open_cache(None).root == str(tmp_path / "home" / ".cache" / "tileiras")
    assert open_cache(tmp_path / "given").root == str(tmp_path / "given")


@pytest.mark.parametrize("text, size", [("1024", 1024), ("4k", 4096), ("500M", 500 << 20), ("2GiB", 2 << 30)])
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_parse_size_rejects() -> None:
    with pytest.raises(ValueError):
        parse_size("lots")


# --- keys -------------------------------------------------------------------------


def test_make_key_is_canonical() -> None:
    first = keys.make_key(gpu="sm_90", source=b"module", options=["-O3"])
    assert first == keys.make_key(options=("-O3",), source=b"module", gpu="sm_90")
    assert len(first) == 64 and int(first, 16) >= 0
    assert first != keys.make_key(gpu="sm_90", source=b"module2", options=["-O3"])
    assert first != keys.make_key(gpu="sm_89", source=b"module", options=["-O3"])
    with pytest.raises(TypeError):
        keys.make_key(thing=object())


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [1, 2.5, -0.0, 1e300, 3e-7, True, False, None], "c": {"z": "", "y": ["x"]}},
    "quote \" backslash \\ controls \b\f\n\r\t\x00\x1f\x7f",
    "non-ASCII: é ✓ 𝄞 \ud800",  # BMP, beyond the BMP (a surrogate pair), a lone surrogate
    [float("nan"), float("inf"), float("-inf"), 10**30, -(2**70)],
    ("tuple", ["nested", ("deeper",)]),
])
def test_canonical_json_is_what_json_writes(value: object) -> None:
    """Keys are hashed from keys.canonical_json: byte for byte json.dumps's sorted, compact, ASCII text,
    so they did not change when json stopped being imported to make them."""
    import json

    assert keys.canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def test_make_key_is_stable() -> None:
    """The key of a fixed document: a change of the encoding or of KEY_FORMAT shows here (bump KEY_FORMAT
    whenever the same parts would be written differently, so no old entry is read under a new meaning)."""
    import hashlib
    import json

    document = {"key_format": keys.KEY_FORMAT, "tileiras": keys.__version__, "gpu": "sm_90",
                "source": {"blake2b": hashlib.blake2b(b"module", digest_size=32).hexdigest()}, "options": ["-O3"]}
    expected = hashlib.blake2b(json.dumps(document, sort_keys=True, separators=(",", ":")).encode(),
                               digest_size=32).hexdigest()
    assert keys.make_key(gpu="sm_90", source=b"module", options=("-O3",)) == expected


def options(tmp_path: Path, **changes: object) -> SimpleNamespace:
    base = dict(opt_level=3, lineinfo=False, device_debug=False, preview=None, sanitize=None, libraries=[],
                cache_dir=str(tmp_path))
    base.update(changes)
    return SimpleNamespace(**base)


def test_ptx_key_ignores_ptxas_only_changes_and_cubin_key_does_not(tmp_path: Path) -> None:
    opts = options(tmp_path)
    ptx_key = keys.module_key("d" * 64, "sm_90", opts)
    assert ptx_key == keys.module_key("d" * 64, "sm_90", options(tmp_path))
    assert ptx_key != keys.module_key("e" * 64, "sm_90", opts)
    assert ptx_key != keys.module_key("d" * 64, "sm_100", opts)
    assert ptx_key != keys.module_key("d" * 64, "sm_90", options(tmp_path, lineinfo=True))
    cubin = keys.cubin_key(".version 8.8", "sm_90", opts)
    assert cubin != keys.cubin_key(".version 8.8", "sm_90", opts, extra=("--maxrregcount", "32"))
    assert cubin != keys.cubin_key(".version 8.8", "sm_90", options(tmp_path, opt_level=2))
    assert cubin != keys.cubin_key(".version 8.8 ", "sm_90", opts)


def test_library_contents_are_part_of_the_ptx_key(tmp_path: Path) -> None:
    library = tmp_path / "lib.tileirbc"
    library.write_bytes(b"one")
    first = keys.module_key("d" * 64, "sm_90", options(tmp_path, libraries=[str(library)]))
    library.write_bytes(b"two")
    assert first != keys.module_key("d" * 64, "sm_90", options(tmp_path, libraries=[str(library)]))


def test_tool_identities_are_file_digests_and_are_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tileiras.codegen.ptxas import find_ptxas

    monkeypatch.setattr(versions, "_process_memo", {})
    ptxas = versions.ptxas_identity(tmp_path)
    assert ptxas == tool_digest.hashed_digest(find_ptxas())  # what the wheel's RECORD says is the file's digest
    llvm = versions.llvm_identity(tmp_path)
    assert llvm.startswith("sha256=") and llvm != ptxas
    memo = (ROOT / "tileiras" / "__pycache__" / versions.MEMO_NAME).read_text()  # beside the compiler
    assert llvm in memo and ptxas in memo
    # A fresh process answers from the memo, loading neither LLVM nor any RECORD.
    script = ("import sys; from pathlib import Path; from tileiras.cache import versions; "
              "print(versions.llvm_identity(Path(sys.argv[1]))); "
              "print(any(m in sys.modules for m in ('llvmlite.binding', 'tileiras.cache.tool_digest')))")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == [llvm, "False"]


def fake_wheel(site: Path, content: bytes, recorded: bytes | None = None) -> Path:
    """site/tool_pkg/bin/tool, installed by a wheel whose RECORD lists `recorded`'s digest (default: the content's)."""
    import base64
    import hashlib

    tool = site / "tool_pkg" / "bin" / "tool"
    tool.parent.mkdir(parents=True)
    tool.write_bytes(content)
    digest = base64.urlsafe_b64encode(hashlib.sha256(recorded or content).digest()).rstrip(b"=").decode()
    record = site / "tool_pkg-1.0.dist-info" / "RECORD"
    record.parent.mkdir()
    record.write_text(f"tool_pkg/__init__.py,,\ntool_pkg/bin/tool,sha256={digest},{len(content)}\n"
                      "tool_pkg-1.0.dist-info/RECORD,,\n")
    return tool


def test_tool_digest_takes_the_installers_record_only_for_the_file_it_installed(tmp_path: Path) -> None:
    tool = fake_wheel(tmp_path, b"ptxas of some release")
    assert tool_digest.recorded_digest(tool) == tool_digest.hashed_digest(tool)
    # The RECORD is read, not the file: a RECORD that disagrees with the (unchanged) file is believed ...
    other = fake_wheel(tmp_path / "other", b"ptxas of some release", recorded=b"another file")
    assert tool_digest.tool_digest(other) != tool_digest.hashed_digest(other)
    # ... but a file changed after its installation is hashed.
    later = (tool.parent.parent.parent / "tool_pkg-1.0.dist-info" / "RECORD").stat().st_mtime_ns + 10**9
    os.utime(tool, ns=(later, later))
    assert tool_digest.recorded_digest(tool) is None
    tool.write_bytes(b"ptxas of another release")
    assert tool_digest.tool_digest(tool) == tool_digest.hashed_digest(tool) != tool_digest.hashed_digest(other)
    assert tool_digest.recorded_digest(tmp_path / "nowhere" / "tool") is None


# --- the compiler's own code ---------------------------------------------------------


@pytest.fixture
def compiler_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the compiler's packages to edit; this process's memoized fingerprints isolated."""
    tree = tmp_path / "tree"
    for package in ("tileiras", "build_rules"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(versions, "_process_memo", {})
    monkeypatch.setattr(versions, "_start_state", None)
    monkeypatch.setattr("tileiras.cache.store._opened_ns", None)
    versions._stamp.cache_clear()
    yield tree
    versions._stamp.cache_clear()


def edit_in_place(path: Path) -> None:
    """Change a byte, keeping the size and mtime: only the ctime tells."""
    before = path.stat()
    text = path.read_text()
    path.write_text(text[:-1] + ("#" if text[-1] != "#" else " "))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.read_text() != text


@pytest.mark.skipif(sys.platform == "win32", reason="st_ctime is the creation time on Windows")
@pytest.mark.parametrize("installation", ["writable", "read-only"])
def test_compiler_fingerprint_is_remembered_until_a_file_changes(compiler_copy: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 installation: str) -> None:
    monkeypatch.setattr(versions, "SETTLED_NS", 0)  # the copy is seconds old: remember it anyway
    memo = tmp_path / "memo"
    beside = compiler_copy / "tileiras" / "__pycache__"
    if installation == "read-only":
        beside.write_text("not a folder: the memo cannot be written beside the compiler")
    first = versions.compiler_fingerprint(memo, compiler_copy)
    assert first == fingerprint(compiler_files(compiler_copy), compiler_copy)  # the value CMake stamps
    # beside the compiler, like Python's bytecode (every cache directory shares it); else in the cache
    where = beside if installation == "writable" else memo
    assert f"compiler|{compiler_copy}" in (where / versions.MEMO_NAME).read_text()
    versions._stamp.cache_clear()
    with monkeypatch.context() as patch:  # a fresh process answers from the memo, reading no file
        patch.setattr(versions, "_process_memo", {})
        patch.setattr(versions.compiler_files, "fingerprint", None)
        assert versions.compiler_fingerprint(memo, compiler_copy) == first
    edit_in_place(compiler_copy / "tileiras" / "lowering" / "__init__.py")
    versions._stamp.cache_clear()
    edited = versions.compiler_fingerprint(memo, compiler_copy)
    assert edited != first and edited == fingerprint(compiler_files(compiler_copy), compiler_copy)


KEYS_SCRIPT = """
import sys
from pathlib import Path
from types import SimpleNamespace
from tileiras.cache import keys
memo = Path(sys.argv[1])
print(keys.module_key("d" * 64, "sm_90", SimpleNamespace(cache_dir=memo)))
print(keys.object_key(b"fatbin", [], "x86_64", "linux", memo))
print(keys.cubin_key(".version 8.8", "sm_90", SimpleNamespace(cache_dir=memo)))
print(keys.__file__)
"""


def test_an_edited_compiler_gets_its_own_ptx_and_object_keys(compiler_copy: Path, tmp_path: Path) -> None:
    def keys_of(tree: Path) -> list[str]:
        done = subprocess.run([sys.executable, "-c", KEYS_SCRIPT, str(tmp_path / "memo")], capture_output=True,
                              text=True, check=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tree)))
        *found, where = done.stdout.split()
        assert Path(where).is_relative_to(tree)
        return found

    first = keys_of(compiler_copy)
    assert keys_of(compiler_copy) == first  # an unchanged compiler: the same keys in every process
    assert keys_of(ROOT) == first  # and in every copy of it
    with open(compiler_copy / "tileiras" / "lowering" / "__init__.py", "a") as handle:
        handle.write("# edited\n")
    ptx, obj, cubin = keys_of(compiler_copy)
    assert ptx != first[0] and obj != first[1]
    assert cubin == first[2]  # ptxas alone makes a cubin from the PTX


def test_a_cubin_with_tensor_maps_names_our_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cubin whose PTX has hidden tensor maps embeds the `.nv.host` object our code builds from
    them: its key names the maps and our code, and its entry is checked like any that names it."""
    from tileiras.codegen.tma_params import Field, TmaParam

    maps = {"k": [TmaParam(0, "f16", (Field(2), Field(1)), (Field(const=1), Field(3)), (64, 128), "128B")]}

    def keys_now() -> tuple[str, str]:
        plain = keys.Key(keys.cubin_key, ".version 8.8", "sm_90", options(tmp_path))
        with_maps = keys.Key(keys.cubin_key, ".version 8.8", "sm_90", options(tmp_path), (), maps)
        assert with_maps.names_our_code and not plain.names_our_code
        return plain.value, with_maps.value

    first = keys_now()
    assert first[0] != first[1]
    monkeypatch.setattr(versions, "compiler_fingerprint", lambda memo_dir=None, root=None: "an edited compiler")
    edited = keys_now()
    assert edited[0] == first[0] and edited[1] != first[1]


def test_the_remarks_kept_beside_a_cubin_name_our_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ptxas's report is read by our code: an edited compiler gets its own remarks for a cubin whose
    key (ptxas and the PTX only) it shares, and they are checked like any entry that names our code."""
    from tileiras.cache import remarks

    def keys_now() -> tuple[str, str]:
        cubin = keys.Key(keys.cubin_key, ".version 8.8", "sm_90", options(tmp_path))
        kept = remarks.remarks_key(cubin, str(tmp_path))
        assert kept.names_our_code and not cubin.names_our_code
        return cubin.value, kept.value

    first = keys_now()
    monkeypatch.setattr(versions, "compiler_fingerprint", lambda memo_dir=None, root=None: "an edited compiler")
    edited = keys_now()
    assert edited[0] == first[0] and edited[1] != first[1]


@pytest.mark.skipif(sys.platform == "win32", reason="st_ctime is the creation time on Windows")
def test_a_compiler_state_sees_every_change_since_a_time(compiler_copy: Path) -> None:
    """State.settled_before(t) stats what state() found: an edit, a file added, removed or renamed
    and a new folder after `t` are changes; writes into a __pycache__ folder, or a new one, are not."""
    from tileiras.cache.compiler_files import state

    package = compiler_copy / "tileiras" / "lowering"
    (package / "__pycache__").mkdir(exist_ok=True)
    changes = [
        lambda: edit_in_place(package / "__init__.py"),
        lambda: (package / "new_pass.py").write_text("# a new module\n"),
        lambda: (package / "new_pass.py").unlink(),
        lambda: (package / "tmem.py").rename(package / "tmem_renamed.py"),
        lambda: (compiler_copy / "build_rules" / "more").mkdir(),
    ]
    for change in changes:
        found = state(compiler_copy)
        time.sleep(0.05)  # beyond the file system clock's tick
        since = time.time_ns()
        time.sleep(0.05)
        (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")
        fresh = compiler_copy / "tileiras" / "cache" / "__pycache__"   # Python's first run in a new install
        if fresh.exists():
            shutil.rmtree(fresh)
        fresh.mkdir()
        assert found.settled_before(since)
        change()
        assert not found.settled_before(since)


def test_the_tool_memo_is_lines_and_ignores_anything_else(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An older memo (JSON), a damaged one or a path with a tab: recomputed, never misread."""
    monkeypatch.setattr(versions, "_process_memo", {})
    memo = tmp_path / versions.MEMO_NAME
    memo.write_text('{\n "llvm|/x": "1|2\\tsha256=old"\n}\nllvm|/y\t1|2\nptxas|/z\t3|4\tsha256=z\n')
    assert versions._load(memo) == {"ptxas|/z": "3|4\tsha256=z"}
    computed: list[str] = []
    for slot in ("llvm|/x", "tool|with\ttab"):
        def compute(slot: str = slot) -> str:
            computed.append(slot)
            return "sha256=new"

        assert versions._remembered((str(tmp_path),), slot, "1|2", compute) == "sha256=new"
    monkeypatch.setattr(versions, "_process_memo", {})
    assert versions._remembered((str(tmp_path),), "llvm|/x", "1|2", lambda: "recomputed") == "sha256=new"
    assert computed == ["llvm|/x", "tool|with\ttab"]
    assert memo.read_text() == "llvm|/x\t1|2\tsha256=new\nptxas|/z\t3|4\tsha256=z\n"


def test_no_output_is_stored_after_the_compiler_changed_mid_run(compiler_copy: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(versions.compiler_files, "package_root", lambda: compiler_copy)
    monkeypatch.setattr(versions, "SETTLED_NS", 0)  # the copy is fresh: trust it from the cache's opening on
    time.sleep(0.05)  # beyond the file system clock's tick
    cache = Cache(tmp_path / "cache")
    key = keys.module_key("d" * 64, "sm_90", options(tmp_path))
    cache.put(key, b"made by the compiler the key names")
    time.sleep(0.05)
    edit_in_place(compiler_copy / "tileiras" / "lowering" / "__init__.py")
    cache.put(KEY, b"maybe made by the edited compiler")
    assert cache.get(key) is not None and cache.get(KEY) is None


def test_a_compiler_changed_just_before_the_cache_opened_stores_nothing(compiler_copy: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Files changed less than SETTLED_NS before the opening may change again without their times
    moving (coarse file system clocks): what this process makes is not stored."""
    monkeypatch.setattr(versions.compiler_files, "package_root", lambda: compiler_copy)  # copied just now
    cache = Cache(tmp_path / "cache")
    cache.put(KEY, b"made by a compiler that may be changing")
    assert cache.get(KEY) is None


@pytest.mark.skipif(sys.platform == "win32", reason="st_ctime is the creation time on Windows")
@pytest.mark.parametrize("change", ["edit", "add", "remove"])
def test_a_first_look_after_a_change_stores_nothing(compiler_copy: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """The first check of a compile takes the look at our files that its keys are then made of: a file
    edited, added or removed since the cache opened is seen in that one look (ctime, folder mtime)."""
    monkeypatch.setattr(versions.compiler_files, "package_root", lambda: compiler_copy)
    monkeypatch.setattr(versions, "SETTLED_NS", 0)
    package = compiler_copy / "tileiras" / "lowering"
    time.sleep(0.1)  # beyond the file system clock's tick
    cache = Cache(tmp_path / "cache", defer_writes=True)
    time.sleep(0.05)
    {"edit": lambda: edit_in_place(package / "__init__.py"),
     "add": lambda: (package / "new_pass.py").write_text("# a new module\n"),
     "remove": lambda: (package / "tmem.py").unlink()}[change]()
    ptx = keys.Key(keys.module_key, "d" * 64, "sm_90", options(tmp_path))
    cache.put(ptx, b"maybe made by the changed compiler")
    cache.flush()
    assert versions._start_state is not None and cache.stats().entries == 0


def installed(tree: Path) -> Path:
    """Write the RECORD pip writes for the compiler's packages under `tree` (an installed wheel); its path."""
    import base64
    import hashlib

    from tileiras import __version__

    lines = []
    for path in sorted(p for p in tree.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        lines.append(f"{path.relative_to(tree).as_posix()},sha256={digest},{path.stat().st_size}")
    record = tree / f"tileiras-{__version__}.dist-info" / "RECORD"
    record.parent.mkdir(exist_ok=True)
    record.write_text("\n".join([*lines, f"{record.parent.name}/RECORD,,"]) + "\n")
    return record


@pytest.mark.skipif(sys.platform == "win32", reason="st_ctime is the creation time on Windows")
def test_an_installed_wheel_is_identified_by_its_record(compiler_copy: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """pip's RECORD holds every installed file's digest: it gives the fingerprint that reading the files
    gives, and its one stat stands for all of them. A reinstall rewrites it (a new identity); a file
    edited inside site-packages by hand is not seen (README: the installation is what RECORD says)."""
    from tileiras.cache.compiler_files import fingerprint_of, state

    monkeypatch.setattr(versions, "SETTLED_NS", 0)
    record = installed(compiler_copy)
    files = fingerprint(compiler_files(compiler_copy), compiler_copy)
    assert fingerprint_of(compiler_copy) == files  # the value CMake stamps, read from the RECORD
    assert state(compiler_copy).encoded.endswith(b"\0" + str(record).encode())  # one stat: the RECORD
    first = versions.compiler_fingerprint(tmp_path / "memo", compiler_copy)
    assert first == files

    def fresh_process() -> str:
        monkeypatch.setattr(versions, "_process_memo", {})
        versions._stamp.cache_clear()
        return versions.compiler_fingerprint(tmp_path / "memo", compiler_copy)

    edit_in_place(compiler_copy / "tileiras" / "lowering" / "__init__.py")
    assert fresh_process() == first  # a hand edit inside site-packages: not seen
    time.sleep(0.01)
    installed(compiler_copy)  # a reinstall of the edited build
    edited = fresh_process()
    assert edited != first and edited == fingerprint(compiler_files(compiler_copy), compiler_copy)


@pytest.mark.skipif(sys.platform == "win32", reason="st_ctime is the creation time on Windows")
def test_a_reinstall_during_a_compile_stores_nothing(compiler_copy: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """pip writes the RECORD after the files: an upgrade or reinstall while a compile runs moves its
    times, and what that compile made (from old or new files) is not stored."""
    monkeypatch.setattr(versions.compiler_files, "package_root", lambda: compiler_copy)
    monkeypatch.setattr(versions, "SETTLED_NS", 0)
    installed(compiler_copy)
    time.sleep(0.1)  # beyond the file system clock's tick
    cache = Cache(tmp_path / "cache", defer_writes=True)
    ptx = keys.Key(keys.module_key, "d" * 64, "sm_90", options(tmp_path))
    cache.put(ptx, b"made before the upgrade")
    cache.idle()  # checked: the installation is as it was when the cache opened
    time.sleep(0.05)
    (compiler_copy / "tileiras" / "lowering" / "__init__.py").write_text("# the next release\n")
    installed(compiler_copy)
    cache.put(KEY, b"maybe made by the next release")
    cache.flush()
    assert cache.get(ptx) is not None and cache.get(KEY) is None


# --- tileir cache -------------------------------------------------------------------


def tileir_cache(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "cache", *args],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)


def test_cli(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    for i in range(4):
        cache.put(f"{i:02x}" * 32, b"p" * 1000)
    stats = tileir_cache("stats", "--cache-dir", str(tmp_path))
    assert stats.returncode == 0 and "entries:         4" in stats.stdout
    trimmed = tileir_cache("trim", "--cache-dir", str(tmp_path), "--max-size", str(2 * (1000 + OVERHEAD)))
    assert trimmed.returncode == 0 and "removed 2 entries" in trimmed.stdout
    cleared = tileir_cache("clear", "--cache-dir", str(tmp_path))
    assert cleared.returncode == 0 and "removed 2 entries" in cleared.stdout
    assert Cache(tmp_path).stats().entries == 0
    bad = tileir_cache("trim", "--cache-dir", str(tmp_path), "--max-size", "lots")
    assert bad.returncode == 2 and "not a size" in bad.stderr
    assert tileir_cache("explode").returncode == 2


def test_entries_are_written_through_private_temp_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    renames: list[tuple[str, int]] = []
    real_replace = os.replace

    def replace(source: str, target: str) -> None:
        renames.append((source, os.stat(source).st_mode & 0o777))
        real_replace(source, target)

    monkeypatch.setattr("tileiras.cache.store.os.replace", replace)
    cache = Cache(tmp_path)
    cache.put(KEY, b"data")
    [(temp, mode)] = renames
    assert Path(temp).parent == entry_path(cache).parent and Path(temp).name.startswith(".tmp-")  # trim's prefix
    assert mode == 0o600 and not Path(temp).exists()


def test_full_disk_degrades_without_partial_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    cache = Cache(tmp_path)
    cache.put(KEY, b"stored before the disk filled up")

    def no_space(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tileiras.cache.store.os.replace", no_space)
    cache.put("cd" * 32, b"does not fit")
    assert "No space left on device" in capsys.readouterr().err
    assert cache.get("cd" * 32) is None and cache.get(KEY) == b"stored before the disk filled up"
    assert sorted(p.name for p in (tmp_path / "v1").rglob("*") if p.is_file()) == [KEY]


LOOKUP_ONLY_SCRIPT = """
import sys
from pathlib import Path
from tileiras.cache.store import Cache, CacheMiss, enter_lookup_only, open_cache

cache = Cache(sys.argv[1])
cache.put("ab" * 32, b"stored")
cache.put("cd" * 32, b"to be damaged")
path = Path(cache.root, "v1", "cd", "cd" * 32)
path.write_bytes(path.read_bytes()[:-1])
enter_lookup_only()
assert cache.get("ab" * 32) == b"stored"
for attempt in (lambda: cache.get("ef" * 32), lambda: cache.get("cd" * 32), lambda: cache.put("ab" * 32, b"x"),
                lambda: open_cache(sys.argv[1], disabled=True)):
    try:
        attempt()
    except CacheMiss:
        continue
    raise SystemExit("no CacheMiss")
assert not path.exists()  # the damaged entry is still removed
assert cache.get("ab" * 32) == b"stored"
print("ok")
"""


def test_lookup_only_mode_raises_where_the_cache_cannot_answer(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", LOOKUP_ONLY_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


# --- what a miss and a hit cost -------------------------------------------------------------


def test_an_empty_cache_answers_without_making_keys(tmp_path: Path) -> None:
    made: list[str] = []

    def make(name: str) -> str:
        made.append(name)
        return name

    cache = Cache(tmp_path, defer_writes=True)
    assert cache.get(keys.Key(make, KEY)) is None and made == []  # nothing stored: the key is not needed
    cache.put(keys.Key(make, KEY), b"payload")
    assert made == [] and not (tmp_path / "v1").exists()  # deferred
    cache.flush()
    assert made == [KEY] and cache.get(KEY) == b"payload"
    other = keys.Key(make, "cd" * 32)
    assert Cache(tmp_path).get(other) is None and made == [KEY, "cd" * 32]  # a cache with entries needs it


def test_idle_makes_the_missing_keys_and_flush_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """idle() makes what the writes need while the compile waits: a lookup's key that does not name our
    code at once; one that does with its entry, after the check of our files, whose look at them is the
    one the key is made of."""
    from tileiras.cache import store

    made: list[str] = []
    checks: list[list[str]] = []
    monkeypatch.setattr(store, "_compiler_unchanged", lambda: checks.append(list(made)) or True)
    ptxas_only = keys.Key(lambda: made.append("cubin") or "cd" * 32)
    monkeypatch.setattr(keys, "cubin_key", ptxas_only._make)  # a key ptxas alone decides (keys.cubin_key)
    ours = keys.Key(lambda: made.append("ptx") or KEY)
    assert not ptxas_only.names_our_code and ours.names_our_code
    cache = Cache(tmp_path, defer_writes=True)
    assert cache.get(ours) is None and cache.get(ptxas_only) is None and made == []
    cache.idle()
    assert made == ["cubin"] and checks == []  # made while the compile waits, so that writing it later is cheap
    cache.put(ours, b"payload")
    cache.put(ptxas_only, b"cubin")
    cache.idle()
    assert made == ["cubin", "ptx"] and checks == [["cubin"]]  # checked before the key naming our code
    assert Cache(tmp_path).get(KEY) is None  # written only once the output is there
    cache.flush()
    assert made == ["cubin", "ptx"] and checks == [["cubin"]]
    assert Cache(tmp_path).get(KEY) == b"payload" and Cache(tmp_path).get("cd" * 32) == b"cubin"


def test_a_key_that_cannot_be_made_costs_only_the_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> str:
        raise OSError("compiler files unreadable")

    cache = Cache(tmp_path, defer_writes=True)
    cache.put(keys.Key(broken), b"payload")
    cache.flush()
    [warning] = capsys.readouterr().err.splitlines()
    assert "not storing a result" in warning and cache.stats().entries == 0


HIT_PROBE = """
import os
import sys
from tileiras.codegen import worker
discarded = []
real_discard = worker.LLVMWorker.discard
worker.LLVMWorker.discard = lambda self: discarded.append(self.pid) or real_discard(self)
from tileiras.driver.tileiras_main import main
rc = main(sys.argv[1:])
worker._reap(True)  # what the interpreter's exit would do: the killed worker is the only child
try:
    os.waitpid(-1, os.WNOHANG)
    print("a child is left")
except ChildProcessError:
    print("worker discarded" if len(discarded) == 1 and discarded[0] else "no worker discarded")
heavy = ("llvmlite", "typing", "dataclasses", "tempfile", "subprocess", "shutil", "base64", "ctypes", "numpy", "json",
         "hashlib", "re", "pathlib", "enum", "tileiras.lowering", "tileiras.frontend", "tileiras.cache.tool_digest",
         "tileiras.cache.maintenance", "tileiras.codegen.metadata")  # a cubin needs no launch metadata
print(rc, sorted(m for m in sys.modules if m in heavy or m.startswith(tuple(h + "." for h in heavy))))
"""


def test_a_hit_imports_nothing_heavy(tmp_path: Path) -> None:
    """The cache-hit path, as the driver runs it in a fresh interpreter: what it imports is what it costs
    (re with pathlib costs a hit more than all else it does: ptxas is found with string paths)."""
    kernel = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
    argv = ["--gpu-name", "sm_90", str(kernel), "-o", str(tmp_path / "k.cubin"), "--cache-dir", str(tmp_path / "c")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", *argv], env=env, check=True)
    done = subprocess.run([sys.executable, "-c", HIT_PROBE, *argv], env=env, capture_output=True, text=True)
    assert done.stdout.split("\n")[:2] == ["worker discarded", "0 []"], done.stdout + done.stderr


WORKER_FIRST_PROBE = """
import os
import sys
from tileiras.codegen import worker

def started(self):  # the worker's fork: what the cache had done by then ends the run
    print(sorted(m for m in sys.modules if m.startswith("tileiras.cache")), flush=True)
    os._exit(0)

worker.LLVMWorker.__init__ = started
from tileiras.driver.tileiras_main import main
main(sys.argv[1:])
print("no worker")
"""


def test_the_llvm_worker_starts_before_the_cache_is_looked_at(tmp_path: Path) -> None:
    """LLVM loading in the worker is the longest stage of a miss: the cache is not imported (let alone
    looked up) before the worker's fork, so a cold cache does not delay it (issue 13: a miss costs at
    most 5 ms more than --no-cache). Stops at the fork: no LLVM, no ptxas."""
    kernel = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
    argv = ["--gpu-name", "sm_90", str(kernel), "-o", str(tmp_path / "k.cubin"), "--cache-dir", str(tmp_path / "c")]
    done = subprocess.run([sys.executable, "-c", WORKER_FIRST_PROBE, *argv], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_hit_writes_the_launch_metadata_a_miss_writes(tmp_path: Path) -> None:
    """A hit keeps the cached metadata as JSON until an output needs it: the object, its metadata file
    and its header from a hit are those of the miss."""
    from tileiras.driver.tileiras_main import main

    kernel = ROOT / "tests" / "corpus" / "bytecode" / "softmax" / "13.4.tileirbc"
    written = []
    for run in ("miss", "hit"):
        (tmp_path / run).mkdir()
        out, header = tmp_path / run / "k.o", tmp_path / run / "k.h"
        assert main(["--gpu-name", "sm_90", str(kernel), "-o", str(out), "--emit=obj", "--emit-metadata",
                     "--header", str(header), "--cache-dir", str(tmp_path / "c")]) == 0
        written.append((out.read_bytes(), (tmp_path / run / "k.o.json").read_text(), header.read_text()))
    assert written[0] == written[1] and '"kernels"' in written[0][1]


MODULES_PROBE = """
import sys
from tileiras.driver.tileiras_main import main
rc = main(sys.argv[1:])
print(rc, " ".join(sorted(sys.modules)))
"""


def test_a_miss_imports_only_the_cache_itself(tmp_path: Path) -> None:
    """A compile into an empty cache, against the same compile with --no-cache, in fresh interpreters:
    the cache's own modules and CPython's BLAKE2 are all that a cold cache may add (issue 13:
    "a cold cache must cost nothing"): no pathlib, json, re, hashlib, maintenance or tool digests."""
    kernel = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
    argv = ["--gpu-name", "sm_90", str(kernel), "-o", str(tmp_path / "k.cubin")]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # The tools' digests are remembered beside the compiler after its first compile: not a cold cache's cost.
    subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", *argv, "--cache-dir", str(tmp_path / "w")],
                   env=env, check=True)

    def modules(*extra: str) -> set[str]:
        done = subprocess.run([sys.executable, "-c", MODULES_PROBE, *argv, *extra], env=env, capture_output=True,
                              text=True)
        rc, *names = done.stdout.split()
        assert rc == "0", done.stderr
        return set(names)

    added = modules("--cache-dir", str(tmp_path / "cold")) - modules("--no-cache")
    assert Cache(tmp_path / "cold").stats().entries == 2  # it did store the PTX and the cubin
    # host_platform: the PTX key names the host (two stdlib calls; TMA needs an x86-64 Linux host)
    # tileiras.hashing: the cache's digests (a module of its own: bytecode reads them too)
    assert added and all(name.startswith(("tileiras.cache", "tileiras.hashing", "_blake2",
                                          "tileiras.host_platform")) for name in added)
    assert not added & {"tileiras.cache.maintenance", "tileiras.cache.tool_digest", "tileiras.cache.remote"}


CACHE_MISS_PROBE = """
import sys
from types import SimpleNamespace
from tileiras.cache import keys
from tileiras.cache.store import open_cache

root = sys.argv[1]
opts = SimpleNamespace(cache_dir=root)
for source in (b"one module", b"another"):  # an empty cache, then one that holds entries
    cache = open_cache(root, defer_writes=True)
    ptx = keys.Key(keys.module_key, keys.Key(lambda: keys.make_key(source=source)), "sm_90", opts)
    blob = keys.Key(lambda of: keys.make_key(stage="blob", of=of), ptx)
    assert cache.get_ptx(ptx) is None and cache.get_blob(blob) is None
    cache.idle()
    cache.put_ptx(ptx, ".version 8.8")
    cache.put_blob(blob, b"bytes")
    cache.flush()
heavy = ("pathlib", "json", "re", "hashlib", "typing", "tempfile", "shutil", "subprocess")
print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
"""


def test_the_cache_miss_path_imports_no_pathlib_json_or_re(tmp_path: Path) -> None:
    """What the cache's own miss path imports, in a fresh interpreter: paths are strings, keys are
    written by keys.canonical_json, the tool memo is lines of text."""
    versions.llvm_identity(tmp_path / "a")  # remembered beside the compiler (a first compile's cost)
    done = subprocess.run([sys.executable, "-c", CACHE_MISS_PROBE, str(tmp_path / "a")],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    assert Cache(tmp_path / "a").stats().entries == 4


def test_entries_are_written_after_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tileiras.driver.tileiras_main import main

    out = tmp_path / "k.cubin"
    written: list[bool] = []
    real_write = Cache._write_local

    def write_local(self: Cache, key: str, data: bytes) -> None:
        written.append(out.exists())
        real_write(self, key, data)

    monkeypatch.setattr(Cache, "_write_local", write_local)
    kernel = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
    assert main(["--gpu-name", "sm_90", str(kernel), "-o", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    assert written == [True, True] and Cache(tmp_path / "c").stats().entries == 2  # PTX and cubin


@pytest.mark.parametrize("emit, entries, checks", [
    ("cubin", 2, [False]),  # checked in idle() while ptxas runs; the cubin's key names only ptxas and the PTX
    ("ptx", 1, [True]),     # no wait after the PTX is made: checked once, after the output
])
def test_the_compiler_is_checked_once_after_its_entries_were_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   emit: str, entries: int,
                                                                   checks: list[bool]) -> None:
    """The check that the compiler did not change mid-run (a stat of each of its files) runs once per
    compile, after the entries that name our code were made: for a cubin while ptxas runs, so nothing
    is checked between the output and the exit."""
    from tileiras.cache import store
    from tileiras.driver.tileiras_main import main

    out = tmp_path / f"k.{emit}"
    found: list[bool] = []
    real = store._compiler_unchanged
    monkeypatch.setattr(store, "_compiler_unchanged", lambda: found.append(out.exists()) or real())
    kernel = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
    assert main(["--gpu-name", "sm_90", str(kernel), "-o", str(out), f"--emit={emit}",
                 "--cache-dir", str(tmp_path / "c")]) == 0
    assert found == checks and Cache(tmp_path / "c").stats().entries == entries


def test_an_entry_made_after_the_check_is_checked_again(compiler_copy: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry naming our code queued after idle() checked the compiler is stored only after a new
    check; an entry under a cubin key (ptxas alone makes it) needs none."""
    monkeypatch.setattr(versions.compiler_files, "package_root", lambda: compiler_copy)
    monkeypatch.setattr(versions, "SETTLED_NS", 0)
    time.sleep(0.05)  # beyond the file system clock's tick
    cache = Cache(tmp_path / "cache", defer_writes=True)
    ptx = keys.Key(keys.module_key, "d" * 64, "sm_90", options(tmp_path))
    cache.put(ptx, b"made before the check")
    cache.idle()
    time.sleep(0.05)
    edit_in_place(compiler_copy / "tileiras" / "lowering" / "__init__.py")
    cubin = keys.Key(keys.cubin_key, ".version 8.8", "sm_90", options(tmp_path))
    cache.put(cubin, b"made by ptxas")
    cache.put(KEY, b"maybe made by the edited compiler")
    cache.flush()
    assert cache.get(ptx) is not None and cache.get(cubin) is not None and cache.get(KEY) is None


@pytest.mark.parametrize("error, chosen, warned", [
    ("EROFS", False, False),    # a sandbox (Bazel) or a read-only home: the default location, silent
    ("EACCES", False, False),
    ("EROFS", True, True),      # the user's own choice of location: worth a line
    ("ENOSPC", False, True),    # a real problem wherever the cache is
])
def test_an_unwritable_default_location_is_silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], error: str, chosen: bool,
                                                 warned: bool) -> None:
    import errno

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError(getattr(errno, error), os.strerror(getattr(errno, error)))

    monkeypatch.setattr("tileiras.cache.store.replace_file", refuse)
    cache = Cache(tmp_path, chosen=chosen)
    cache.put(KEY, b"data")
    assert not cache.writes_enabled and cache.get(KEY) is None
    assert bool(capsys.readouterr().err) == warned


def test_a_read_only_client_reads_and_never_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    Cache(tmp_path).put(KEY, b"filled by CI")
    monkeypatch.setenv("TILEIRAS_CACHE_READONLY", "1")
    reader = open_cache(tmp_path)
    assert reader.get(KEY) == b"filled by CI"
    reader.put("cd" * 32, b"a developer's build")
    reader.flush()
    assert reader.get("cd" * 32) is None and capsys.readouterr().err == ""


def test_a_cache_hit_prints_ptxas_warnings_again(tmp_path: Path) -> None:
    """ptxas's warnings are kept beside the cubin: the build that reuses it says what the first one
    said (a ptxas that warns on every run; the second compile must not run it)."""
    real = subprocess.run([sys.executable, "-c", "from tileiras.codegen.ptxas import find_ptxas; print(find_ptxas())"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          check=True).stdout.strip()   # (not in this process: its lookup is memoized)
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    runs = tmp_path / "runs"
    wrapper = cuda / "bin" / "ptxas"
    wrapper.write_text(f"#!/bin/sh\necho run >> {runs}\n{real} \"$@\"\nrc=$?\n"
                       "echo 'ptxas warning : a warning for the test' >&2\nexit $rc\n")
    wrapper.chmod(0o755)
    kernel = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_ROOT=str(cuda), TILEIRAS_CACHE_DIR=str(tmp_path / "cache"))
    outs = []
    for i in range(2):
        done = subprocess.run([sys.executable, "-m", "tileiras", "--gpu-name", "sm_80", str(kernel), "-o",
                               str(tmp_path / f"k{i}.cubin")], capture_output=True, text=True, env=env, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        outs.append(done.stderr)
    assert runs.read_text().count("run") == 1          # the second compile is a hit
    assert all(out.count("a warning for the test") == 1 for out in outs), outs
