"""The build: scikit-build-core drives CMake with a build directory per wheel tag (so a second
`pip install` of one checkout builds), the wheel maps kernels/ to vam_engine.kernels and ships
the files the package reads, and the compiled module of this install imports. The slow test
builds the wheel twice from one copy of the checkout, each in a fresh isolated build
environment, and reads the wheel's file list (.ci/run installs twice from its clone, too)."""
import importlib.machinery
import importlib.resources
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from support.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
DATA_FILES = ("server/web/index.html", "server/web/app.js", "server/web/docs.html", "server/web/docs.js",
              "server/web/map.js", "server/web/style.css", "eval/sample/questions.jsonl")


def test_the_build_backend_is_scikit_build_core_with_a_build_directory_per_wheel_tag():
    system = PYPROJECT["build-system"]
    assert system["build-backend"] == "scikit_build_core.build"
    names = {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].lower() for r in system["requires"]}
    assert {"scikit-build-core", "pybind11"} <= names and "setuptools" not in names
    tool = PYPROJECT["tool"]["scikit-build"]
    assert "{wheel_tag}" in tool["build-dir"]  # one per interpreter and platform, never shared between them
    assert tool["wheel"]["packages"] == {"vam_engine": "vam_engine", "vam_engine/kernels": "kernels"}
    assert not (REPO / "setup.py").exists()
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert re.search(r"^install\(TARGETS _C LIBRARY DESTINATION vam_engine\)", cmake, re.M)


def test_the_compiled_module_of_this_install_imports_and_runs():
    import numpy as np

    import vam_engine._C as native
    import vam_engine.kernels
    from vam_engine import native as loader

    assert native.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
    assert loader.load() is native
    frames = np.random.default_rng(0).integers(0, 256, (2, 48, 64), dtype=np.uint8)  # gray
    thumbs, _ = loader.gate_row_pass(frames)
    assert thumbs.shape == (2, 64, 64) and np.isfinite(thumbs).all()
    assert vam_engine.kernels.__name__ == "vam_engine.kernels"


def test_the_files_the_package_reads_are_tracked_so_the_wheel_ships_them():
    tracked = set(subprocess.run(["git", "ls-files", "vam_engine"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.split()) if (REPO / ".git").exists() else None
    root = importlib.resources.files("vam_engine")
    for rel in DATA_FILES:
        assert root.joinpath(rel).is_file(), rel
        if tracked is not None:  # scikit-build-core ships the package's files that git does not ignore
            assert f"vam_engine/{rel}" in tracked, rel


@pytest.mark.slow
@pytest.mark.needs("git_checkout")
def test_two_wheel_builds_from_one_checkout_hold_the_package(tmp_path):
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    src = tmp_path / "src"
    for rel in files:
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    for n in (1, 2):  # the second build meets the first one's build directory and CMake cache
        out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / f"w{n}"),
                              str(src)], capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert len(list((src / "build").iterdir())) == 1  # one build directory: this interpreter's wheel tag
    (wheel,) = (tmp_path / "w2").glob("vam_engine-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert any(re.fullmatch(r"vam_engine/_C\..*(\.so|\.pyd)", n) for n in names)
    assert {"vam_engine/kernels/__init__.py", "vam_engine/kernels/gate_stats.py", "vam_engine/__init__.py",
            "vam_engine/cli/demo.py"} <= names
    assert {f"vam_engine/{rel}" for rel in DATA_FILES} <= names
    assert not [n for n in names if n.startswith(("tests/", "build/", "kernels/", "csrc/")) or "__pycache__" in n]
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
