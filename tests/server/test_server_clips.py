"""``GET /api/clips``: an MP4 of any interval, camera-scoped as frames are, bad ranges 4xx naming
the problem, concurrent encodes bounded (429), and the ``clip`` URLs of events and evidence."""
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from support.speech import have_espeak, silent_video, speech_video
from vam_engine.engine import Engine
from vam_engine.server import TokenStore

pytestmark = [pytest.mark.usefixtures("watchdog"),
              pytest.mark.skipif(not (have_espeak() and shutil.which("ffprobe")), reason="needs espeak-ng and ffprobe")]
WATCHDOG_S = 240


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = Engine(tmp_path_factory.mktemp("clips_api") / "store",
                 {"ingest": {"fps": 2.0}, "clips": {"max_s": 60, "max_encodes": 1}}, device="cpu")
    eng.index_file(speech_video(), camera_id="talk")
    eng.index_file(silent_video(), camera_id="quiet")
    yield eng
    eng.close()


def streams(data: bytes, tmp_path) -> dict:
    p = tmp_path / "c.mp4"
    p.write_bytes(data)
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_type:format=duration", "-of", "json",
                          str(p)], capture_output=True, text=True, check=True).stdout
    info = json.loads(out)
    return {"duration": float(info["format"]["duration"]), "types": {s["codec_type"] for s in info["streams"]}}


def test_a_clip_of_an_interval(client_for, engine, tmp_path):
    c = client_for(engine)
    r = c.get("/api/clips", params={"camera": "talk", "t0": 1.0, "t1": 5.0})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "video/mp4" and r.headers["x-clip-made-from"] == "source"
    info = streams(r.content, tmp_path)
    assert info["types"] == {"video", "audio"} and info["duration"] == pytest.approx(4.0, abs=0.25)


@pytest.mark.parametrize("params, status, problem", [
    ({"camera": "talk", "t0": 5, "t1": 2}, 400, "t1 (2) must be after t0 (5)"),
    ({"camera": "talk", "t0": 0, "t1": 61}, 400, "a clip is at most 60 s"),
    ({"camera": "talk", "t0": "nan", "t1": 2}, 400, "t0 must be a finite time"),
    ({"camera": "talk", "t0": "soon", "t1": 2}, 422, "t0"),
    ({"camera": "talk", "t1": 2}, 422, "t0"),
    ({"camera": "nobody", "t0": 0, "t1": 2}, 404, "camera 'nobody' has no retained frame"),
])
def test_bad_requests_are_4xx_naming_the_problem(client_for, engine, params, status, problem):
    r = client_for(engine).get("/api/clips", params=params)
    assert r.status_code == status, r.text
    assert problem in r.json()["detail"] if isinstance(r.json()["detail"], str) else problem in r.text


def test_a_camera_limited_token_gets_404_for_another_camera(client_for, engine, tmp_path):
    tokens = TokenStore(tmp_path / "tokens")
    quiet = {"Authorization": f"Bearer {tokens.create('read', ['quiet'])[1]}"}
    c = client_for(engine, tokens_dir=str(tmp_path / "tokens"))
    assert c.get("/api/clips", params={"camera": "talk", "t0": 1, "t1": 3}, headers=quiet).status_code == 404
    r = c.get("/api/clips", params={"camera": "quiet", "t0": 1, "t1": 3}, headers=quiet)
    assert r.status_code == 200 and streams(r.content, tmp_path)["types"] == {"video"}
    assert c.get("/api/clips", params={"camera": "quiet", "t0": 1, "t1": 3}).status_code == 401


def test_encodes_beyond_max_encodes_get_429(client_for, engine):
    """clips.max_encodes is 1: of simultaneous requests for different intervals (no cache hit),
    those arriving while one encodes are refused with Retry-After."""
    c = client_for(engine)
    barrier, got = threading.Barrier(4), []

    def one(k):
        barrier.wait()
        r = c.get("/api/clips", params={"camera": "talk", "t0": 0.1 * k, "t1": 12.0 + 0.1 * k})
        got.append((r.status_code, r.headers.get("retry-after")))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    statuses = sorted(s for s, _ in got)
    assert statuses[0] == 200 and statuses[-1] == 429 and set(statuses) == {200, 429}, got
    assert all(ra == "2" for s, ra in got if s == 429)


