"""The retrieval threshold's calibrated relevance (memory/search.py): one threshold decides alike
in spaces whose raw cosines sit in different ranges; small, scoped and degenerate spaces; the
cached background sample; the agentic loop cutting on relevance rather than on a raw cosine."""
import itertools
import math

import numpy as np
import pytest

from support.demo_store import documented_demo
from support.scripted import scripted_llm
from support.vectors import unit_rows
from vam_engine.memory.search import whole_space_sample
from vam_engine.memory.search import BACKGROUND_SAMPLE, SPREAD_FLOOR, background_z, relevance
from vam_engine.memory.view import MemoryView
from vam_engine.reason.agent import AgenticAnswerer
from vam_engine.vectors import VectorSpace

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 120

D = 512
N_BACKGROUND = 600  # more than the sample: the background is a sample of the space
N_RELEVANT = 3


def _clip_like(rng):
    """A space like CLIP text-to-image: background cosines ~0 +- 0.044, relevant ones 0.25."""
    q = unit_rows(rng.standard_normal(D))
    bg = unit_rows(rng.standard_normal((N_BACKGROUND, D)))
    perp = unit_rows(rng.standard_normal((N_RELEVANT, D)))
    perp = unit_rows(perp - np.outer(perp @ q, q))
    rel = 0.25 * q + math.sqrt(1 - 0.25 ** 2) * perp
    return q, np.vstack([rel, bg])


def _shifted(q, vecs, c=0.6, s=0.6):
    """The same items in a space whose cosines are an affine map of the first's: one extra
    dimension shared by every vector, cos' = c*s*cos + sqrt(1-c^2)*sqrt(1-s^2) (0.36 cos + 0.64:
    background ~0.64, relevant ~0.73, like a sentence space)."""
    q2 = np.append(c * q, math.sqrt(1 - c * c))
    v2 = np.hstack([s * vecs, np.full((len(vecs), 1), math.sqrt(1 - s * s))])
    return q2, v2


def _space(name, vecs):
    sp = VectorSpace(name, vecs.shape[1], background_build=False)
    sp.add(np.arange(len(vecs)), vecs)
    return sp


def _scored(space, q, k=None):
    """(ids, raw cosines, relevances) of the top k (default: every vector) of a search."""
    sims, ids = space.search(q, k or len(space))
    sims, ids = sims[0], ids[0]
    z = background_z(space, q, sims)
    return ids, sims, np.array([relevance(float(v)) for v in z])


def test_one_threshold_decides_alike_in_spaces_with_different_cosine_ranges():
    rng = np.random.default_rng(7)
    q_a, v_a = _clip_like(rng)
    q_b, v_b = _shifted(q_a, v_a)
    a, b = _space("clip", v_a), _space("text", v_b)
    ids_a, sims_a, rel_a = _scored(a, q_a)
    ids_b, sims_b, rel_b = _scored(b, q_b)
    relevant = set(range(N_RELEVANT))
    # the raw cosines sit in different ranges ...
    assert all(abs(sims_a[ids_a == i][0] - 0.25) < 1e-4 for i in relevant)
    assert all(0.72 < sims_b[ids_b == i][0] < 0.74 for i in relevant)
    assert abs(np.median(sims_a) - 0.0) < 0.01 and abs(np.median(sims_b) - 0.64) < 0.01
    # ... so a raw cosine cut decides differently: the seed's 0.65 drops every relevant item of
    # one space and keeps a fifth of the other's background
    assert not any(sims_a[ids_a == i][0] >= 0.65 for i in relevant)
    assert 0.1 < np.mean(sims_b[N_RELEVANT:] >= 0.65) < 0.5
    # the calibrated relevance is the same for the same item, so every threshold decides alike
    by_id_a, by_id_b = dict(zip(ids_a.tolist(), rel_a)), dict(zip(ids_b.tolist(), rel_b))
    assert max(abs(by_id_a[i] - by_id_b[i]) for i in by_id_a) < 1e-3
    for thr in (0.5, 0.65, 0.9, 0.99, 0.9999):
        assert {i for i, r in by_id_a.items() if r >= thr} == {i for i, r in by_id_b.items() if r >= thr}
    for by_id in (by_id_a, by_id_b):
        background = [r for i, r in by_id.items() if i not in relevant]
        # the relevant items pass a strict threshold, every background item fails it
        assert all(by_id[i] >= 0.9999 for i in relevant) and max(background) < 0.9999
        # what 0.65 means: above ~0.39 sd of the background, i.e. about a third of it passes
        assert 0.25 < np.mean(np.array(background) >= 0.65) < 0.45


