"""What was said, over HTTP: ``GET /api/transcripts`` (camera, time range, ``as_of``, keyset pages,
camera-limited tokens) and speech hits with their text in ``POST /api/search``. The store is the
service tests' two pushed cameras with transcript segments stored through the engine's own
writer (TranscriptWriter: rows, full-text index, MiniLM vectors)."""
import pytest

from support.server import all_pages, build_engine
from vam_engine.audio import TranscriptSegment
from vam_engine.memory.transcripts import TranscriptWriter
from vam_engine.server import TokenStore

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 180
SAID = [("front", 2.0, 4.5, "Please remember to water the plants in the kitchen."),
        ("front", 9.0, 11.0, "The delivery truck arrived at the loading dock."),
        ("front", 14.0, 15.5, "Someone left the back door open."),
        ("yard", 3.0, 5.0, "The red car is parked next to the blue door."),
        ("yard", 12.0, 13.5, "Water the plants by the fence as well.")]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = build_engine(tmp_path_factory.mktemp("said") / "store", n=36)
    TranscriptWriter(eng.store.transcripts, eng.text_embedder())(
        [TranscriptSegment(c, a, b, text, "en", 0.9) for c, a, b, text in SAID])
    yield eng
    eng.close()


@pytest.fixture
def client(engine, client_for):
    return client_for(engine)


def test_transcripts_page_by_camera_and_time_with_as_of(client):
    items, pages = all_pages(client, "/api/transcripts", limit=2)
    assert pages == 3 and [(x["camera_id"], x["t_start"], x["text"]) for x in items] == \
        [(c, a, text) for c, a, _, text in SAID]  # by camera, then time: no row twice, none lost
    assert items[0]["language"] == "en" and items[0]["confidence"] == pytest.approx(0.9)
    got, _ = all_pages(client, "/api/transcripts", camera="front", t0=4.0, t1=10.0)  # overlapping [4, 10]
    assert [x["t_start"] for x in got] == [2.0, 9.0]
    got, _ = all_pages(client, "/api/transcripts", as_of=10.0)  # nothing that ends after 10 s
    assert [(x["camera_id"], x["t_start"]) for x in got] == [("front", 2.0), ("yard", 3.0)]
    assert client.get("/api/transcripts", params={"t0": 5, "t1": 1}).status_code == 422
    assert client.get("/api/transcripts", params={"cursor": "bogus"}).status_code == 422


def test_a_camera_limited_token_reads_only_its_cameras_speech(engine, client, tmp_path):
    token = TokenStore(tmp_path / "tokens").create("read", ["yard"])[1]
    h = {"Authorization": f"Bearer {token}"}
    items, _ = all_pages(client, "/api/transcripts", headers=h)
    assert {x["camera_id"] for x in items} == {"yard"} and len(items) == 2
    assert client.get("/api/transcripts", params={"camera": "front"}, headers=h).status_code == 403
    r = client.post("/api/search", json={"text": '"water the plants"', "top_k": 10}, headers=h)
    assert r.status_code == 200
    speech = [e for e in r.json()["evidence"] if e["source"] == "speech"]
    assert speech and {e["camera_id"] for e in r.json()["evidence"]} == {"yard"}
    assert speech[0]["text"] == "Water the plants by the fence as well."
    assert client.get("/api/transcripts").status_code == 401  # a token exists now: none, no read


def test_search_returns_speech_hits_with_their_text(client):
    r = client.post("/api/search", json={"text": '"loading dock"', "top_k": 5})
    assert r.status_code == 200, r.text
    hit = r.json()["evidence"][0]  # the quoted words occur in one segment: the fused list's best
    assert hit["source"] == "speech" and hit["camera_id"] == "front"
    assert (hit["t_start"], hit["t_end"]) == (9.0, 11.0) and "loading dock" in hit["text"]
    assert all(f.startswith("/api/frames/") for f in hit["frames"])
    only = client.post("/api/search", json={"text": "a vehicle parked", "sources": ["speech"], "top_k": 2}).json()
    assert [e["source"] for e in only["evidence"]] == ["speech", "speech"]
    assert only["evidence"][0]["text"].startswith("The red car")  # by meaning
    events = client.post("/api/search", json={"text": "loading dock", "sources": ["event"]}).json()
    assert events["evidence"] and {e["source"] for e in events["evidence"]} == {"event"}
    assert client.post("/api/search", json={"text": "x", "sources": ["sound"]}).status_code == 422
