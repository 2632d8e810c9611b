"""``python -m watchcache ...``: the same command line as the ``watchcache`` script."""

from watchcache.cli.main import main

raise SystemExit(main())