def test_events_and_evidence_link_to_their_clips(client_for, engine, tmp_path):
    c = client_for(engine)
    ev = c.get("/api/events", params={"camera": "talk"}).json()["items"][0]
    assert ev["clip"].startswith("/api/clips?camera=talk&")
    r = c.get(ev["clip"])
    assert r.status_code == 200
    from urllib.parse import parse_qs, urlsplit

    q = {k: float(v[0]) for k, v in parse_qs(urlsplit(ev["clip"]).query).items() if k != "camera"}
    assert q["t0"] <= ev["t_start"] and q["t1"] >= ev["t_end"] and q["t1"] - q["t0"] >= 4.0
    # the source starts at 0: an interval widened before it is cut from there
    assert streams(r.content, tmp_path)["duration"] == pytest.approx(q["t1"] - max(0.0, q["t0"]), abs=0.25)
    shot = Path(engine.moments("quiet")[-1].frame_path).read_bytes()
    hits = c.post("/api/search", data={"cameras": "quiet", "top_k": "3"},
                  files={"image": ("q.jpg", shot, "image/jpeg")}).json()
    assert hits["evidence"] and all(h["clip"].startswith("/api/clips?camera=quiet&") for h in hits["evidence"])


@pytest.mark.browser
def test_the_page_plays_an_events_clip(engine, browser, tmp_path):
    """An event opened on the page offers its clip; the clip is fetched with the token and plays
    in the viewer (Chromium decodes the H.264 + AAC)."""
    from selenium.webdriver.common.by import By

    from support.browser import until
    from support.server import ServerThread
    from vam_engine.server import ServeOptions, create_app

    token = TokenStore(tmp_path / "tokens").create("read")[1]
    with ServerThread(create_app(engine, ServeOptions(tokens_dir=str(tmp_path / "tokens")))) as srv:
        d = browser
        d.get(f"{srv.url}/#token={token}")
        until(d, lambda: d.find_elements(By.CSS_SELECTOR, ".track[data-camera=talk] .ev"), "event bars")
        d.execute_script("document.querySelector('.track[data-camera=talk] .ev').click()")
        until(d, lambda: d.find_element(By.ID, "viewer-clip").is_displayed(), "the clip button")
        d.find_element(By.ID, "viewer-clip").click()
        until(d, lambda: d.execute_script("const v = document.getElementById('viewer-video'); "
                                          "return !v.hidden && v.src.startsWith('blob:') && v.readyState >= 1 "
                                          "&& v.duration > 0"), "the clip, loaded in the viewer")
        severe = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert severe == [], severe


def test_clip_urls_of_an_instant_an_alert_and_every_camera():
    """The API's records and the notifier's alert messages link to the same clip."""
    from vam_engine.ingest.clips import clip_url
    from vam_engine.memory import Alert
    from vam_engine.notify.events import alert_event
    from vam_engine.server.jsonify import alert_json

    assert clip_url("front door", 10.0, 40.0) == "/api/clips?camera=front%20door&t0=10.000&t1=40.000"
    assert clip_url("yard", 12.0, 12.0) == "/api/clips?camera=yard&t0=10.000&t1=14.000"  # an instant: 4 s around
    assert clip_url("*", 0.0, 10.0) is None  # a summary over every camera has no one clip
    assert clip_url("yard", float("nan"), 1.0) is None
    alert = Alert(7, "m1", "door", 100.0, None, 0.9, "a white flash", (3,), (), 0.0)
    assert alert_json(alert)["clip"] == "/api/clips?camera=door&t0=90.000&t1=102.000"
    assert alert_event(alert).body["clip"] == alert_json(alert)["clip"]  # what MQTT and webhooks carry too
