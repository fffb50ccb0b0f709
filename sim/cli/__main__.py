"""`python -m sim.cli` is `sim` (as `python -m sim` is)."""
import sys

from sim.cli import main

sys.exit(main())
