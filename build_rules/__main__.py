"""`python -m build_rules ...`: see cli.py."""

import sys

from .cli import main

sys.exit(main())
