"""Suite-wide settings: the compile cache of every test run lives in a private directory,
so tests never read or write the user's cache (and never see results from older code)."""

from __future__ import annotations

import os
import tempfile

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache() -> object:
    with tempfile.TemporaryDirectory(prefix="tileiras-test-cache-") as root:
        previous = os.environ.get("TILEIRAS_CACHE_DIR")
        os.environ["TILEIRAS_CACHE_DIR"] = root
        yield root
        if previous is None:
            os.environ.pop("TILEIRAS_CACHE_DIR", None)
        else:
            os.environ["TILEIRAS_CACHE_DIR"] = previous


# The shared-memory plan's verifier (tileas/shared_plan.py) is strict in every test, subprocesses
# included: a request the plan did not predict is an internal error, not a note of the dump.
os.environ.setdefault("TILEIRAS_STRICT_SHARED_PLAN", "1")
# Every canonical-form pass that changes a kernel is followed by the verifier (lowering/pipeline.py).
os.environ.setdefault("TILEIRAS_VERIFY_EACH_PASS", "1")
