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
    for name in ("math.h", "float.h", "stdint.h", "string.h", "stddef.h", "stdio.h", "omp.h",
                 "emmintrin.h", "xmmintrin.h", "intrin.h", "windows.h"):
        (stubs / name).write_text("")
    text = subprocess.run(
        [CC, "-E", "-P", "-undef", "-D_MSC_VER=1930", "-D_WIN64", "-D_M_X64", "-nostdinc",
         f"-I{stubs}", f"-I{SRC}", "-x", "c", str(SRC / header)],
        check=True, capture_output=True, text=True, timeout=60).stdout
    for gnu in ("__attribute__", "__restrict__", "__builtin_", "__typeof__", "__asm__"):
        assert gnu not in text, f"{header} shows MSVC the GNU extension {gnu}"
    assert " restrict " not in f" {' '.join(text.split())} ", f"{header} uses C99 restrict"


# fk_inchol.h's candidate update against the pivot step's loop (a running
# acc = acc - g * Gt[j][i] over j in order), on sizes across the 8-row panels
# and 4-candidate tiles; prints the entries that differ in any bit.
INCHOL_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fk_inchol.h"
int main(void) {
    const ptrdiff_t n = 37, sizes[][3] = {{0, 5, 37}, {3, 4, 8}, {17, 9, 37}, {64, 13, 23}};
    double *gt = malloc(sizeof(double) * 64 * n), *g = malloc(sizeof(double) * 13 * 64);
    double *w = malloc(sizeof(double) * 13 * n), *ref = malloc(sizeof(double) * 13 * n);
    double *panel = malloc(sizeof(double) * 64 * 8);
    float *gtf = malloc(sizeof(float) * 64 * n);
    unsigned long long s = 88172645463325252ULL;
    long bad = 0;
    for (ptrdiff_t i = 0; i < 64 * n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        gt[i] = (double)(s % 2000003) / 1000001.0 - 1.0;
        gtf[i] = (float)gt[i];
    }
    for (ptrdiff_t i = 0; i < 13 * 64; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        g[i] = (double)(s % 1000003) / 3000001.0;
    }
    for (int f = 0; f < 2; f++)
    for (int c_ = 0; c_ < 4; c_++) {
        ptrdiff_t k = sizes[c_][0], c = sizes[c_][1], m = sizes[c_][2];
        for (ptrdiff_t t = 0; t < c; t++)
            for (ptrdiff_t i = 0; i < n; i++) {
                double acc = 0.5 + 0.01 * (double)(t * n + i);
                w[t * n + i] = acc;
                if (i < m)
                    for (ptrdiff_t j = 0; j < k; j++)
                        acc = acc - g[t * k + j] * (f ? (double)gtf[j * n + i] : gt[j * n + i]);
                ref[t * n + i] = acc;
            }
        if (f)
            fk_inchol_update_f(w, n, c, g, k, gtf, n, m, panel);
        else
            fk_inchol_update_d(w, n, c, g, k, gt, n, m, panel);
        for (ptrdiff_t i = 0; i < c * n; i++)
            bad += memcmp(&w[i], &ref[i], sizeof(double)) != 0;
    }
    printf("%ld\n", bad);
    return 0;
}
"""


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("flags", [(), ("-DFK_INCHOL_PLAIN",), ("-O0",)],
                         ids=["vectors", "plain", "O0"])
def test_inchol_update_is_the_steps_arithmetic_bit_for_bit(flags, tmp_path):
    src = tmp_path / "inchol.c"
    src.write_text(INCHOL_PROGRAM)
    exe = tmp_path / "inchol"
    subprocess.run([CC, "-O3", "-fno-math-errno", "-fno-trapping-math", *flags, f"-I{SRC}",
                    str(src), "-o", str(exe)], check=True, capture_output=True, timeout=120)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["0"]


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_glibc_build_keeps_the_cpu_dispatch(tmp_path):
    values = _run_program(CC, tmp_path)
    np.testing.assert_allclose(values, np.exp(INPUTS), rtol=4e-16, atol=0)
    symbols = subprocess.run(["nm", str(tmp_path / "prog")], capture_output=True, text=True,
                             timeout=60).stdout
    assert "fk_vexp_d.avx2" in symbols and "fk_vexp_d.resolver" in symbols


def _gcc_major(cc):
    """GCC's major version, None for another compiler (clang answers -dumpversion too)."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    if "clang" in version.lower():
        return None
    return int(subprocess.run([cc, "-dumpversion"], capture_output=True, text=True,
                              timeout=60).stdout.split(".")[0])


