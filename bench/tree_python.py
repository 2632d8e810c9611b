"""Run ``python -m watchcache ...`` from another tree's Python sources, with the installed
engine: ``python bench/tree_python.py TREE_PYTHON_DIR CORE_SO [--profile FILE] -- ARGS``.

The project is installed editable: a ``.pth`` file installs scikit-build-core's
redirecting finder at the front of ``sys.meta_path``, which maps every ``watchcache``
module to the working tree's file, and adds the working tree's ``python/`` to sys.path.
A tree checked out elsewhere (``git archive`` of an older revision) has no compiled
``_core``, and building one per revision would compare two builds as well as two
revisions. So this bootstrap, before anything imports ``watchcache``:

1. drops the redirecting finder from ``sys.meta_path`` (by its class name: the finder
   module is generated per install, its class is not importable by a stable path);
2. drops every sys.path entry that holds some other ``watchcache`` package and puts
   ``TREE_PYTHON_DIR`` first, so the normal path finder imports the tree's sources;
3. installs a finder that answers for ``watchcache._core`` alone, with the extension
   file the caller found (the installed one), so nothing is copied into the tree;
4. checks that ``watchcache`` and ``watchcache._core`` came from where they should, and
   runs the command line as ``python -m watchcache`` would.

Only valid when the two revisions share the engine's C++ and bindings (the caller checks
``git diff`` on cpp/ and the stub); otherwise the older Python would run on a newer engine.

``--profile FILE`` runs the command under cProfile (the main thread: the event loop,
request handling, encoding; not the engine's worker threads) and writes the stats to
FILE when the server stops (SIGTERM unwinds as Ctrl-C does in ``watchcache serve``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

CORE = "watchcache._core"


class CoreFinder(importlib.abc.MetaPathFinder):
    """Finds ``watchcache._core`` at one given file and nothing else."""

    def __init__(self, path: str) -> None:
        self.path = path

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != CORE:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path)


def isolate(tree: str, core: str) -> None:
    """Make ``import watchcache`` load ``tree``'s sources with the engine at ``core``."""
    if any(name == "watchcache" or name.startswith("watchcache.") for name in sys.modules):
        raise RuntimeError("watchcache was imported before the bootstrap could redirect it")
    sys.meta_path[:] = [
        f for f in sys.meta_path if type(f).__name__ != "ScikitBuildRedirectingFinder"
    ]
    root, engine = Path(tree).resolve(), Path(core).resolve()
    sys.path[:] = [str(root)] + [
        p for p in sys.path if not (Path(p or ".") / "watchcache" / "__init__.py").is_file()
    ]
    sys.meta_path.insert(0, CoreFinder(str(engine)))
    import watchcache
    from watchcache import _core

    where = Path(watchcache.__file__ or "").resolve().parent
    if where != root / "watchcache":
        raise RuntimeError(f"watchcache came from {where}, not {root}")
    if Path(_core.__file__ or "").resolve() != engine:
        raise RuntimeError(f"watchcache._core came from {_core.__file__}, not {engine}")


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 2:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index("--")
    tree, core, *options = argv[:split]
    profile = options[1] if options[:1] == ["--profile"] and len(options) == 2 else None
    isolate(tree, core)
    from watchcache.cli.main import main as watchcache_main

    sys.argv = ["watchcache", *argv[split + 1 :]]
    if profile is None:
        return watchcache_main()
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(watchcache_main)
    finally:
        profiler.dump_stats(profile)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
