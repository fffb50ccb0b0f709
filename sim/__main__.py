"""``python -m sim``: the same front end as the ``sim`` command."""
from sim.cli import main

raise SystemExit(main())
