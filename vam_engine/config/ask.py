"""What one question shows the model (``ask``)."""
from __future__ import annotations

from pydantic import Field

from .base import Section


class AskConfig(Section):
    """What one question shows the model (reason/budget.py): a fixed budget of images and
    estimated tokens per request whatever the number of cameras, spent on the cameras that
    matter for the question; the two-phase protocol's sizes (OASIS 3.2, 4.1) and the present's
    window spans."""

    max_images: int = Field(16, ge=1, le=1024, description="images the coarse request (and each planner "
                            "inspection) carries at most, across every camera")
    max_tokens: int = Field(12_000, ge=1000, le=1_000_000, description="estimated tokens the coarse request "
                            "carries at most: image_tokens an image, text at 4 characters a token")
    image_tokens: int = Field(256, ge=1, le=16_384, description="the model's cost of one image in tokens, for the "
                              "estimate (Qwen2-VL: (448 / 28)^2 = 256 at the present's 448 px a side)")
    fine_max_images: int = Field(32, ge=0, le=1024, description="images the fine stage's retrieved memory adds at "
                                 "most (k_f nodes x keyframes_per_node: 2 x 16)")
    fine_max_tokens: int = Field(12_000, ge=0, le=1_000_000, description="estimated tokens the fine stage's "
                                 "retrieved memory adds at most (the fine request continues the coarse one)")
    k_f: int = Field(2, ge=0, le=32, description="forest nodes the fine stage retrieves (no two in one lineage)")
    k_q: int = Field(1, ge=0, le=32, description="earlier question/answer pairs the fine stage retrieves")
    keyframes_per_node: int = Field(16, ge=1, le=64, description="keyframes the fine stage shows of each retrieved "
                                    "node (the forest's keyframe budget), fewer when the budget is short")
    min_camera_images: int = Field(4, ge=1, le=64, description="a camera shown in the coarse request gets at "
                                   "least this many images; the budget then shows max_images / this many "
                                   "cameras at most and summarises the rest in one line each")
    whole_cameras: int = Field(2, ge=0, le=64, description="a view of at most this many cameras shows each one's "
                               "present whole, as OASIS does for one stream (a live camera: 16 short-window and 24 "
                               "medium-buffer frames); the image and token budget binds above (0: always)")
    match_span_s: float = Field(3600.0, ge=0, description="how far back a camera's documents, transcripts, text "
                                "read and detected things are matched against the question (0: all history)")
    short_s: float = Field(8.0, gt=0, le=600, description="the present's short window span (OASIS: 8 s)")
    short_fps: float = Field(2.0, gt=0, le=30, description="the short window's rate (OASIS: 2 fps)")
    medium_s: float = Field(32.0, gt=0, le=3600, description="the present's medium buffer span (OASIS: 32 s)")
    medium_fps: float = Field(1.0, gt=0, le=30, description="the medium buffer's rate (OASIS: 1 fps)")
