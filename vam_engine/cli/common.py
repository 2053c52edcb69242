"""What every command shares: the option groups (each given only to the commands that use
it), the config and engine a command's options describe, the store check, times as printed."""
from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError


@dataclass(frozen=True)
class OptionGroups:
    """argparse parents: ``store`` (--store, required), ``engine`` (--device, --config),
    ``ingest`` (--fps, --keyframes-only), ``quiet`` (-q), ``model`` (--llm), ``texts``
    (--text-model), ``cameras`` (--camera, repeatable), ``tools`` (--web-search,
    --web-search-kind, --image-search: the planner's outside tools), ``audio`` (--audio-model,
    --audio-language), ``perception`` (--detector, --labels, --ocr)."""

    store: argparse.ArgumentParser
    engine: argparse.ArgumentParser
    ingest: argparse.ArgumentParser
    quiet: argparse.ArgumentParser
    model: argparse.ArgumentParser
    texts: argparse.ArgumentParser
    cameras: argparse.ArgumentParser
    tools: argparse.ArgumentParser
    audio: argparse.ArgumentParser
    perception: argparse.ArgumentParser


def option_groups() -> OptionGroups:
    def group() -> argparse.ArgumentParser:
        return argparse.ArgumentParser(add_help=False)

    store, engine, ingest, quiet, model, texts, cameras, tools, audio, perception = (group() for _ in range(10))
    store.add_argument("--store", required=True, help="store directory")
    engine.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    engine.add_argument("--config", help="JSON or TOML config file")
    ingest.add_argument("--fps", type=float, help="base sampling rate (default 0.5)")
    ingest.add_argument("--keyframes-only", action="store_true",
                        help="decode keyframes only, taking the nearest keyframe to each tick")
    quiet.add_argument("-q", "--quiet", action="store_true", help="no progress")
    model.add_argument("--llm", help="the model: openai:URL#MODEL (an OpenAI-compatible server) or "
                                     "local:DIR (a Qwen-VL checkpoint directory)")
    texts.add_argument("--text-model", help="text embedder for documents, e.g. 'minilm'")
    cameras.add_argument("--camera", action="append", help="only these cameras (repeatable)")
    tools.add_argument("--web-search", metavar="URL", help="let the planner search the web: a SearXNG instance's "
                                                            "base URL (or, with --web-search-kind json, an endpoint "
                                                            "returning {\"results\": [{title, url, content}]})")
    tools.add_argument("--web-search-kind", choices=("searxng", "json"), help="the --web-search endpoint's kind "
                                                                             "(default searxng)")
    tools.add_argument("--image-search", metavar="URL", help="let the planner search by image: crops of frames are "
                                                              "POSTed to this endpoint (multipart field 'image')")
    audio.add_argument("--audio-model", metavar="DIR",
                       help="transcribe the sources' speech with this CTranslate2 Whisper model directory "
                            "(model.bin; needs the 'audio' extra)")
    audio.add_argument("--audio-language", metavar="CODE", help="the speech's language, ISO 639-1 (default: detected)")
    perception.add_argument("--detector", help="object detector model: a TensorFlow .pb (its .pbtxt beside it), an "
                                               ".onnx (YOLO or DETR layout) or a TensorRT .engine "
                                               "(needs vam_engine[perception])")
    perception.add_argument("--labels", help="the detector's class names, one per line (default: COCO)")
    perception.add_argument("--ocr", action="store_true", help="read the text on kept frames (RapidOCR; needs "
                                                                "vam_engine[perception])")
    return OptionGroups(store, engine, ingest, quiet, model, texts, cameras, tools, audio, perception)


def config_from_args(args, **extra):
    """The EngineConfig of ``--config``, ``--device`` and the options a command has (``--fps``,
    ``--keyframes-only``, ``--llm``, ``--text-model``, ``--audio-model``, ``--audio-language``),
    with ``extra`` section overrides."""
    from ..config import EngineConfig

    over = {"ingest": {}, **extra}
    if getattr(args, "fps", None) is not None:
        over["ingest"]["fps"] = args.fps
    if getattr(args, "keyframes_only", False):
        over["ingest"]["keyframes_only"] = True
    if getattr(args, "llm", None):
        from ..llm import parse_llm_spec

        over["llm"] = parse_llm_spec(args.llm)
    if getattr(args, "text_model", None):
        over["embed"] = {"text_model": args.text_model}
    web = {k: v for k, v in (("url", getattr(args, "web_search", None)),
                             ("kind", getattr(args, "web_search_kind", None))) if v}
    image = {"url": args.image_search} if getattr(args, "image_search", None) else {}
    if web or image:
        over["tools"] = {**({"web_search": web} if web else {}), **({"image_search": image} if image else {})}
    over.update(audio_overrides(args))
    perception = {k: v for k, v in (("detector", getattr(args, "detector", None)),
                                    ("labels", getattr(args, "labels", None)),
                                    ("ocr", True if getattr(args, "ocr", False) else None)) if v is not None}
    if perception:
        over["perception"] = perception
    return EngineConfig.load(getattr(args, "config", None), device=getattr(args, "device", None), **over)


def audio_overrides(args) -> dict:
    """The ``audio`` section ``--audio-model`` and ``--audio-language`` set ({} without them)."""
    audio = {}
    if getattr(args, "audio_model", None):
        path = Path(args.audio_model)
        if not (path / "model.bin").is_file():
            raise ValueError(f"--audio-model {args.audio_model}: not a CTranslate2 Whisper model directory "
                             f"(no model.bin in it)")
        audio["model"] = str(path)
    if getattr(args, "audio_language", None):
        audio["language"] = args.audio_language
    return {"audio": audio} if audio else {}


def make_engine(args, *, existing: bool = True, documents: bool = True):
    """The engine a command needs. ``existing``: the store must be there already (every command
    but index, demo and serve: reading a path that is not a store must not create one).
    ``documents=False``: without a text embedder the engine writes no event documents (watch
    indexes and watches without them) instead of refusing to start."""
    from ..engine import Engine

    if existing:
        check_store(args.store)
    cfg = config_from_args(args)
    if not documents and cfg.embed.text_model is None and cfg.embed.body == "descriptor":
        cfg = cfg.model_copy(update={"writer": cfg.writer.model_copy(update={"enabled": False})})
    return Engine(args.store, cfg)


def check_store(store: str) -> None:
    if not (Path(store) / "store.sqlite").is_file():
        raise StoreError(f"{store}: not a vam_engine store (no store.sqlite): index something into it first")


def fmt_t(t: float) -> str:
    """A time as the commands print it: UTC date and time for unix seconds, else seconds."""
    from ..memory import is_absolute_time

    if is_absolute_time(t):
        return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f"{t:9.2f}s"


def audio_line(a: dict) -> str:
    """A source's (or a camera's) audio as one line: its state and what it transcribed."""
    if a.get("state") == "no_audio":
        return "audio: none (the source has no audio track)"
    if a.get("state") == "error":
        return f"audio: ERROR: {a.get('error')}"
    behind = f", {a['seconds_dropped']:.1f} s of speech dropped (ASR behind)" if a.get("seconds_dropped") else ""
    return (f"audio: {a.get('state')}, {a.get('seconds_speech', 0):.1f} s of speech, {a.get('segments', 0)} "
            f"transcript segments{behind}")
