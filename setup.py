"""Build fastkern's Cython extensions, with OpenMP when the compiler supports it.

Set FASTKERN_NO_OPENMP=1 to force a serial build (used to test the fallback) and
FASTKERN_BOUNDSCHECK=1 for a debug build with bounds checking.
"""
import os
import sys
import tempfile
import textwrap

from setuptools import Extension, setup
from setuptools._distutils.ccompiler import new_compiler
from setuptools._distutils.errors import CompileError, LinkError
from setuptools._distutils.sysconfig import customize_compiler


def openmp_flags():
    """Return (compile_args, link_args) that enable OpenMP, or ([], []) if unavailable."""
    if os.environ.get("FASTKERN_NO_OPENMP"):
        return [], []
    if sys.platform == "win32":
        candidates = [(["/openmp"], [])]
    elif sys.platform == "darwin":
        candidates = [(["-Xpreprocessor", "-fopenmp"], ["-lomp"]), (["-fopenmp"], ["-fopenmp"])]
    else:
        candidates = [(["-fopenmp"], ["-fopenmp"])]
    code = textwrap.dedent(
        """
        #include <omp.h>
        int main(void) {
            int n = 0;
            #pragma omp parallel reduction(+:n)
            n += 1;
            return n > 0 ? 0 : 1;
        }
        """
    )
    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "check_openmp.c")
        with open(src, "w") as f:
            f.write(code)
        for cflags, lflags in candidates:
            try:
                objs = compiler.compile([src], output_dir=tmp, extra_postargs=cflags)
                compiler.link_executable(objs, "check_openmp", output_dir=tmp, extra_postargs=lflags)
            except (CompileError, LinkError):
                continue
            return cflags, lflags
    return [], []


def extensions():
    from Cython.Build import cythonize

    omp_c, omp_l = openmp_flags()
    if not omp_c:
        print("fastkern: OpenMP not available, building serial extensions", file=sys.stderr)
    # -O3 so GCC vectorises the kernel maps; no -march=native / -ffast-math: the
    # wheel must run on any x86-64 and keep IEEE semantics (SIMD paths are picked
    # at run time with target_clones in src/fk_maps.h).
    opt = [] if sys.platform == "win32" else ["-O3", "-fno-math-errno", "-fno-trapping-math"]
    common = dict(
        include_dirs=["fastkern/src"],
        extra_compile_args=opt + omp_c,
        extra_link_args=omp_l,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
    )
    names = ["_openmp", "_batches", "_gram", "_centering", "_matfree", "_sparse"]
    exts = [Extension(f"fastkern.{n}", [f"fastkern/{n}.pyx"], **common) for n in names]
    boundscheck = bool(os.environ.get("FASTKERN_BOUNDSCHECK"))
    return cythonize(
        exts,
        compiler_directives={
            "language_level": 3,
            "boundscheck": boundscheck,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": boundscheck,
            "nonecheck": False,
        },
    )


setup(ext_modules=extensions())