def test_relevance_is_the_normal_cdf_of_the_background_z():
    assert relevance(None) is None
    assert relevance(0.0) == 0.5 and relevance(1.0) == pytest.approx(0.8413, abs=1e-4)
    assert relevance(0.3853) == pytest.approx(0.65, abs=1e-3)
    assert relevance(50.0) == 1.0 and relevance(-50.0) == 0.0


def test_empty_lone_and_two_vector_spaces():
    q = unit_rows(np.arange(1, 9, dtype=np.float32))
    assert background_z(None, q, np.array([0.5])) is None
    empty = VectorSpace("empty", 8, background_build=False)
    assert background_z(empty, q, np.array([0.5])) is None
    lone = _space("lone", q[None, :])
    assert background_z(lone, q, np.array([1.0])) is None  # nothing to compare with
    # two vectors: the hit is its own background, so the better one sits 1/sqrt(2) sd above the mean
    two = _space("two", np.vstack([q, unit_rows(np.ones(8))]))
    _, _, rel = _scored(two, q)
    assert rel[0] == pytest.approx(relevance(1 / math.sqrt(2)), abs=1e-6)
    assert rel[1] == pytest.approx(1 - rel[0], abs=1e-6)
    # a scope of one id in a larger space has nothing to compare with either
    rng = np.random.default_rng(1)
    big = _space("big", unit_rows(rng.standard_normal((50, 8))))
    assert background_z(big, q, np.array([0.3]), scope=np.array([4])) is None
    assert background_z(big, q, np.array([0.3]), scope=np.array([4, 999])) is None  # 999 is not there
    assert background_z(big, np.zeros(8), np.array([0.3])) is None  # a query that cannot be normalized
    assert background_z(big, np.ones(9), np.array([0.3])) is None   # another space's query


def test_zero_spread_uses_the_floor():
    rng = np.random.default_rng(2)
    v = unit_rows(rng.standard_normal(16))
    same = _space("same", np.tile(v, (20, 1)))
    q = unit_rows(v + 0.5 * unit_rows(rng.standard_normal(16)))
    c = float(v @ q)
    z = background_z(same, q, np.array([c, c + 0.01, c - 0.01]))
    assert np.all(np.isfinite(z)) and abs(z[0]) < 1e-3  # at the background's level: relevance 0.5
    assert z[1] == pytest.approx(0.01 / SPREAD_FLOOR, rel=1e-3) and relevance(float(z[1])) > 0.9999
    assert relevance(float(z[2])) < 1e-4


def test_scope_is_the_background():
    """A scoped query (cameras, as_of) is calibrated against its scope only: the same as a space
    that holds nothing else."""
    rng = np.random.default_rng(3)
    q, vecs = _clip_like(rng)
    full = _space("full", vecs)
    scope = np.arange(0, 200)  # the relevant three and 197 background vectors
    sub = _space("sub", vecs[:200])
    sims = np.array([0.25, 0.05, 0.0])
    assert np.allclose(background_z(full, q, sims, scope=scope), background_z(sub, q, sims), atol=1e-4)
    # an id the index does not hold (SQLite ahead of it by a transaction) is left out
    lagging = np.append(scope, 10_000)
    assert np.allclose(background_z(full, q, sims, scope=lagging), background_z(sub, q, sims), atol=1e-4)
    # the whole space's background differs (3 relevant vectors in 600 instead of 200)
    assert not np.allclose(background_z(full, q, sims), background_z(sub, q, sims), atol=1e-3)


