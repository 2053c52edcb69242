"""Generated inputs with known content, shared by the demo, the tests, the benchmarks and the
evaluation's sample suite (one generator per idea, so a test and the benchmark that measures the
same path see the same kind of input):

- ``scenes``: gray camera scenes and frame batches for the gates, colour scenes, photographs
  (scikit-image's, no download), clips written with known PTS (``write_scene_clip``,
  ``write_rgb_clip``); its names are re-exported here;
- ``gate_sequences``: gray sequences with a known right answer for each gate decision;
- ``demo``: the built-in example clip (``vam-engine demo``): ``make_demo_clip`` writes it,
  ``scene_spans``/``scene_of`` say which scene a time range is in, ``clip_frame`` reads a frame back;
- ``perception``: signs, counters and photographed objects with known text, labels and paths;
- ``tiny_qwen``: a tiny random-weight Qwen2-VL checkpoint for running the local model body
  without downloading one (``python -m vam_engine.synthetic.tiny_qwen DIR``);
- ``rtsp``: a clip served as a live RTSP camera (GStreamer's server on the system Python);
- ``robot``: a robot's run around a square loop with known poses and a cat at known places.
"""
from .demo import clip_frame, make_demo_clip, scene_of, scene_spans
from .scenes import (gray_scene, gray_frame, near_copy, GateBatch, gate_batch, rgb_frames, scene_image,
                     box_blur, SceneClip, write_scene_clip, photo, resize_rgb, photo_strip, photo_wall,
                     defocus, haze, draw_digits, paste, WrittenClip, vfr_pts, write_rgb_clip, frame_times,
                     SCENE_KINDS, PHOTOS)

__all__ = ["gray_scene", "gray_frame", "near_copy", "GateBatch", "gate_batch", "rgb_frames", "scene_image",
           "box_blur", "SceneClip", "write_scene_clip", "photo", "resize_rgb", "photo_strip", "photo_wall",
           "defocus", "haze", "draw_digits", "paste", "WrittenClip", "vfr_pts", "write_rgb_clip",
           "frame_times", "SCENE_KINDS", "PHOTOS", "clip_frame", "make_demo_clip", "scene_of", "scene_spans"]
