"""Build and runtime configuration: OpenMP, threads, BLAS, SIMD."""
import sys

from fastkern import _openmp
from fastkern._threads import WAIT_POLICY, blas_info, default_n_threads
from fastkern._version import __version__


def config_info():
    """Describe this build and machine.

    Used by ``show_config`` and the CLI.

    Returns
    -------
    dict
        Keys "fastkern", "python", "numpy", "scipy" (versions), "openmp" (bool:
        whether the extensions were built with OpenMP), "threads" (the default
        thread count), "wait_policy" (how fastkern's idle OpenMP threads wait),
        "cores" (``os.cpu_count()``) and "blas" (a list of dicts,
        one per BLAS library threadpoolctl finds: "internal_api", "version",
        "num_threads", "architecture", "filepath").

    See Also
    --------
    show_config : Print the same information.
    """
    import os

    import numpy as np
    import scipy
    from fastkern import _gram  # noqa: F401  (loads scipy's BLAS so it is reported)

    blas = [
        {
            "internal_api": i.get("internal_api"),
            "version": i.get("version"),
            "num_threads": i.get("num_threads"),
            "architecture": i.get("architecture"),
            "filepath": os.path.basename(i.get("filepath", "")),
        }
        for i in blas_info()
    ]
    return {
        "fastkern": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "openmp": _openmp.openmp_enabled(),
        "threads": default_n_threads(),
        "wait_policy": WAIT_POLICY,
        "cores": os.cpu_count(),
        "blas": blas,
    }


def show_config(file=None):
    """Print whether OpenMP is on, the default thread count and the BLAS in use.

    Parameters
    ----------
    file : file-like, default=None
        Where to print; None means ``sys.stdout``.

    See Also
    --------
    config_info : The same information as a dict.
    """
    info = config_info()
    file = sys.stdout if file is None else file
    print(f"fastkern {info['fastkern']} (python {info['python']}, numpy {info['numpy']}, "
          f"scipy {info['scipy']})", file=file)
    state = "on" if info["openmp"] else "off (serial build)"
    print(f"OpenMP: {state}; default threads: {info['threads']} of {info['cores']} cores; "
          f"idle threads: {info['wait_policy']}", file=file)
    for b in info["blas"]:
        print(f"BLAS: {b['internal_api']} {b['version']} ({b['filepath']}, "
              f"{b['num_threads']} threads, {b['architecture']})", file=file)
    if not info["blas"]:
        print("BLAS: not detected by threadpoolctl", file=file)