def test_the_sample_is_cached_and_redrawn_as_the_space_grows():
    rng = np.random.default_rng(4)
    sp = _space("grow", unit_rows(rng.standard_normal((1000, 32))))
    s1 = whole_space_sample(sp)
    assert s1.shape == (BACKGROUND_SAMPLE, 32)
    assert whole_space_sample(sp) is s1  # cached
    sp.add(np.arange(1000, 1050), unit_rows(rng.standard_normal((50, 32))))
    assert whole_space_sample(sp) is s1  # 5% larger: still representative
    sp.add(np.arange(1050, 1200), unit_rows(rng.standard_normal((150, 32))))
    s2 = whole_space_sample(sp)
    assert s2 is not s1 and s2.shape == (BACKGROUND_SAMPLE, 32)  # 20% larger: redrawn
    # a space smaller than the sample is its own background: any change is seen at once
    small = _space("small", unit_rows(rng.standard_normal((10, 32))))
    assert whole_space_sample(small).shape == (10, 32)
    small.add(np.array([10]), unit_rows(rng.standard_normal((1, 32))))
    assert whole_space_sample(small).shape == (11, 32)
    small.remove(np.arange(10))
    assert whole_space_sample(small) is None  # one vector left


# -- through the engine and the agentic loop ---------------------------------------------------
@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    e = documented_demo(tmp_path_factory.mktemp("calib"))
    yield e
    e.close()


def test_search_sets_relevance_in_every_space(eng):
    frame = eng.moments("cam")[3].frame_path
    for res in (eng.search(text="a red car parks in the driveway", top_k=10),
                eng.search(image=frame, top_k=20)):
        assert res.evidence and all(e.relevance is not None and 0.0 <= e.relevance <= 1.0 for e in res.evidence)
    car = eng.search(text="a red car parks in the driveway", top_k=10).evidence
    assert "red car" in car[0].text and car[0].relevance == max(e.relevance for e in car)
    own = eng.search(image=frame, top_k=20, sources={"frame"}).evidence
    assert own[0].frame_paths == (frame,) and own[0].relevance > 0.9  # an image finds its own frame


def _agent_search(view, q, threshold):
    plan = [{"action": "search", "queries": [{"q": q, "top_k": 10, "threshold": threshold}], "sources": ["event"]},
            {"action": "answer", "response": "x", "best_ref": {"turn_idx": 1, "result_idx": 0}}]
    llm = scripted_llm({"router*": {"type": "tool", "name": "retrieve", "args": {"question": q}}, "planner*": plan})
    return AgenticAnswerer(llm, max_turns=3).answer(q, view)


def test_agentic_search_cuts_on_relevance_not_on_the_raw_cosine(eng):
    view = MemoryView(eng.store, eng.vectors, eng.embedder, eng.text_embedder(), eng.forest)
    q = "a red car parks in the driveway"
    hits = view.search(q, top_k=10, sources=("event",))
    assert len(hits) >= 3
    rels = sorted({h.relevance for h in hits})
    # a threshold between two relevances where a raw cosine cut would keep a different set
    thr = next((t for t in ((a + b) / 2 for a, b in itertools.pairwise(rels))
                if {id(h) for h in hits if h.relevance >= t} != {id(h) for h in hits if h.similarity >= t}), None)
    assert thr is not None, [(h.similarity, h.relevance) for h in hits]
    ans = _agent_search(view, q, thr)
    kept = {(e.t_start, e.t_end) for e in ans.evidence}
    assert kept == {(h.t_start, h.t_end) for h in hits if h.relevance >= thr}
    assert {(h.t_start, h.t_end) for h in hits if h.relevance < thr} - kept  # something was dropped
    # the default threshold keeps the matching document and drops the typical ones
    ans = _agent_search(view, q, 0.65)
    assert [e.text[:9] for e in ans.evidence] == ["a red car"]
