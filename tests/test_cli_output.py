"""Where the commands write (issue 47): output files, devices, FIFOs, pipes,
symlinks, a full disk, a reader that goes away, SIGTERM; and the one-line
errors for values and parameters at the edge of float64.

The writer (``_common.Output``) is tested in this process; the whole program,
its exit status and its signals in subprocesses (marked slow).
"""
import contextlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from test_cli import assert_usage_error, fastkern, read_csv, write_csv

from fastkern.cli import _common
from fastkern.cli._common import CLIError, Output, Outputs


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 3))
    return write_csv(tmp_path / "d.csv", [["a", "b", "c"], *X.tolist()])


def expected_projection(data, tmp_path):
    """The CSV kpca prints to stdout: what every other destination must receive."""
    proc = fastkern("kpca", data, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("PC1,PC2\n") and proc.stdout.count("\n") == 41
    return proc.stdout


class FifoReader:
    """Reads a FIFO to its end in a thread, as a consumer such as ``gzip`` would."""

    def __init__(self, path):
        self.path, self.data = path, None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        with open(self.path, "rb") as f:
            self.data = f.read()

    def wait_in_open(self, timeout=30):
        """Return once the reader waits in open() for a writer (its kernel wait
        channel says so); skip where /proc does not show it."""
        wchan = f"/proc/self/task/{self.thread.native_id}/wchan"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(wchan) as f:
                    if f.read().strip() == "wait_for_partner":
                        return
            except OSError:
                break
            time.sleep(0.01)
        pytest.skip("cannot see the FIFO's reader wait in open() (/proc/.../wchan)")

    def result(self, timeout=60):
        self.thread.join(timeout)
        if self.thread.is_alive():
            # Free the reader if it still waits for a writer to open the FIFO.
            with contextlib.suppress(OSError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            self.thread.join(5)
            pytest.fail(f"the reader of {self.path} saw no end of file within {timeout} s")
        return self.data


def leftovers(folder, keep):
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# ---------------------------------------------------------------- the writer, in process


def test_writer_writes_through_a_fifo(tmp_path):
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    with Outputs("kpca") as outputs:
        out = outputs.add(str(fifo), "--out")
        assert out.tmp is None  # no temporary file next to a FIFO
        with out.open() as f:
            f.writelines(f"{i}\n" for i in range(5000))
        outputs.commit()
    assert reader.result().decode().splitlines() == [str(i) for i in range(5000)]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert leftovers(tmp_path, {"out.csv"}) == []


def test_writer_writes_through_dev_fd(tmp_path):
    r, w = os.pipe()
    try:
        with Outputs("kpca") as outputs:
            out = outputs.add(f"/dev/fd/{w}", "--out")
            assert out.tmp is None
            with out.open(binary=True) as f:
                f.write(b"x,y\n1,2\n")
            outputs.commit()
        os.close(w)
        w = None
        with os.fdopen(r, "rb") as f:
            r = None
            assert f.read() == b"x,y\n1,2\n"
    finally:
        for fd in (r, w):
            if fd is not None:
                os.close(fd)


def test_writer_keeps_a_character_device():
    """/dev/null is written to, not replaced (as root, os.replace would have put a
    regular file in its place; the checks come before anything is written)."""
    with Outputs("kpca") as outputs:
        out = outputs.add(os.devnull, "--out")
        assert out.tmp is None and out.stream
        with out.open() as f:
            f.write("PC1\n1.0\n")
        outputs.commit()
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_writer_full_disk_is_one_line():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with pytest.raises(CLIError, match=r"^cannot write --out /dev/full: No space left on device$"):
        with Outputs("kpca") as outputs:
            out = outputs.add("/dev/full", "--out")
            with out.open() as f:
                f.write("PC1\n" * 100000)


def test_writer_writes_a_symlinks_target_and_keeps_the_link(tmp_path, capsys):
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to("real.csv")
    dangling = tmp_path / "new-link.csv"
    dangling.symlink_to("new-real.csv")
    with Outputs("kpca") as outputs:
        for path, option in ((link, "--out"), (dangling, "--plot")):
            out = outputs.add(str(path), option)
            assert os.path.dirname(out.tmp) == str(tmp_path)
            with out.open() as f:
                f.write(f"new {option}\n")
        outputs.commit()
    assert link.is_symlink() and os.readlink(link) == "real.csv"
    assert target.read_text() == "new --out\n"
    assert dangling.is_symlink() and (tmp_path / "new-real.csv").read_text() == "new --plot\n"
    # The existing target was replaced, and that is said; the new one was not there.
    assert capsys.readouterr().err.splitlines() == [
        f"fastkern kpca: --out {link}: replaced the existing file {target}, the link's target"]
    assert leftovers(tmp_path, {"real.csv", "link.csv", "new-link.csv", "new-real.csv"}) == []


def test_writer_says_when_it_replaces_a_file(tmp_path, capsys):
    existing, new = tmp_path / "p.csv", tmp_path / "q.csv"
    existing.write_text("previous\n")
    with Outputs("cca") as outputs:
        for path in (existing, new):
            with outputs.add(str(path), "--out" if path == existing else "--json").open() as f:
                f.write("now\n")
        assert capsys.readouterr().err == ""  # nothing replaced before commit
        outputs.commit()
    assert existing.read_text() == new.read_text() == "now\n"
    assert capsys.readouterr().err == (
        f"fastkern cca: --out {existing}: replaced the existing file\n")


def test_writer_rejects_a_socket(tmp_path):
    import socket

    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path)
        with pytest.raises(CLIError, match="it is a socket"):
            Output(path, "--out")


# ---------------------------------------------------------------- the commands, in process


def test_kpca_out_and_plot_through_fifos(tmp_path, data):
    """The CSV and a PDF (whose writer seeks in a file) through FIFOs, read as written."""
    pytest.importorskip("matplotlib")
    expected = expected_projection(data, tmp_path)
    csv_fifo, pdf_fifo = tmp_path / "p.csv", tmp_path / "p.pdf"
    os.mkfifo(csv_fifo)
    os.mkfifo(pdf_fifo)
    readers = FifoReader(csv_fifo), FifoReader(pdf_fifo)
    proc = fastkern("kpca", data, "--out", csv_fifo, "--plot", pdf_fifo, cwd=tmp_path)
    csv_bytes, pdf_bytes = (r.result() for r in readers)
    assert proc.returncode == 0, proc.stderr
    assert csv_bytes.decode() == expected
    assert pdf_bytes.startswith(b"%PDF-") and pdf_bytes.rstrip().endswith(b"%%EOF")
    assert stat.S_ISFIFO(os.stat(csv_fifo).st_mode) and stat.S_ISFIFO(os.stat(pdf_fifo).st_mode)
    assert "replaced" not in proc.stderr + proc.stdout


def test_failed_run_ends_the_fifo_readers_wait(tmp_path):
    """A run that fails before writing still lets the FIFO's reader finish (end of
    file), as a shell's `fastkern ... > fifo` would."""
    fifo = tmp_path / "p.csv"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    reader.wait_in_open()
    proc = fastkern("kpca", tmp_path / "missing.csv", "--out", fifo, cwd=tmp_path)
    assert_usage_error(proc, "missing.csv")
    assert reader.result(timeout=20) == b""


def test_kpca_out_symlink_to_the_input_is_refused(tmp_path, data):
    link = tmp_path / "link.csv"
    link.symlink_to(data)
    assert_usage_error(fastkern("kpca", data, "--out", link, cwd=tmp_path),
                       "would overwrite the input file")
    assert read_csv(data)[0] == ["a", "b", "c"]


def test_kpca_replacing_out_is_said_on_stderr(tmp_path, data):
    out = tmp_path / "p.csv"
    assert fastkern("kpca", data, "--out", out, cwd=tmp_path).returncode == 0
    proc = fastkern("kpca", data, "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"fastkern kpca: --out {out}: replaced the existing file\n"


# ---------------------------------------------------------------- item 8: 1e308


@pytest.mark.parametrize("big", ["1e308", "1e200"])
def test_values_too_large_to_standardise(tmp_path, big):
    """1e308 overflows the column's mean (the kernel then saw NaN); 1e200 its variance
    (the column silently became all zeros).  Either is one line naming the column and
    --no-scale."""
    rows = [["a", "b"]] + [[str(i * 0.5), str((-1) ** i * i)] for i in range(20)]
    rows[5][1] = big
    data = write_csv(tmp_path / "big.csv", rows)
    proc = fastkern("kpca", data, cwd=tmp_path)
    assert_usage_error(proc, "fastkern kpca: error: the values of column(s) 'b' are too large "
                             "to standardise", "--no-scale")
    assert "NaN" not in proc.stderr
    proc = fastkern("cca", data, "--x-columns", "a", "--y-columns", "b", cwd=tmp_path)
    assert_usage_error(proc, "column(s) 'b' are too large to standardise", "--no-scale")
    proc = fastkern("test", "hsic", data, "--x-columns", "b", "--method", "gamma",
                    cwd=tmp_path)
    assert_usage_error(proc, "column(s) 'b' are too large to standardise")


def test_standardise_matches_numpy_and_names_overflowing_columns():
    X = np.array([[1.0, 5.0, 2.0], [3.0, 5.0, 1e300], [2.0, 5.0, -1e300]])
    Xs, constant = _common.standardise(X[:, :2])
    ref = (X[:, 0] - X[:, 0].mean()) / X[:, 0].std()
    np.testing.assert_allclose(Xs[:, 0], ref, rtol=1e-15)
    assert np.all(Xs[:, 1] == 0) and constant == 1
    with pytest.raises(CLIError, match=r"column\(s\) 2 are too large .*up to 1e\+300"):
        _common.standardise(X)
    with pytest.raises(CLIError, match=r"column\(s\) 'z' are"):
        _common.standardise(X, ["x", "y", "z"])


# ---------------------------------------------------------------- item 7: no tracebacks


@pytest.mark.parametrize("length_scale, values", [("1e-200", "[1, 1]"), ("1e200", "[0, 0]")])
def test_rational_quadratic_at_extreme_length_scales_runs(tmp_path, data, length_scale, values):
    """The kernel's gamma 1 / (2 alpha l^2) divided by zero or overflowed (a
    traceback): at a tiny length scale the Gram is the identity (centred: the
    eigenvalue 1), at a huge one all ones (centred: 0)."""
    proc = fastkern("kpca", data, "--kernel", "rational_quadratic", "--length-scale",
                    length_scale, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"eigenvalues {values}" in proc.stderr


@pytest.mark.parametrize("exc, text", [
    (ValueError("n_components must be positive\nmore advice\nand more"),
     "n_components must be positive"),
    (TypeError("kernel_params must be a dict"), "kernel_params must be a dict"),
    (OverflowError(34, "Numerical result out of range"), "Numerical result out of range"),
    (ZeroDivisionError("float division by zero"), "float division by zero"),
    (FloatingPointError("overflow encountered in exp"), "overflow encountered in exp"),
    (MemoryError(), "out of memory"),
    (PermissionError(13, "Permission denied", "/x/y"), "Permission denied: /x/y"),
])
def test_errors_from_the_library_are_one_line(tmp_path, data, monkeypatch, exc, text):
    from fastkern.cli import kpca

    def fail(*args, **kwargs):
        raise exc
    monkeypatch.setattr(kpca, "_kpca", fail)
    proc = fastkern("kpca", data, cwd=tmp_path)
    assert_usage_error(proc, f"fastkern kpca: error: {text}")


# ---------------------------------------------------------------- the program, in subprocesses


def command(*args):
    return [sys.executable, "-m", "fastkern", *map(str, args)]


def run(args, cwd, **kwargs):
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(command(*args), stderr=subprocess.PIPE, cwd=cwd, timeout=300,
                          **kwargs)


@pytest.mark.slow
def test_out_dev_null_is_written_not_replaced(tmp_path, data):
    # The writer's own decision first: were it to replace /dev/null, the
    # program below would do so (as root), so it is not run then.
    with Outputs("kpca") as outputs:
        assert outputs.add(os.devnull, "--out").stream
    before = os.stat(os.devnull)
    proc = run(["kpca", data, "--out", os.devnull], tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino
    assert not [n for n in os.listdir("/dev") if n.startswith(".null.")]


@pytest.mark.slow
def test_out_fifo_and_dev_fd_receive_every_line(tmp_path, data):
    expected = expected_projection(data, tmp_path).encode()
    fifo = tmp_path / "p.csv"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    proc = run(["kpca", data, "--out", fifo], tmp_path)
    assert reader.result() == expected
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)

    # --out /dev/fd/N: a pipe the caller opened (bash's >(gzip > x.gz)).
    r, w = os.pipe()
    with os.fdopen(r, "rb") as pipe:
        try:
            proc = subprocess.Popen(command("kpca", data, "--out", f"/dev/fd/{w}"),
                                    pass_fds=(w,), cwd=tmp_path, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        finally:
            os.close(w)
        try:
            received = pipe.read()  # to the end: the child's copy closes at its exit
            _, stderr = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr
    assert received == expected


@pytest.mark.slow
def test_out_symlink_and_existing_file(tmp_path, data):
    target = tmp_path / "real.csv"
    target.write_text("previous\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    proc = run(["kpca", data, "--out", link], tmp_path, text=True)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and read_csv(target)[0] == ["PC1", "PC2"]
    assert f"--out {link}: replaced the existing file {target}" in proc.stderr
    assert leftovers(tmp_path, {"d.csv", "real.csv", "link.csv"}) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig, status, word", [(signal.SIGTERM, 143, "terminated"),
                                                (signal.SIGINT, 130, "interrupted")])
def test_signal_removes_the_temporary_file(tmp_path, sig, status, word):
    """The output's temporary file exists from before the input is read until the
    end; the input here is a FIFO nobody writes to, so the program waits in it,
    the temporary file in place, for as long as the test needs."""
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    out = tmp_path / "p.csv"
    proc = subprocess.Popen(command("kpca", fifo, "--out", out), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(p.name.startswith(".p.csv.") for p in tmp_path.iterdir()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the output was never reserved"
            time.sleep(0.02)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, stderr
    assert stderr.splitlines() == [f"fastkern kpca: {word}"]
    assert stdout == ""
    assert leftovers(tmp_path, {"in.csv"}) == []


@pytest.mark.slow
def test_full_disk_is_one_line(tmp_path, data):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with Outputs("kpca") as outputs:  # as for /dev/null: never run a writer that replaces it
        assert outputs.add("/dev/full", "--out").stream
    proc = run(["kpca", data, "--out", "/dev/full"], tmp_path, text=True)
    assert_usage_error(proc, "fastkern kpca: error: cannot write --out /dev/full: "
                             "No space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    with open("/dev/full", "wb") as full:
        proc = run(["kpca", data], tmp_path, text=True, stdout=full)
    assert_usage_error(proc, "fastkern kpca: error: cannot write to stdout: "
                             "No space left on device")


@pytest.mark.slow
def test_reader_gone_from_stdout_is_quiet(tmp_path, data):
    """As `fastkern kpca d.csv | head -1` once head has gone: the pipe's read end is
    closed before the program writes, so every write fails (EPIPE)."""
    proc = subprocess.Popen(command("kpca", data), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    try:
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert stderr == ""
    assert proc.returncode == 1
