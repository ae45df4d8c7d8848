"""`python -m decoding ...`: see decoding/cli.py."""

import sys

from .cli import main

sys.exit(main())