@pytest.mark.skipif(CC is None or shutil.which("objdump") is None,
                    reason="no C compiler or no objdump")
def test_glibc_build_has_an_avx2_clone_with_fused_multiply_adds(tmp_path):
    # GCC's "avx2" clone has no FMA (a feature of its own): the AVX2 machines
    # without AVX-512 (AMD Zen, most laptops) ran the maps without it.
    major = _gcc_major(CC)
    if major is None or major < 12:
        pytest.skip(f"{CC} is not GCC 12 or newer (target_clones arch=x86-64-v3)")
    _run_program(CC, tmp_path)
    dump = subprocess.run(["objdump", "-d", str(tmp_path / "prog")], capture_output=True,
                          text=True, timeout=60).stdout
    bodies = {}
    for block in dump.split("\n\n"):
        head = block.strip().split("\n", 1)
        if len(head) == 2 and head[0].endswith(">:"):
            bodies[head[0].split("<", 1)[1][:-2]] = head[1]
    assert "vfmadd" in bodies["fk_vexp_d.arch_x86_64_v3"]
    assert "vfmadd" not in bodies["fk_vexp_d.avx2"]


@pytest.mark.skipif(MUSL is None, reason="musl-gcc not installed (Debian: musl-tools)")
def test_musl_build_runs(tmp_path):
    # With target_clones gated on Linux instead of glibc this binary was built
    # but failed to load: "Error relocating: unsupported relocation type 37".
    values = _run_program(MUSL, tmp_path)
    np.testing.assert_allclose(values, np.exp(INPUTS), rtol=4e-16, atol=0)


# fk_matmat.h: both bodies against a plain loop, on a ragged shape (13 rows:
# two groups of 6 and one of 12, each with a short end; 4101 columns of K: two
# full 2048-column chunks and a short one; 12 columns of V: 8 + 4).
MATMAT_PROGRAM = r"""
#include <stdio.h>
#include <math.h>
#include "fk_matmat.h"
enum { M = 13, N = 4101, B = 12 };
static double K[M * N], V[N * B], out[M * B];
int main(void) {
    for (int i = 0; i < M * N; i++) K[i] = sin(0.37 * i) * (1 + i % 5);
    for (int i = 0; i < N * B; i++) V[i] = cos(0.11 * i);
    int fast = fk_mm_fast_available();
    for (int pass = 0; pass < 2; pass++) {
        fk_mm_rows(K, N, 0, M, N, V, B, out, pass == 0 ? fast : 0);
        double worst = 0;
        for (int i = 0; i < M; i++)
            for (int c = 0; c < B; c++) {
                double s = 0, a = 0;
                for (int j = 0; j < N; j++) {
                    s += K[i * N + j] * V[j * B + c];
                    a += fabs(K[i * N + j] * V[j * B + c]);
                }
                double e = fabs(s - out[i * B + c]) / a;
                if (e > worst) worst = e;
            }
        printf("%d %.3g\n", pass == 0 ? fast : 0, worst);
    }
    return 0;
}
"""


def _header_program_output(cc, tmp_path, name, program):
    """stdout of a C program built at -O3 against the installed headers."""
    if cc is None:
        pytest.skip("compiler not installed (Debian: musl-tools for musl-gcc)")
    src = tmp_path / f"{name}.c"
    src.write_text(program)
    exe = tmp_path / name
    subprocess.run([cc, "-O3", f"-I{SRC}", str(src), "-o", str(exe), "-lm"],
                   check=True, capture_output=True, timeout=120)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True,
                          timeout=60).stdout


