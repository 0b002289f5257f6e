"""Packaging: .ci/floors.txt pins exactly pyproject's floors (the CI floors job
installs it), setup.py recompiles only when a source or build option changed,
and the device suite's scripts parse, with the image's package list they read."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_floors():
    text = (ROOT / "pyproject.toml").read_text()
    project = text.split("[project]", 1)[1].split("[project.scripts]", 1)[0]
    floors = {}
    for spec in re.findall(r'^\s*"([^"]+)",', project, flags=re.M):
        req = Requirement(spec)
        for s in req.specifier:
            if s.operator == ">=":
                floors[req.name.lower()] = Version(s.version)
    return floors


def _pins():
    pins = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = Version(version)
    return pins


@pytest.mark.skipif(not (ROOT / ".ci" / "floors.txt").exists(), reason="not a source checkout")
def test_floors_file_pins_pyproject_floors():
    floors, pins = _pyproject_floors(), _pins()
    runtime = ["numpy", "scipy", "scikit-learn", "threadpoolctl", "joblib", "matplotlib", "dask",
               "distributed", "pandas"]
    for name in runtime:
        assert name in floors, f"pyproject.toml has no floor for {name}"
        assert pins.get(name) == floors[name], (
            f".ci/floors.txt pins {name}=={pins.get(name)}, pyproject's floor is {floors[name]}")


def _one_module_copy(tmp_path):
    """A source copy whose setup.py builds only fastkern._openmp (seconds, not minutes)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "fastkern", src / "fastkern",
                    ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    setup = (ROOT / "setup.py").read_text()
    names = re.search(r"^NAMES = \[.*?\]\n", setup, flags=re.M | re.S)
    assert names, "setup.py has no NAMES list"
    setup = setup.replace(names.group(0), 'NAMES = ["_openmp"]\n')
    (src / "setup.py").write_text(setup)
    return src


def _build(src, **env):
    run = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=src,
                         env=dict(os.environ, **env), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout + run.stderr


def _last_opt_flags(log):
    """The optimisation level each compile command ends with (the one the compiler uses:
    Python's own CFLAGS, first on the line, carry -O3 too)."""
    return sorted({re.findall(r"\s(-O\w*)", line)[-1] for line in log.splitlines()
                   if re.search(r"\s-c\s\S*fastkern", line)})


def _compiled(log):
    return sorted(set(re.findall(r"building '(fastkern\.\w+)' extension", log)))


@pytest.mark.skipif(not (ROOT / "setup.py").exists(), reason="not a source checkout")
@pytest.mark.slow
def test_rebuild_compiles_only_what_changed(tmp_path):
    # pip builds each install in a fresh isolated environment, so every
    # dependency outside fastkern (scipy's .pxd files) is newer than the
    # generated C; a second install with unchanged sources must still reuse
    # the compiled modules, and a changed source or option must rebuild.
    pytest.importorskip("Cython")
    src = _one_module_copy(tmp_path)
    rebuilt = ["fastkern._openmp"]
    assert _compiled(_build(src)) == rebuilt

    later = time.time() + 5
    for path in src.glob("fastkern/*.p*"):
        os.utime(path, (later, later))
    log = _build(src)
    assert "not cythonizing" in log and _compiled(log) == [], log[-3000:]

    # The serial-build switch changes the compiler flags, not the C.
    log = _build(src, FASTKERN_NO_OPENMP="1")
    assert "not cythonizing" in log and _compiled(log) == rebuilt, log[-3000:]
    assert _compiled(_build(src, FASTKERN_NO_OPENMP="1")) == []
    # So does the quick (-O0) switch.
    log = _build(src, FASTKERN_NO_OPENMP="1", FASTKERN_QUICK_BUILD="1")
    assert _compiled(log) == rebuilt and _last_opt_flags(log) == ["-O0"], log[-3000:]
    assert _compiled(_build(src, FASTKERN_NO_OPENMP="1")) == rebuilt
    # The debug directives change the generated C.
    assert _compiled(_build(src, FASTKERN_NO_OPENMP="1", FASTKERN_DEBUG_CYTHON="1")) == rebuilt

    pyx = src / "fastkern" / "_openmp.pyx"
    pyx.write_text(pyx.read_text() + "\n# an edit\n")
    assert _compiled(_build(src, FASTKERN_NO_OPENMP="1", FASTKERN_DEBUG_CYTHON="1")) == rebuilt


DEVICE_SCRIPTS = ["make_wheelhouse.sh", "device_suite.sh"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("script", DEVICE_SCRIPTS)
def test_device_scripts_parse(script):
    path = ROOT / ".ci" / script
    if not path.exists():
        pytest.skip("not a source checkout")
    run = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


@pytest.mark.skipif(not (ROOT / ".ci" / "device_image_packages.txt").exists(),
                    reason="not a source checkout")
def test_device_image_list_parses():
    names = []
    for line in (ROOT / ".ci" / "device_image_packages.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    # make_wheelhouse.sh compares normalized names: a name written otherwise,
    # or twice, means the list was mangled when copied.
    assert [n for n in names if canonicalize_name(n) != n] == []
    assert len(set(names)) == len(names)
    # device_suite.sh builds with and runs on these from the image, and
    # imports packaging itself; the wheelhouse never carries them.
    relied_on = {"numpy", "scipy", "scikit-learn", "cython", "setuptools", "packaging", "pip",
                 "pytest", "pytest-xdist"}
    assert relied_on - set(names) == set()


def test_an_unbuilt_source_tree_says_how_to_build(tmp_path):
    # Python started in a fresh clone (or the repository's root, where
    # ./fastkern shadows the installed package) used to fail with "cannot
    # import name '_openmp' from partially initialized module": now one line
    # says the extensions are not built and how to build them.
    import fastkern

    source = Path(fastkern.__file__).parent
    for path in source.rglob("*.py"):
        target = tmp_path / "fastkern" / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", "import fastkern"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: fastkern's compiled extensions are not built in ")
    assert "pip install ." in last and "build_ext --inplace" in last
