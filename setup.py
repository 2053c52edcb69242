"""Build glue only: metadata lives in pyproject.toml.

Builds the native module ``vam_engine._C`` from csrc/ with CMake (CMakeLists.txt) and maps the
top-level ``kernels/`` directory (Triton kernels) to the subpackage ``vam_engine.kernels``.

    pip install .                        # wheel
    pip install -e .                     # editable (the module is built next to the sources)
    python setup.py build_ext --inplace  # rebuild the module in place

Environment: CMAKE_BUILD_PARALLEL_LEVEL (build jobs), CMAKE_GENERATOR (default Ninja when
available), VAM_BUILD_TYPE (default Release; DEBUG=1 also selects Debug), CMAKE_ARGS (extra
arguments for the configure step).
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name: str, sourcedir: Path = ROOT):
        super().__init__(name, sources=[])
        self.sourcedir = Path(sourcedir).resolve()


def _find_cmake() -> str:
    exe = shutil.which("cmake")
    if exe:
        return exe
    try:
        import cmake  # the "cmake" wheel from [build-system] requires

        return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
    except ImportError as e:
        raise RuntimeError("building vam_engine._C needs CMake >= 3.18 (pip install cmake)") from e


def _find_ninja() -> str | None:
    exe = shutil.which("ninja")
    if exe:
        return exe
    try:
        import ninja

        exe = Path(ninja.BIN_DIR) / ("ninja.exe" if os.name == "nt" else "ninja")
        return str(exe) if exe.exists() else None
    except ImportError:
        return None


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        import pybind11

        ext_path = Path(self.get_ext_fullpath(ext.name)).resolve()
        ext_path.parent.mkdir(parents=True, exist_ok=True)
        build_temp = Path(self.build_temp).resolve() / ext.name
        build_temp.mkdir(parents=True, exist_ok=True)

        debug = self.debug or os.environ.get("DEBUG") == "1"
        cfg = os.environ.get("VAM_BUILD_TYPE", "Debug" if debug else "Release")
        cmake_args = [
            f"-DCMAKE_BUILD_TYPE={cfg}",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={ext_path.parent}",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY_{cfg.upper()}={ext_path.parent}",
            f"-DVAM_EXT_FILENAME={ext_path.name}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
        ]
        cache = build_temp / "CMakeCache.txt"
        if "CMAKE_GENERATOR" not in os.environ and not cache.exists():
            ninja = _find_ninja()
            if ninja:
                cmake_args += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
        cmake_args += shlex.split(os.environ.get("CMAKE_ARGS", ""))

        build_args = ["--config", cfg]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or (str(self.parallel) if self.parallel else "")
        if jobs:
            build_args += ["--parallel", jobs]

        cmake = _find_cmake()
        subprocess.run([cmake, "-S", str(ext.sourcedir), "-B", str(build_temp), *cmake_args], check=True)
        subprocess.run([cmake, "--build", str(build_temp), *build_args], check=True)
        if not ext_path.exists():
            raise RuntimeError(f"CMake did not produce {ext_path}")


setup(
    packages=find_packages(include=["vam_engine", "vam_engine.*"]) + ["vam_engine.kernels"],
    package_dir={"vam_engine.kernels": "kernels"},
    package_data={"vam_engine.eval.sample": ["*.jsonl"],  # the sample suite's questions
                  "vam_engine.server": ["web/*"]},  # the web page and the API docs page
    ext_modules=[CMakeExtension("vam_engine._C")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