def _assert_both_bodies_accurate(stdout, n):
    # One line per body: the fast one (or 0 where the CPU has none), then the portable one.
    lines = [line.split() for line in stdout.splitlines()]
    assert len(lines) == 2 and lines[1][0] == "0"
    for _, err in lines:
        assert float(err) <= n * np.finfo(float).eps


@pytest.mark.parametrize("cc", [CC, MUSL], ids=["cc", "musl-gcc"])
def test_matmat_header_runs(cc, tmp_path):
    _assert_both_bodies_accurate(_header_program_output(cc, tmp_path, "matmat", MATMAT_PROGRAM),
                                 4101)


# fk_maps.h's fk_dot_tile (the RBF dot tiles' inner products), the 32-byte
# tiles and, where the CPU has AVX-512, the 64-byte ones (WIDE = 1), against a
# plain loop on a ragged tile: 13 rows (three groups of 4 and one left over)
# by 21 columns (blocks of 8 or 16 and the rest left over), d = 7, inside
# wider arrays (leading dimensions 29 and 25); and the flagging map
# fk_rbf_dot_d: it must report a row with a cancelled entry and only such a
# row.
DOT_PROGRAM = r"""
#include <stdio.h>
#include <math.h>
#include "fk_maps.h"
enum { BI = 13, BJ = 21, D = 7, LD = 29, LDO = 25 };
static double xc[BI * D], yct[D * LD], g[BI * LDO];
int main(void) {
    for (int i = 0; i < BI * D; i++) xc[i] = sin(0.37 * i) * (1 + i % 5);
    for (int i = 0; i < D * LD; i++) yct[i] = cos(0.11 * i) - 0.25;
    for (int i = 0; i < BI * LDO; i++) g[i] = 12345.0;
    fk_dot_tile(xc, D, yct, LD, BI, BJ, g, LDO, WIDE);
    double worst = 0;
    int outside = 0;
    for (int i = 0; i < BI; i++)
        for (int j = 0; j < LDO; j++) {
            if (j >= BJ) { outside += g[i * LDO + j] != 12345.0; continue; }
            double s = 0, a = 0;
            for (int k = 0; k < D; k++) {
                s += xc[i * D + k] * yct[k * LD + j];
                a += fabs(xc[i * D + k] * yct[k * LD + j]);
            }
            double e = fabs(s - g[i * LDO + j]) / a;
            if (e > worst) worst = e;
        }
    printf("%.3g %d\n", worst, outside);
    /* |x|^2 = |y|^2 = 1: g = 1 is a zero distance (cancelled), g = 0 is not. */
    double yn[3] = {1.0, 1.0, 1.0}, far[3] = {0.0, 0.0, -0.5}, near[3] = {0.0, 1.0, 0.0};
    double out[3];
    int f1 = fk_rbf_dot_d(far, out, yn, 1.0, 0.5, 3);
    int f2 = fk_rbf_dot_d(near, out, yn, 1.0, 0.5, 3);
    printf("%d %d %.17g %.17g\n", f1 != 0, f2 != 0, out[0], out[1]);
    return 0;
}
"""


@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize("cc", [CC, MUSL], ids=["cc", "musl-gcc"])
def test_dot_tile_header_runs(cc, wide, tmp_path):
    program = DOT_PROGRAM.replace("WIDE", "(fk_dot_level() && 1)" if wide else "0")
    tile, flags = _header_program_output(cc, tmp_path, "dot", program).splitlines()
    err, outside = tile.split()
    assert float(err) <= 7 * np.finfo(float).eps and outside == "0"
    far, near, k0, k1 = flags.split()
    assert (far, near) == ("0", "1")
    # fk_exp1_d is within 2 ulp of libm (numpy's own exp differs by a version).
    assert float(k0) == pytest.approx(np.exp(-1.0), rel=4e-16) and float(k1) == -1.0


