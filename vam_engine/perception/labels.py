"""Class names: COCO's two numberings, and a user's labels file.

``COCO_80``: the 80 classes in the contiguous order YOLO-family models emit (class 0 = person).
``COCO_91``: the original COCO category ids 0..90 as the TensorFlow Object Detection API and
DETR emit them (1 = person, 90 = toothbrush; 0 and the ids COCO never used are "N/A"). A
detection whose class maps to "N/A" (or to no label) is dropped.
"""
from __future__ import annotations

from pathlib import Path

from .records import PerceptionError

COCO_80 = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
)

# COCO category ids that were never used (the 2014 paper listed 91 categories, 80 were annotated)
_UNUSED_IDS = (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)


def _coco_91() -> tuple[str, ...]:
    out = ["N/A"]
    names = iter(COCO_80)
    for cid in range(1, 91):
        out.append("N/A" if cid in _UNUSED_IDS else next(names))
    return tuple(out)


COCO_91 = _coco_91()
NO_LABEL = "N/A"


def load_labels(path: str | Path) -> tuple[str, ...]:
    """A labels file: one class name per line, line i (from 0) naming class id i as the model
    emits it; blank lines and "N/A" are ids to drop. A missing, unreadable or empty file is a
    PerceptionError naming it."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PerceptionError(f"perception.labels: {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PerceptionError(f"perception.labels: cannot read {p}: {e}") from None
    lines = [ln.strip() for ln in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    labels = tuple(ln or NO_LABEL for ln in lines)
    if not any(ln != NO_LABEL for ln in labels):
        raise PerceptionError(f"perception.labels: {p} names no class (one class name per line)")
    return labels
