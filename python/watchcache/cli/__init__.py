"""The ``watchcache`` command: serve, load, status, bench and demo."""
