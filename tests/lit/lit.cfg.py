# lit configuration: FileCheck tests of the canonical form's passes (`tileir opt`), run by
# tests/test_lit.py with the test environment's python, lit and filecheck.
import os
import sys

import lit.formats

config.name = "tileiras"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
root = os.path.dirname(os.path.dirname(config.test_source_root))
python = lit_config.params.get("python", sys.executable)
config.substitutions.append(("%tileir", f"{python} -m tileiras.driver.tileir_main"))
config.substitutions.append(("%FileCheck", lit_config.params.get("filecheck", "filecheck")))
config.environment["PYTHONPATH"] = root
config.environment["TILEIRAS_CACHE_DIR"] = os.environ.get("TILEIRAS_CACHE_DIR", "")
