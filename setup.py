"""Build fastkern's Cython extensions, with OpenMP when the compiler supports it.

Set FASTKERN_NO_OPENMP=1 to force a serial build (used to test the fallback) and
FASTKERN_DEBUG_CYTHON=1 for a debug build that checks every index Cython
evaluates (boundscheck) and every memoryview's initialisation
(initializedcheck), as scikit-learn's SKLEARN_ENABLE_DEBUG_CYTHON_DIRECTIVES
(FASTKERN_BOUNDSCHECK=1 is the older name of the same switch).  wraparound stays
off as in the release build: with boundscheck on, a negative index then raises
IndexError instead of silently wrapping, so the debug build reports the
negative indices the release build would get wrong.
FASTKERN_QUICK_BUILD=1 compiles at -O0, for builds that check that the code
builds and gives the right results, not its speed (CI's serial and floors builds):
on a 2-core machine it compiles in about a quarter of the time of -O3.
"""
import glob
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import textwrap

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _compiler_kind(compiler):
    """'msvc', 'clang' or 'gcc': flags follow the compiler, not the platform."""
    if compiler.compiler_type == "msvc":
        return "msvc"
    cc = compiler.compiler_so[0] if getattr(compiler, "compiler_so", None) else "cc"
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "gcc"
    return "clang" if "clang" in version.lower() else "gcc"


def _libomp_prefixes():
    """Where a Homebrew (or user-given) libomp may live: Apple clang has no OpenMP runtime."""
    prefixes = [os.environ["FASTKERN_LIBOMP_PREFIX"]] if "FASTKERN_LIBOMP_PREFIX" in os.environ else []
    try:
        out = subprocess.run(["brew", "--prefix", "libomp"], capture_output=True, text=True,
                             timeout=60)
        if out.returncode == 0 and out.stdout.strip():
            prefixes.append(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    prefixes += ["/opt/homebrew/opt/libomp", "/usr/local/opt/libomp"]
    return [p for p in prefixes if os.path.isdir(p)]


def _candidates(kind):
    """(compile_args, link_args) pairs that may enable OpenMP, best first."""
    if kind == "msvc":
        return [(["/openmp"], [])]
    if kind == "gcc":
        return [(["-fopenmp"], ["-fopenmp"])]
    # LLVM clang ships libomp; Apple clang needs -Xpreprocessor and an external libomp.
    found = [(["-Xpreprocessor", "-fopenmp", f"-I{p}/include"], [f"-L{p}/lib", "-lomp"])
             for p in _libomp_prefixes()]
    return [(["-fopenmp"], ["-fopenmp"])] + found + [(["-Xpreprocessor", "-fopenmp"], ["-lomp"])]


def openmp_flags(compiler, kind):
    """Return (compile_args, link_args) that enable OpenMP, or ([], []) if unavailable."""
    if os.environ.get("FASTKERN_NO_OPENMP"):
        return [], []
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
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "check_openmp.c")
        with open(src, "w") as f:
            f.write(code)
        for cflags, lflags in _candidates(kind):
            try:
                objs = compiler.compile([src], output_dir=tmp, extra_postargs=cflags)
                compiler.link_executable(objs, "check_openmp", output_dir=tmp, extra_postargs=lflags)
            # Not (CompileError, LinkError): stdlib distutils and setuptools'
            # copy define different classes, and which one build_ext's compiler
            # raises depends on the setuptools version and import order.
            except Exception:
                continue
            return cflags, lflags
    return [], []


# -O3 so GCC vectorises the kernel maps; no -march=native / -ffast-math: the
# wheel must run on any CPU of its architecture and keep IEEE semantics (SIMD
# paths are picked at run time with target_clones in src/fk_maps.h).
OPT_FLAGS = {
    "msvc": ["/O2"],
    "gcc": ["-O3", "-fno-math-errno", "-fno-trapping-math"],
    "clang": ["-O3", "-fno-math-errno", "-fno-trapping-math"],
}


class BuildExt(build_ext):
    """Pick optimisation and OpenMP flags for the compiler actually used."""

    def finalize_options(self):
        super().finalize_options()
        # The extensions compile independently: one job per core unless -j says otherwise.
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def build_extensions(self):
        kind = _compiler_kind(self.compiler)
        omp_c, omp_l = openmp_flags(self.compiler, kind)
        if not omp_c:
            print("fastkern: OpenMP not available, building serial extensions", file=sys.stderr)
        opt = OPT_FLAGS[kind]
        if _quick_build() and kind != "msvc":
            opt = ["-O0"] + opt[1:]
        elif _debug_cython() and kind != "msvc":
            # The debug build checks indices, not speed: -O1 compiles in about
            # half the time of -O3 (CI builds it beside the release build).
            opt = ["-O1"] + opt[1:]
        if not _debug_cython() and kind != "msvc":
            # -g0 drops the DWARF debug information Python's own CFLAGS ask
            # for (-g): it made each object several times larger and its
            # compile slower, and the symbol table, which names the functions
            # in a backtrace, stays.  The debug build keeps -g.
            opt = opt + ["-g0"]
        for ext in self.extensions:
            ext.extra_compile_args = opt + omp_c + ext.extra_compile_args
            ext.extra_link_args = omp_l + ext.extra_link_args
        super().build_extensions()


