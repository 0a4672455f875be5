"""What a contained run may read, named exactly: each entry of the standard library's directories (not a
site-packages inside them), numpy's own directories and the shared libraries the template has loaded; never edsb, the
data, the run directory or a secret. Landlock's read rules and the private file view are both made from these lists.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path


def _fenced_paths(extra: Iterable[str]) -> tuple[list[str], list[str]]:
    """(directories no read rule may contain, directories no read rule may lie in): secrets, scratch space, the
    benchmark data (`extra`: the pool names every data directory it knows) and edsb itself (its package, and the
    directory that holds it: a site-packages or a checkout)."""
    home = str(Path.home())
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # edsb/
    no_ancestor = ["/", "/proc", "/sys", "/dev", "/tmp", "/var/tmp", "/run", "/etc", "/root", "/home", home]
    no_ancestor += [os.path.dirname(package), os.path.dirname(os.path.dirname(package))]
    no_descendant = ["/proc", "/sys", "/dev", package, *extra]
    no_ancestor += no_descendant
    return [os.path.realpath(p) for p in no_ancestor], [os.path.realpath(p) for p in no_descendant]


# The libraries beyond the standard library that plan code may import: the reference's executor imports numpy. Each is
# granted by its own directories (the package and its bundled shared libraries), never the site-packages that holds
# it, which may hold edsb too.
PLAN_LIBRARIES = ("numpy",)


def read_paths(protected: Sequence[str] = ()) -> list[str]:
    """What a contained run may read, named exactly: each entry of the standard library (not its site-packages), the
    directories of `PLAN_LIBRARIES`, and the shared libraries the template has loaded (a system library directory
    whole, a directory that also holds Python packages only file by file). Never edsb: the template imported all
    of it that a child needs. A path that would expose a fenced directory (an ancestor of it, or inside /proc, /sys,
    /dev, edsb or the data) is left out."""
    no_ancestor, no_descendant = _fenced_paths(protected)
    candidates = [*_stdlib_entries(), *_library_directories(), *_shared_libraries()]
    chosen: list[str] = []
    for real in candidates:
        if not os.path.exists(real) or real in chosen:
            continue
        if any(within(f, real) for f in no_ancestor) or any(within(real, f) for f in no_descendant):
            continue
        chosen.append(real)
    return [path for path in chosen if not any(other != path and within(path, other) for other in chosen)]


SITE_DIRECTORIES = ("site-packages", "dist-packages")


def listed_paths(protected: Sequence[str] = ()) -> list[str]:
    """The standard library's directories, to list only: Python's import system lists a directory on its path again
    whenever its caches are invalidated (`importlib.invalidate_caches`, a changed directory), and a lazy import of
    the standard library would then find nothing. Landlock grants the listing beneath them too: where a
    site-packages lies inside (Docker's, pyenv's, conda's Python), the names of its files, never their contents."""
    import sysconfig

    no_ancestor = [os.path.realpath(p) for p in ("/", "/proc", "/sys", "/dev", "/tmp", "/etc", "/home", *protected)]
    roots = sorted({os.path.realpath(sysconfig.get_path(name)) for name in ("stdlib", "platstdlib")})
    return [root for root in roots if os.path.isdir(root) and not any(within(f, root) for f in no_ancestor)]


def _stdlib_entries() -> list[str]:
    """Every file and directory of the standard library's directories but the site-packages inside them (a Python
    under /usr/local or pyenv keeps its site-packages, and so perhaps edsb, beneath its standard library)."""
    import sysconfig

    entries = []
    roots = {os.path.realpath(sysconfig.get_path(name)) for name in ("stdlib", "platstdlib")}
    for root in sorted(roots):
        with contextlib.suppress(OSError):
            entries += [os.path.join(root, name) for name in sorted(os.listdir(root)) if name not in SITE_DIRECTORIES]
    return [os.path.realpath(entry) for entry in entries]


def _library_directories() -> list[str]:
    """Each of `PLAN_LIBRARIES`' package directories, and its wheel's bundled libraries (`numpy.libs`)."""
    directories = []
    for name in PLAN_LIBRARIES:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if not isinstance(origin, str):
            continue
        package = os.path.dirname(os.path.realpath(origin))
        directories.append(package)
        parent = os.path.dirname(package)
        with contextlib.suppress(OSError):
            directories += [os.path.join(parent, e) for e in sorted(os.listdir(parent)) if e == f"{name}.libs"]
    return directories


def _shared_libraries() -> list[str]:
    """The shared libraries this process has mapped (the C library, libseccomp, libffi, ...) outside Python's
    trees, for what a lazily imported extension module loads: a directory whole when it holds no Python packages
    (`/usr/lib/x86_64-linux-gnu`), else the files alone (pyenv's and Docker's `lib/` keep `libpython` beside
    `python3.x/site-packages`)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    files = sorted({line.split(None, 5)[5] for line in maps.splitlines() if len(line.split(None, 5)) == 6})
    libraries = [os.path.realpath(f) for f in files if f.startswith("/") and ".so" in os.path.basename(f)]
    python_trees = [os.path.realpath(p) for p in sys.path if p] + [os.path.realpath(sys.prefix)]
    chosen = []
    for library in libraries:
        if any(within(library, tree) for tree in python_trees):
            continue  # an extension module, loaded already (the standard library's are granted with it)
        directory = os.path.dirname(library)
        holds_python = any(within(tree, directory) for tree in python_trees)
        chosen.append(library if holds_python or _names_python(directory) else directory)
    return chosen


def _names_python(directory: str) -> bool:
    """Whether a directory holds Python's own trees (`python3.11/`, a site-packages) next to its libraries."""
    try:
        return any(name.startswith("python") or name in SITE_DIRECTORIES for name in os.listdir(directory))
    except OSError:
        return True


def within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
