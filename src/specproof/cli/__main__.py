"""``python -m specproof.cli``: the command line, as the ``specproof`` script runs it."""
import sys

from . import main

sys.exit(main())
