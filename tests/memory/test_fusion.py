"""The rank rule (memory/fusion.py): lists split over parts fuse exactly as the whole lists do."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vam_engine.memory import RankedList, fuse
from vam_engine.memory.fusion import RRF_K, spread_of


def vector_list(kind, ids, cosines, background):
    order = np.argsort(-np.asarray(cosines), kind="stable")
    return RankedList(kind, tuple(int(ids[i]) for i in order), tuple((-float(cosines[i]),) for i in order),
                      tuple(float(cosines[i]) for i in order), np.asarray(background, np.float64))


def words_list(kind, ids, keys):
    order = sorted(range(len(ids)), key=lambda i: keys[i])
    return RankedList(kind, tuple(int(ids[i]) for i in order), tuple(keys[i] for i in order), by_vector=False)


def split_lists(rng, n_frames, n_words):
    """Whole lists over global ids, and the same hits split between two parts by camera parity."""
    ids = np.arange(n_frames)
    cos = rng.random(n_frames)
    bg = rng.random(40) * 0.5
    w_ids = np.arange(n_words) + 1000
    w_keys = [(int(rng.integers(0, 2)), -float(rng.random()), float(i)) for i in range(n_words)]
    whole = [vector_list("frame", ids, cos, bg), words_list("ocr", w_ids, w_keys)]
    parts = {}
    for p in (0, 1):
        mine = ids % 2 == p
        wm = [i for i in range(n_words) if i % 2 == p]
        parts[f"s{p}"] = [vector_list("frame", ids[mine], cos[mine], bg[p::2]),
                          words_list("ocr", w_ids[wm], [w_keys[i] for i in wm])]
    return whole, parts


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_frames=st.integers(0, 60), n_words=st.integers(0, 30),
       fetch=st.integers(1, 40))
def test_lists_split_over_two_parts_fuse_like_the_whole(seed, n_frames, n_words, fetch):
    rng = np.random.default_rng(seed)
    whole, parts = split_lists(rng, n_frames, n_words)
    want = fuse({"": whole}, fetch, 10)
    got = fuse(parts, fetch, 10)
    assert [(h.kind, h.ref) for h in got] == [(h.kind, h.ref) for h in want]
    for g, w in zip(got, want):
        assert g.part == f"s{g.ref % 2}"
        assert g.score == w.score and g.cosine == w.cosine
        assert (g.z is None) == (w.z is None) and (w.z is None or abs(g.z - w.z) < 1e-9)


def test_scores_cosines_and_z_follow_the_rule():
    bg = np.array([0.1, 0.3, 0.2])
    frames = vector_list("frame", [7, 8], [0.9, 0.5], bg)
    events = vector_list("event", [3], [0.4], bg)
    # speech found by words: its own cosine fills in where no vector list found it; NaN: no vector
    said = RankedList("speech", (5, 6), ((0, -2.0, 0.0), (0, -1.0, 1.0)), (0.7, float("nan")), bg, by_vector=False)
    got = {(h.kind, h.ref): h for h in fuse({"": [frames, events, said]}, 10, 10)}
    mean, spread = spread_of(bg)
    assert got[("frame", 7)].score == 1 / (RRF_K + 1) and got[("frame", 8)].score == 1 / (RRF_K + 2)
    assert got[("frame", 7)].z == (0.9 - mean) / spread and got[("event", 3)].cosine == 0.4
    assert got[("speech", 5)].cosine == 0.7 and got[("speech", 5)].z == (0.7 - mean) / spread
    assert got[("speech", 6)].cosine is None and got[("speech", 6)].z is None
    # a background of one vector has no spread: no z
    lone = fuse({"": [vector_list("frame", [1], [0.5], [0.2])]}, 10, 10)
    assert lone[0].z is None and lone[0].cosine == 0.5
    # the cut: each merged list keeps ``fetch`` hits, the fused list ``keep``
    assert len(fuse({"": [vector_list("frame", range(9), np.linspace(0, 1, 9), bg)]}, 4, 10)) == 4
    assert len(fuse({"": [frames, events]}, 10, 2)) == 2
