"""``python -m watchcache ...``: the same command line as the ``watchcache`` script."""

from watchcache.cli import main

raise SystemExit(main())
