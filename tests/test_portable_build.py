"""The C headers compile where the build claims to: glibc, musl and (by its
preprocessor view) MSVC.  Uses the headers shipped inside the installed package."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import fastkern

SRC = Path(fastkern.__file__).parent / "src"
HEADERS = sorted(p.name for p in SRC.glob("*.h"))
CC = shutil.which("gcc") or shutil.which("cc")
MUSL = shutil.which("musl-gcc")

# A program that runs the vectorised exp map of fk_maps.h on a few values.
PROGRAM = r"""
#include <stdio.h>
#include "fk_maps.h"
int main(void) {
    double x[7] = {0.0, -1.0, -0.5, -10.0, -700.0, -745.0, 3.25};
    fk_vexp_d(x, 7, 1.0);
    for (int i = 0; i < 7; i++) printf("%.17g\n", x[i]);
    return 0;
}
"""
INPUTS = np.array([0.0, -1.0, -0.5, -10.0, -700.0, -745.0, 3.25])


def _run_program(cc, tmp_path, *flags):
    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "prog"
    subprocess.run([cc, "-O3", *flags, f"-I{SRC}", str(src), "-o", str(exe), "-lm"],
                   check=True, capture_output=True, timeout=120)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60)
    return np.array([float(v) for v in out.stdout.split()])


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("header", HEADERS)
def test_msvc_sees_no_gnu_syntax(header, tmp_path):
    # MSVC cannot be run here; its preprocessor view of each header is: no
    # __GNUC__, no __SSE2__, _MSC_VER set.  What remains must be plain C.
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("math.h", "stdint.h", "string.h", "stddef.h", "stdio.h", "omp.h",
                 "emmintrin.h", "xmmintrin.h"):
        (stubs / name).write_text("")
    text = subprocess.run(
        [CC, "-E", "-P", "-undef", "-D_MSC_VER=1930", "-D_WIN64", "-D_M_X64", "-nostdinc",
         f"-I{stubs}", f"-I{SRC}", "-x", "c", str(SRC / header)],
        check=True, capture_output=True, text=True, timeout=60).stdout
    for gnu in ("__attribute__", "__restrict__", "__builtin_", "__typeof__", "__asm__"):
        assert gnu not in text, f"{header} shows MSVC the GNU extension {gnu}"
    assert " restrict " not in f" {' '.join(text.split())} ", f"{header} uses C99 restrict"


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_glibc_build_keeps_the_cpu_dispatch(tmp_path):
    values = _run_program(CC, tmp_path)
    np.testing.assert_allclose(values, np.exp(INPUTS), rtol=4e-16, atol=0)
    symbols = subprocess.run(["nm", str(tmp_path / "prog")], capture_output=True, text=True,
                             timeout=60).stdout
    assert "fk_vexp_d.avx2" in symbols and "fk_vexp_d.resolver" in symbols


@pytest.mark.skipif(MUSL is None, reason="musl-gcc not installed (Debian: musl-tools)")
def test_musl_build_runs(tmp_path):
    # With target_clones gated on Linux instead of glibc this binary was built
    # but failed to load: "Error relocating: unsupported relocation type 37".
    values = _run_program(MUSL, tmp_path)
    np.testing.assert_allclose(values, np.exp(INPUTS), rtol=4e-16, atol=0)