def _switch(*names):
    """Whether any of these environment variables is set to other than '' or '0'."""
    return any(os.environ.get(name, "0") not in ("", "0") for name in names)


def _quick_build():
    return _switch("FASTKERN_QUICK_BUILD")


def _debug_cython():
    """FASTKERN_DEBUG_CYTHON=1 (or its older name FASTKERN_BOUNDSCHECK=1) turns the checks on."""
    return _switch("FASTKERN_DEBUG_CYTHON", "FASTKERN_BOUNDSCHECK")


# The keys (see _build_keys) of the C files cythonize wrote last and of the
# compilation that followed.  Cython's own staleness test compares file times,
# and each pip install builds in a fresh isolated environment whose scipy .pxd
# files are newer than any .c, so without this every install regenerated and
# recompiled everything.
STAMP = os.path.join("build", "fastkern-cython.key")
NAMES = ["_openmp", "_batches", "_gram", "_centering", "_matfree", "_split", "_sparse",
         "_inchol", "_structured", "_kstats", "_featurewise", "_lanczos", "_tridiagonal"]


def _build_keys(directives):
    """(C key, compile key): hashes of what the C files, and their compilation, depend on.

    The C: fastkern's own .pyx, .pxd and .h files, the .pxd files of the
    scipy packages they cimport (contents, not times: each isolated build
    environment installs them anew), the Cython version and directives.  Not
    the Python version: the generated C serves every version, and build_ext
    keeps one build folder per version.  The compilation: setup.py (compiler
    flags) and the serial-build and quick-build switches.
    """
    import Cython

    def digest(paths, extra):
        h = hashlib.sha256()
        for path in paths:
            h.update(os.path.basename(path).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
        h.update(repr(extra).encode())
        return h.hexdigest()

    own = sorted(glob.glob("fastkern/*.pyx") + glob.glob("fastkern/*.pxd")
                 + glob.glob("fastkern/src/*.h"))
    c_key = digest(own + _scipy_pxd_files(own), (sorted(directives.items()), Cython.__version__))
    compile_key = digest(["setup.py"], (bool(os.environ.get("FASTKERN_NO_OPENMP")), _quick_build()))
    return c_key, compile_key


def _scipy_pxd_files(sources):
    """The .pxd files of every scipy subpackage that a .pyx or .pxd cimports from."""
    import scipy

    root = os.path.dirname(scipy.__file__)
    packages = set()
    for path in sources:
        if path.endswith((".pyx", ".pxd")):
            with open(path) as f:
                packages.update(re.findall(r"^\s*from\s+scipy((?:\.\w+)*)\.\w+\s+cimport",
                                           f.read(), flags=re.M))
    return sorted(pxd for package in packages
                  for pxd in glob.glob(os.path.join(root, *package.split(".")[1:], "*.pxd")))


def _read_stamp():
    try:
        with open(STAMP) as f:
            return tuple(f.read().split())
    except OSError:
        return None


def _write_stamp(keys):
    os.makedirs(os.path.dirname(STAMP), exist_ok=True)
    with open(STAMP, "w") as f:
        f.write("\n".join(keys) + "\n")


def extensions():
    from Cython.Build import cythonize

    common = dict(
        include_dirs=["fastkern/src"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
    )
    debug = _debug_cython()
    directives = {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": False,
        "cdivision": True,
        "initializedcheck": debug,
        "nonecheck": False,
    }
    keys = _build_keys(directives)
    stamp = _read_stamp()
    c_files = [f"fastkern/{n}.c" for n in NAMES]
    if stamp and stamp[0] == keys[0] and all(os.path.exists(c) for c in c_files):
        print("fastkern: C sources up to date, not cythonizing", file=sys.stderr)
        if stamp[1:] != keys[1:]:
            # The same C under other compiler flags: C files newer than every
            # compiled module make build_ext recompile them all.
            for c in c_files:
                os.utime(c)
            _write_stamp(keys)
        # Otherwise the .c files keep their times, and build_ext skips every
        # extension whose compiled module is newer.
        return [Extension(f"fastkern.{n}", [c], **common) for n, c in zip(NAMES, c_files)]
    exts = [Extension(f"fastkern.{n}", [f"fastkern/{n}.pyx"], **common) for n in NAMES]
    # force: a change of directives leaves the .pyx times alone; every
    # regenerated .c is then newer than every compiled module, so build_ext
    # recompiles them all.
    exts = cythonize(exts, nthreads=os.cpu_count() or 1, compiler_directives=directives,
                     force=True)
    _write_stamp(keys)
    return exts

setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