# fk_split.h: the hi/lo split of a row (GCC 12.2 at -O3 once folded its
# (double)(float)a round trip away and stored lo = 0) and a band of the product
# against a plain loop, with the mirror image summed into T.
SPLIT_PROGRAM = r"""
#include <stdio.h>
#include <math.h>
#include "fk_split.h"
enum { N = 37, L = 11 };
static double A[N * N], V[N], out[N], T[N];
static float K[N * N], lo[N * (N - 1) / 2];
int main(void) {
    double src[L];
    float hi[L], lo_row[L];
    for (int j = 0; j < L; j++) src[j] = sin(1.3 * j + 0.2) * pow(10.0, (j % 7) - 3);
    double total = fk_split_store_row(src, NULL, 1.0, hi, lo_row, L, 0.0);
    for (int j = 0; j < L; j++) printf("%a %a %a\n", src[j], (double)hi[j], (double)lo_row[j]);
    printf("%a\n", total);
    for (int i = 0; i < N; i++) {
        V[i] = cos(0.7 * i);
        for (int j = i; j < N; j++)
            A[i * N + j] = A[j * N + i] = sin(0.37 * (i * N + j)) + (i == j);
    }
    for (int i = 0; i < N; i++) {
        double d = A[i * N + i];
        fk_split_store_row(A + i * N + i + 1, NULL, 1.0, K + i * N + i + 1,
                           lo + (i * (N - 1) - i * (i - 1) / 2), N - 1 - i, 0.0);
        A[i * N + i] = d;
    }
    double diag[N];
    for (int i = 0; i < N; i++) diag[i] = A[i * N + i];
    fk_split_band(K, lo, diag, V, out, T, N, 1, 0, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double s = 0, a = 0;
        for (int j = 0; j < N; j++) { s += A[i * N + j] * V[j]; a += fabs(A[i * N + j] * V[j]); }
        double e = fabs(out[i] + T[i] - s) / a;
        if (e > worst) worst = e;
    }
    printf("%.3g\n", worst);
    return 0;
}
"""


@pytest.mark.parametrize("cc", [CC, MUSL], ids=["cc", "musl-gcc"])
def test_split_header_runs(cc, tmp_path):
    lines = _header_program_output(cc, tmp_path, "split", SPLIT_PROGRAM).splitlines()
    rows = np.array([[float.fromhex(v) for v in line.split()] for line in lines[:11]])
    a, hi, lo = rows.T
    np.testing.assert_array_equal(hi, a.astype(np.float32))
    np.testing.assert_array_equal(lo, (a - hi).astype(np.float32))
    assert np.all(lo != 0)  # none of these values is a float32
    np.testing.assert_allclose(float.fromhex(lines[11]), np.abs(a).sum(), rtol=1e-15)
    # hi + lo holds A to 2^-48; the sums themselves are float64.
    assert float(lines[12]) <= 1e-14


