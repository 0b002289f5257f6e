"""The CI wheel job installs .ci/floors.txt; it must pin exactly pyproject's floors."""
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
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
