"""A cluster's search without the transport (cluster/fanout.py): the same frames, documents and
speech held by one engine, or split by camera over two engines as a cluster's shards hold them,
through the three steps the router runs (each shard's ranked lists, one fusion, each shard's
evidence). Searches ranked by vectors give the same hits in the same order with the same scores,
cosines and relevance, place filters included; over the words sources the same hits are found
with the same cosines and relevance, and only their order may differ, as bm25 weighs words by
each shard's own statistics (docs/cluster.md)."""
import pytest

from support.server import config, model, texture
from vam_engine.audio import TranscriptSegment
from vam_engine.cluster.fanout import by_shard, fuse_shards, in_fused_order, shard_evidence, shard_lists
from vam_engine.engine import Engine
from vam_engine.llm import ScriptedLLM
from vam_engine.memory import SOURCES, SPEECH
from vam_engine.memory.transcripts import TranscriptWriter

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 300
SAID = [("front", 2.0, 4.5, "Please remember to water the plants in the kitchen."),
        ("front", 9.0, 11.0, "The delivery truck arrived at the loading dock."),
        ("yard", 3.0, 5.0, "The red car is parked next to the blue door."),
        ("yard", 12.0, 13.5, "Water the plants by the fence as well.")]
N = 30


def build(path, cameras):
    eng = Engine(path, config(), device="cpu", llm=ScriptedLLM(model()))
    for cam in cameras:
        for i in range(N):  # a robot's path: front walks along x, yard along y
            x, y = (i * 0.5, 0.0) if cam == "front" else (0.0, i * 0.5)
            eng.push(cam, texture(i, cam), i * 0.5, pose=(x, y, 0.0, 0.0))
        eng.end_push(cam)
    assert eng.wait_for_documents(timeout=120)
    TranscriptWriter(eng.store.transcripts, eng.text_embedder())(
        [TranscriptSegment(c, a, b, text, "en", 0.9) for c, a, b, text in SAID if c in cameras])
    return eng


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("fanout")
    whole = build(root / "whole", ("front", "yard"))
    shards = {"shard-0": build(root / "s0", ("front",)), "shard-1": build(root / "s1", ("yard",))}
    yield whole, shards
    for e in (whole, *shards.values()):
        e.close()


def cluster_search(shards, top_k=8, labels=None, **query):
    parts = {s: shard_lists(e, top_k=top_k, labels=labels, **query) for s, e in shards.items()}
    best = fuse_shards(parts, top_k, labels)
    got = {s: shard_evidence(shards[s], hs, labels) for s, hs in by_shard(best).items()}
    return [ev for _, ev in in_fused_order(best, got, top_k)]


def key(ev):
    return (ev.camera_id, ev.t_start, ev.t_end, ev.source, ev.text, len(ev.moment_ids), ev.pose)


QUERIES = [
    dict(text="water the plants", sources=SOURCES + (SPEECH,)),
    dict(text="a green textured scene", sources=SOURCES + (SPEECH,)),
    dict(text="delivery truck", sources=("event", SPEECH), time_range=(0.0, 12.0)),
    dict(text="red car", sources=SOURCES + (SPEECH,), as_of=10.0),
    dict(text="textured scene", sources=SOURCES, cameras=["yard"]),
]


def assert_same_measures(got, want):
    for g, w in zip(got, want):
        assert (g.similarity is None) == (w.similarity is None)
        if w.similarity is not None:
            assert g.similarity == pytest.approx(w.similarity, abs=1e-6)
        assert (g.relevance is None) == (w.relevance is None)
        if w.relevance is not None:  # pooled backgrounds: every vector is in the sample at this size
            assert g.relevance == pytest.approx(w.relevance, abs=1e-6)


@pytest.mark.parametrize("query", QUERIES, ids=[q["text"] for q in QUERIES])
def test_a_words_search_split_over_shards_finds_what_one_engine_finds(engines, query):
    whole, shards = engines
    want = whole.search(top_k=40, **query).evidence  # more than the stores hold: every match
    got = cluster_search(shards, top_k=40, **query)
    assert want and sorted(map(key, got)) == sorted(map(key, want))
    assert_same_measures(sorted(got, key=key), sorted(want, key=key))
    if query["text"] == "water the plants":
        said = [e for e in got if e.source == SPEECH]
        assert {e.camera_id for e in said} == {"front", "yard"}  # one phrase, heard on both shards


def test_images_and_place_filters_split_over_shards_equal_one_engine(engines):
    from vam_engine.memory import make_place

    whole, shards = engines
    image = texture(13, "yard")
    want = whole.search(image=image, top_k=6).evidence
    got = cluster_search(shards, image=image, top_k=6, sources=SOURCES)
    assert [key(e) for e in got] == [key(e) for e in want] and got[0].camera_id == "yard"
    assert [e.score for e in got] == pytest.approx([e.score for e in want], abs=1e-12)
    assert_same_measures(got, want)
    # the place filters hold on each shard: only moments taken within 2 m of (5, 0), on front's path
    place = dict(near=(5.0, 0.0), radius=2.0)
    want = whole.search(image=image, top_k=8, **place).evidence
    got = cluster_search(shards, image=image, top_k=8, sources=SOURCES, place=make_place(**place))
    assert want and [key(e) for e in got] == [key(e) for e in want]
    assert {e.camera_id for e in got} == {"front"} and all(abs(e.pose.x - 5.0) <= 2.0 for e in got)
    want = whole.search(text="water", top_k=40, sources=SOURCES + (SPEECH,), **place).evidence
    got = cluster_search(shards, text="water", top_k=40, sources=SOURCES + (SPEECH,), place=make_place(**place))
    assert want and sorted(map(key, got)) == sorted(map(key, want))