# fk_matmat.h's upper-triangle product: every body this CPU runs (AVX-512,
# AVX2, portable), strips of 12 rows with a short last one, 2061 columns (a
# full 2048-column chunk and a short one), 12 columns of V (8 + 4), NaN below
# the diagonal (never read).  The AVX-512 body must give the AVX2 body's bits.
SYM_PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <math.h>
#include "fk_matmat.h"
enum { N = 2061, B = 12, R = 12 };
static double A[N * N], K[N * N], V[N * B], out[N * B], T[N * B], prev[2 * N * B];
int main(void) {
    for (int i = 0; i < N; i++)
        for (int j = i; j < N; j++)
            A[i * N + j] = A[j * N + i] = sin(0.37 * i + 0.11 * j) * (1 + (i + j) % 5);
    for (int i = 0; i < N * N; i++) K[i] = (i % N) >= (i / N) ? A[i] : NAN;
    for (int i = 0; i < N * B; i++) V[i] = cos(0.11 * i);
    int best = fk_mm_fast_level();
    for (int level = best; level >= 0; level--) {
        for (int i = 0; i < N * B; i++) T[i] = 0.0;
        for (int i0 = 0; i0 < N; i0 += R)
            fk_mm_sym_strip(K, N, i0, N - i0 < R ? N - i0 : R, N, V, B, out, T, level);
        if (level == 2) {
            memcpy(prev, out, sizeof out);
            memcpy(prev + N * B, T, sizeof T);
        }
        if (level == 1 && best == 2)
            printf("same %d\n", !memcmp(prev, out, sizeof out) && !memcmp(prev + N * B, T, sizeof T));
        double worst = 0;
        for (int i = 0; i < N; i++)
            for (int c = 0; c < B; c++) {
                double s = 0, a = 0;
                for (int j = 0; j < N; j++) {
                    s += A[i * N + j] * V[j * B + c];
                    a += fabs(A[i * N + j] * V[j * B + c]);
                }
                double e = fabs(s - out[i * B + c] - T[i * B + c]) / a;
                if (isnan(e)) worst = INFINITY;  /* a NaN read: fail */
                else if (e > worst) worst = e;
            }
        printf("%d %.3g\n", level, worst);
    }
    return 0;
}
"""


@pytest.mark.parametrize("cc", [CC, MUSL], ids=["cc", "musl-gcc"])
def test_upper_triangle_matmat_header_runs(cc, tmp_path):
    lines = _header_program_output(cc, tmp_path, "sym", SYM_PROGRAM).splitlines()
    same = [line for line in lines if line.startswith("same")]
    levels = [line.split() for line in lines if not line.startswith("same")]
    assert [int(level) for level, _ in levels] == list(range(int(levels[0][0]), -1, -1))
    for _, err in levels:
        assert float(err) <= 2061 * np.finfo(float).eps
    # Where the CPU has AVX-512, its body and AVX2's agree bit for bit.
    assert same == (["same 1"] if levels[0][0] == "2" else [])


# fk_matmat.h's tall products of the block eigensolver, both bodies: out = A^T Z
# (fk_mm_tn) and out = A B then out += A2 B (fk_mm_nn, overwrite then add) on
# 517 rows of a 23-column A with leading dimension 29 (groups of 6 and 12
# columns with short ends) and 12 columns (8 + 4).
TALL_PROGRAM = r"""
#include <stdio.h>
#include <math.h>
#include "fk_matmat.h"
enum { R = 517, C = 23, LD = 29, B = 12 };
static double A[R * LD], A2[R * LD], Z[R * B], Bm[C * B], tn[C * B], nn[R * B];
int main(void) {
    for (int i = 0; i < R * LD; i++) {
        A[i] = sin(0.37 * i) * (1 + i % 5);
        A2[i] = cos(0.23 * i) * (1 + i % 3);
    }
    for (int i = 0; i < R * B; i++) Z[i] = cos(0.11 * i);
    for (int i = 0; i < C * B; i++) Bm[i] = sin(0.7 * i + 1.0);
    int fast = fk_mm_fast_available();
    for (int pass = 0; pass < 2; pass++) {
        int f = pass == 0 ? fast : 0;
        for (int i = 0; i < C * B; i++) tn[i] = 0.0;
        for (int i = 0; i < R * B; i++) nn[i] = NAN;  /* overwritten, never read */
        fk_mm_tn(A, LD, R, C, Z, B, tn, f);
        fk_mm_nn(A, LD, R, C, Bm, B, nn, 0, f);
        fk_mm_nn(A2, LD, R, C, Bm, B, nn, 1, f);
        double worst = 0;
        for (int j = 0; j < C; j++)
            for (int c = 0; c < B; c++) {
                double s = 0, a = 0;
                for (int r = 0; r < R; r++) {
                    s += A[r * LD + j] * Z[r * B + c];
                    a += fabs(A[r * LD + j] * Z[r * B + c]);
                }
                double e = fabs(s - tn[j * B + c]) / a;
                if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
            }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < B; c++) {
                double s = 0, a = 0;
                for (int j = 0; j < C; j++) {
                    s += (A[r * LD + j] + A2[r * LD + j]) * Bm[j * B + c];
                    a += (fabs(A[r * LD + j]) + fabs(A2[r * LD + j])) * fabs(Bm[j * B + c]);
                }
                double e = fabs(s - nn[r * B + c]) / a;
                if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
            }
        printf("%d %.3g\n", f, worst);
    }
    return 0;
}
"""


@pytest.mark.parametrize("cc", [CC, MUSL], ids=["cc", "musl-gcc"])
def test_tall_product_header_runs(cc, tmp_path):
    _assert_both_bodies_accurate(_header_program_output(cc, tmp_path, "tall", TALL_PROGRAM), 517)
