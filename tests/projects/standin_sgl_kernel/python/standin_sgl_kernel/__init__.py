"""Stand-in for sgl_kernel's runtime loader: the "sm100" library is the one used on every GPU but CC 9.0."""

import glob
import os

__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))


def ops_library(capability=120):
    """The common library the loader would pick for a compute capability (90 -> sm90, else sm100)."""
    found = glob.glob(os.path.join(_HERE, "sm90" if capability == 90 else "sm100", "*ops*.so"))
    return found[0] if found else None


def fa_status():
    """None when the FA3-style extension imports, else the ImportError's message."""
    try:
        from . import fa_ops  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
    except ImportError as exc:
        return str(exc)
    return None
