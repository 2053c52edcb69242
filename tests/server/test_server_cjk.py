"""Chinese and Japanese text over HTTP: ``POST /api/search`` finds signs read on screen (source
"ocr") and sentences said (source "speech") by any phrase inside them, a camera-limited token
only on its cameras. The store is the service tests' two pushed cameras, with the signs of
tests/support/cjk.py committed on "front" (a perception stage's OCR lines in an ingest
transaction) and its sentences said on "yard" (the engine's transcript writer: rows, full-text
index, MiniLM vectors)."""
import pytest

from support import cjk
from support.server import build_engine
from vam_engine.memory.transcripts import TranscriptWriter
from vam_engine.server import TokenStore

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 180


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = build_engine(tmp_path_factory.mktemp("cjk") / "store", n=12)
    cjk.commit_signs(eng.store, "front")
    TranscriptWriter(eng.store.transcripts, eng.text_embedder())(cjk.segments("yard"))
    yield eng
    eng.close()


@pytest.fixture
def client(engine, client_for):
    return client_for(engine)


def found(client, text, sources, headers=None):
    r = client.post("/api/search", json={"text": text, "sources": sources, "top_k": 10}, headers=headers or {})
    assert r.status_code == 200, r.text
    return [(e["source"], e["camera_id"], e["text"]) for e in r.json()["evidence"]]


def test_signs_on_screen_are_found_by_a_phrase_inside_them(client):
    assert found(client, '"吸烟"', ["ocr"]) == [("ocr", "front", "禁止吸烟")]
    assert found(client, '"出口在左边"', ["ocr"])[0] == ("ocr", "front", "出口在左边")
    assert {t for _, _, t in found(client, '"出口"', ["ocr"])} == {"出口在左边", "Exit 出口 Ｂ２"}
    assert found(client, '"Exit 出口 B2"', ["ocr"]) == [("ocr", "front", "Exit 出口 Ｂ２")]
    assert found(client, '"exit b2"', ["ocr"]) == []  # a phrase stays a phrase
    r = client.post("/api/search", json={"text": '"禁止吸烟"', "sources": ["ocr"]}).json()["evidence"][0]
    assert (r["t_start"], r["t_end"]) == (31.0, 32.0) and r["frames"] and r["frames"][0].startswith("/api/frames/")


def test_sentences_said_are_found_by_their_words(client):
    # speech hits are found by words first, then by meaning (every segment of the camera here)
    assert found(client, '"東京駅"', ["speech"])[0] == ("speech", "yard", "東京駅はどこですか")
    assert found(client, '"洗手间"', ["speech"])[0] == ("speech", "yard", "请问洗手间在哪里？")
    assert found(client, "大厅的电梯", ["speech"])[0] == ("speech", "yard", "电梯在大厅的右边。")
    both = found(client, '"東京駅"', ["ocr", "speech"])
    assert {(s, t) for s, _, t in both[:2]} == {("ocr", "東京駅 ３番線"), ("speech", "東京駅はどこですか")}


def test_a_camera_limited_token_finds_cjk_text_on_its_cameras_only(engine, client, tmp_path):
    tokens = TokenStore(tmp_path / "tokens")
    h = {"Authorization": f"Bearer {tokens.create('read', ['yard'])[1]}"}
    every = {"Authorization": f"Bearer {tokens.create('read')[1]}"}
    got = found(client, '"東京駅"', ["ocr", "speech"], h)
    assert got[0] == ("speech", "yard", "東京駅はどこですか") and {c for _, c, _ in got} == {"yard"}
    assert found(client, '"吸烟"', ["ocr"], h) == [] and found(client, '"吸烟"', ["ocr"], every) != []
