"""`tileiras` as a py_binary main, for toolchains built with rules_python (bazel/README.md)."""

import sys

from tileiras.driver.tileiras_main import main

if __name__ == "__main__":
    sys.exit(main())
