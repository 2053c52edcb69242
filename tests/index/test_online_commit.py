"""The online per-camera commit (vam_engine.index.online): dedup, keep-both-ends, events, restarts.

``simulate`` below is an independent, plain frame-by-frame statement of the rules (its own Otsu,
its own loop); the committer's decisions must match it exactly on every sequence.
"""
from __future__ import annotations

import json
import math
from functools import partial

import numpy as np
import pytest

from support.legacy_state import V1_EMBS, V1_STATE
from vam_engine import numerics
from vam_engine.config import CommitConfig
from vam_engine.index import CommitInputError, CommitterState, Decision, OnlineCommitter, otsu_threshold

D = 16


# -- the reference, written plainly -------------------------------------------------------------
def plain_otsu(values, bins=64):
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return None
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / (hi - lo) * bins), bins - 1)] += 1
    centers = [lo + (i + 0.5) * width for i in range(bins)]
    n = len(values)
    scores = []
    for k in range(bins - 1):
        c0 = sum(counts[: k + 1])
        c1 = n - c0
        if c0 == 0 or c1 == 0:
            scores.append(0.0)
            continue
        mu0 = sum(counts[i] * centers[i] for i in range(k + 1)) / c0
        mu1 = sum(counts[i] * centers[i] for i in range(k + 1, bins)) / c1
        scores.append((c0 / n) * (c1 / n) * (mu0 - mu1) ** 2)
    best = max(scores)
    k0 = scores.index(best)
    k1 = k0
    while k1 + 1 < len(scores) and scores[k1 + 1] == best:
        k1 += 1
    return lo + width * (k0 + 1 + k1 + 1) / 2


def simulate(ts, embs, cfg):
    """Returns {index: (kept, reason, event_start)} and the per-frame distance."""
    units = [np.asarray(e, dtype=np.float64) / np.linalg.norm(np.asarray(e, dtype=np.float64)) for e in embs]

    def tau(history, fallback):
        recent = history[-cfg.window:]
        if len(recent) < cfg.min_history:
            return fallback
        v = plain_otsu(recent)
        return fallback if v is None else min(max(v, 0.02), 0.5)

    result, dist = {}, {}
    ref_hist, kept_hist = [], []
    ref = held = start_t = None

    def keep(i, forced=False):
        nonlocal ref, start_t
        if ref is None:
            opens = True
        else:
            d = dist[i]
            opens = forced or (d > tau(kept_hist, 1 - cfg.event_fallback_sim) and (not kept_hist or d >= kept_hist[-1]))
            kept_hist.append(d)
        if opens:
            start_t = ts[i]
        ref = i
        result[i] = (True, None, opens)

    for i in range(len(ts)):
        if ref is None:
            keep(i)
            continue
        td = tau(ref_hist, 1 - cfg.dedup_fallback_sim)
        dist[i] = 1.0 - float(np.dot(units[i], units[ref]))
        too_long = ts[i] - start_t > cfg.max_event_s
        if dist[i] < td and not too_long:
            if held is not None:
                result[held] = (False, "dedup", False)
            held = i
            ref_hist.append(dist[i])
            continue
        if held is not None:
            keep(held)
            held = None
            dist[i] = 1.0 - float(np.dot(units[i], units[ref]))
            too_long = ts[i] - start_t > cfg.max_event_s
            if dist[i] < td and not too_long:
                held = i
                ref_hist.append(dist[i])
                continue
        ref_hist.append(dist[i])
        keep(i, forced=too_long)
    if held is not None:
        keep(held)
    return result, dist


# -- sequences ----------------------------------------------------------------------------------
unit = partial(numerics.unit, what="a test embedding")  # float32, as embedders give them


def orthonormal(rng, k):
    q, _ = np.linalg.qr(rng.standard_normal((D, D)))
    return [q[:, i] for i in range(k)]


def noisy(rng, center, sigma):
    return unit(center + sigma * rng.standard_normal(D)).astype(np.float32)


def static_runs(rng, lengths, sigma=1e-3, dt=2.0):
    protos = orthonormal(rng, len(lengths)) if len(lengths) <= D else [unit(rng.standard_normal(D)) for _ in lengths]
    embs, runs = [], []
    for j, n in enumerate(lengths):
        runs.append(list(range(len(embs), len(embs) + n)))
        embs += [noisy(rng, protos[j], sigma) for _ in range(n)]
    return [dt * (i + 1) for i in range(len(embs))], embs, runs


def mixed(rng, n, dt_range=(0.5, 3.0)):
    """Static runs with tiny noise, cuts, slow drifts and one-frame bursts, with random time steps."""
    embs = []
    cur = unit(rng.standard_normal(D))
    while len(embs) < n:
        kind = rng.integers(4)
        if kind == 0:  # static run
            embs += [noisy(rng, cur, 0.01) for _ in range(rng.integers(1, 12))]
        elif kind == 1:  # cut
            cur = unit(rng.standard_normal(D))
            embs.append(noisy(rng, cur, 0.01))
        elif kind == 2:  # slow drift towards another scene
            target = unit(rng.standard_normal(D))
            steps = int(rng.integers(5, 30))
            for s in range(1, steps + 1):
                embs.append(noisy(rng, unit((1 - s / steps) * cur + (s / steps) * target), 0.005))
            cur = target
        else:  # burst: one or two frames of something else, then back
            other = unit(rng.standard_normal(D))
            embs += [noisy(rng, other, 0.01) for _ in range(rng.integers(1, 3))]
            embs.append(noisy(rng, cur, 0.01))
    embs = embs[:n]
    ts = np.cumsum(rng.uniform(*dt_range, size=n)).tolist()
    return ts, embs


def run(cfg, ts, embs, keys=None):
    c = OnlineCommitter(cfg)
    out = []
    for i, (t, e) in enumerate(zip(ts, embs)):
        out += c.push(t, e, i if keys is None else keys[i])
        assert len(out) == i + 1 - int(c.pending)  # at most the newest frame is undecided
    out += c.finish()
    return out


def check_against_reference(cfg, ts, embs):
    decisions = run(cfg, ts, embs)
    assert [d.key for d in decisions] == list(range(len(ts))), "one decision per frame, in order"
    expected, dist = simulate(ts, embs, cfg)
    for d in decisions:
        assert d.t == ts[d.key]
        assert (d.kept, d.reason, d.event_start) == expected[d.key], f"frame {d.key} at t={d.t}"
        if d.key == 0:
            assert d.distance is None
        else:
            assert d.distance == pytest.approx(dist[d.key], abs=1e-12)
    return decisions


SMALL = CommitConfig(min_history=8, window=24, max_event_s=40.0)


# -- tests --------------------------------------------------------------------------------------
def test_otsu_basics():
    assert otsu_threshold([0.3] * 10) is None
    assert otsu_threshold([0.3]) is None
    tau = otsu_threshold([0.01, 0.012, 0.011, 0.009, 0.4, 0.41, 0.39])
    assert 0.012 < tau < 0.39
    rng = np.random.default_rng(0)
    vals = np.r_[rng.uniform(0, 0.05, 80), rng.uniform(0.3, 0.4, 20)].tolist()
    assert otsu_threshold(vals) == pytest.approx(plain_otsu(vals), abs=1e-12)


def test_static_runs_keep_both_ends_and_cuts_open_events():
    rng = np.random.default_rng(1)
    ts, embs, runs = static_runs(rng, [5, 2, 7, 3, 2, 9])
    decisions = check_against_reference(CommitConfig(), ts, embs)
    by_key = {d.key: d for d in decisions}
    for run_ in runs:
        first, last = run_[0], run_[-1]
        assert by_key[first].kept and by_key[first].event_start  # the cut opens an event
        assert by_key[last].kept and not by_key[last].event_start  # the run's end is kept too
        for i in run_[1:-1]:
            assert not by_key[i].kept and by_key[i].reason == "dedup" and not by_key[i].event_start
    assert sum(d.kept for d in decisions) == 2 * len(runs)


def test_single_redundant_frame_and_run_end_becomes_reference():
    rng = np.random.default_rng(2)
    a, b = orthonormal(rng, 2)
    embs = [noisy(rng, a, 1e-3), noisy(rng, a, 1e-3), noisy(rng, b, 1e-3), noisy(rng, b, 1e-3)]
    c = OnlineCommitter(CommitConfig())
    out = c.push(1.0, embs[0], "a0")
    assert [(d.key, d.kept, d.event_start) for d in out] == [("a0", True, True)]
    assert c.push(2.0, embs[1], "a1") == [] and c.pending  # held: one frame of lookahead
    out = c.push(3.0, embs[2], "b0")
    assert [(d.key, d.kept) for d in out] == [("a1", True), ("b0", True)]
    # b0 was compared with a1 (the new reference), not with a0
    assert out[1].distance == pytest.approx(1 - float(np.dot(unit(embs[2].astype(float)), unit(embs[1].astype(float)))))
    assert c.push(4.0, embs[3], "b1") == []
    out = c.finish()
    assert [(d.key, d.kept, d.reason) for d in out] == [("b1", True, None)]
    assert c.finish() == []


def test_slow_drift_moves_the_reference_in_steps():
    rng = np.random.default_rng(3)
    a, b = orthonormal(rng, 2)
    n = 200
    embs = [unit(math.cos(0.5 * math.pi * s / n) * a + math.sin(0.5 * math.pi * s / n) * b).astype(np.float32)
            for s in range(n)]
    ts = [float(i) for i in range(n)]
    decisions = check_against_reference(CommitConfig(), ts, embs)
    kept = [d for d in decisions if d.kept]
    # a 90 degree drift (distance 1) in steps just under 0.12: about 1 / 0.12 reference moves, each kept
    assert 8 <= len(kept) <= 12
    assert all(d.distance < 0.12 for d in kept[1:])
    assert [d.event_start for d in kept] == [True] + [False] * (len(kept) - 1)  # no cut, one event
    for d in decisions:
        if not d.kept:
            assert d.reason == "dedup" and d.distance < 0.12


@pytest.mark.parametrize("seed", range(6))
def test_matches_reference_on_mixed_sequences(seed):
    rng = np.random.default_rng(100 + seed)
    ts, embs = mixed(rng, 300)
    for cfg in (CommitConfig(), SMALL, CommitConfig(min_history=4, window=8, max_event_s=10.0)):
        decisions = check_against_reference(cfg, ts, embs)
        assert decisions[0].kept and decisions[0].event_start


def test_batching_does_not_change_decisions():
    rng = np.random.default_rng(4)
    ts, embs = mixed(rng, 250)
    frames = [(t, e, i) for i, (t, e) in enumerate(zip(ts, embs))]
    whole = run(SMALL, ts, embs)
    for chunk_sizes in ([1], [2], [3, 7], [64], [250], [5, 1, 16, 4]):
        c = OnlineCommitter(SMALL)
        out, pos, j = [], 0, 0
        while pos < len(frames):
            size = chunk_sizes[j % len(chunk_sizes)]
            out += c.push_many(frames[pos:pos + size])
            pos += size
            j += 1
        out += c.finish()
        assert out == whole


def test_adaptive_thresholds_kick_in_after_min_history():
    rng = np.random.default_rng(5)
    common = unit(rng.standard_normal(D))
    scenes = orthonormal(rng, D)
    embs = []
    for j in range(60):  # bimodal: in-scene distances about 0.05..0.3 (median 0.13), cuts 0.35..0.95
        center = unit(0.7 * common + scenes[j % D])
        embs += [noisy(rng, center, 0.1) for _ in range(5)]
    ts = [float(i) for i in range(len(embs))]
    cfg = CommitConfig()
    fallback = (1 - cfg.dedup_fallback_sim, 1 - cfg.event_fallback_sim)
    c = OnlineCommitter(cfg)
    decisions = []
    for i, (t, e) in enumerate(zip(ts, embs)):
        decisions += c.push(t, e, i)
        st = c.state()
        tau_d, tau_e = c.thresholds()
        if len(st.dedup_history) < cfg.min_history:
            assert tau_d == fallback[0]
        else:
            assert tau_d != fallback[0] and 0.02 <= tau_d <= 0.5
        if len(st.event_history) < cfg.min_history:
            assert tau_e == fallback[1]
        else:
            assert tau_e != fallback[1] and 0.02 <= tau_e <= 0.5
    decisions += c.finish()
    tau_d, tau_e = c.thresholds()
    assert 0.2 < tau_d < 0.45  # between the in-scene and the cross-scene distances
    assert len(c.state().event_history) >= cfg.min_history
    # under the fallback (0.12) in-scene noise counts as new content: nearly everything is kept early;
    # with the adaptive threshold the middle of each scene is dropped
    early = [d for d in decisions if d.key < cfg.min_history]
    late = [d for d in decisions if d.key >= 100]
    assert sum(d.kept for d in early) / len(early) > 0.7
    assert sum(d.kept for d in late) / len(late) < 0.6
    check_against_reference(cfg, ts, embs)


def test_events_never_exceed_max_event_s():
    rng = np.random.default_rng(6)
    cfg = CommitConfig(max_event_s=20.0, min_history=8, window=32)
    # a long static scene: only max_event_s splits it
    n = 200
    static = [noisy(rng, unit(np.ones(D)), 1e-3) for _ in range(n)]
    sequences = [([0.5 * (i + 1) for i in range(n)], static)] + [mixed(rng, 300, (0.2, 6.0)) for _ in range(3)]
    for ts, embs in sequences:
        decisions = check_against_reference(cfg, ts, embs)
        starts, last = [], None
        for d in decisions:
            if d.kept:
                if d.event_start:
                    starts.append(d.t)
                assert d.t - starts[-1] <= cfg.max_event_s
                last = d.t
        assert last - starts[-1] <= cfg.max_event_s
    ts, _ = sequences[0]
    static_decisions = run(cfg, ts, static)
    n_events = sum(d.event_start for d in static_decisions)
    assert n_events >= (ts[-1] - ts[0]) / cfg.max_event_s  # static 100 s -> at least 5 events
    assert sum(d.kept for d in static_decisions) <= 2 * n_events + 1


@pytest.mark.parametrize("cfg", [SMALL, CommitConfig(min_history=4, window=8, max_event_s=15.0)])
def test_restart_from_json_state_is_identical(cfg):
    rng = np.random.default_rng(7)
    ts, embs = mixed(rng, 140)
    keys = [f"cam0/{i}" for i in range(len(ts))]
    whole = run(cfg, ts, embs, keys)
    for cut in range(len(ts) + 1):
        a = OnlineCommitter(cfg)
        out = []
        for i in range(cut):
            out += a.push(ts[i], embs[i], keys[i])
        state = CommitterState.from_json(json.loads(json.dumps(a.state().to_json())))
        b = OnlineCommitter(cfg, state=state)
        assert b.thresholds() == a.thresholds()
        for i in range(cut, len(ts)):
            out += b.push(ts[i], embs[i], keys[i])
        out += b.finish()
        assert out == whole, f"restart after frame {cut}"


def test_state_needs_json_keys():
    c = OnlineCommitter(CommitConfig())
    e = unit(np.ones(D)).astype(np.float32)
    c.push(0.0, e, object())  # kept at once: its key is not stored
    json.dumps(c.state().to_json())
    c.push(1.0, e, object())  # held
    with pytest.raises(ValueError, match="JSON"):
        c.state()


def test_bad_input_names_t_and_leaves_state_unchanged():
    rng = np.random.default_rng(8)
    ts, embs, _ = static_runs(rng, [4, 3])
    good = run(CommitConfig(), ts, embs)
    c = OnlineCommitter(CommitConfig())
    out = []
    for i in range(3):
        out += c.push(ts[i], embs[i], i)
    before = json.dumps(c.state().to_json())
    nan = embs[3].copy()
    nan[2] = np.nan
    inf = embs[3].copy()
    inf[0] = np.inf
    cases = [
        (ts[3], nan, "NaN"),
        (ts[3], inf, "inf"),
        (ts[3], np.ones(D + 1, np.float32), "dimension"),
        (ts[3], np.ones((2, D), np.float32), "1-D"),
        (ts[3], np.zeros(D, np.float32), "zero"),
        (ts[2], embs[3], "increase"),  # equal t
        (ts[1], embs[3], "increase"),  # going back
        (float("nan"), embs[3], "finite"),
        ("soon", embs[3], "finite time"),
    ]
    for t, e, problem in cases:
        with pytest.raises(ValueError, match=problem) as err:
            c.push(t, e, 3)
        assert isinstance(err.value, CommitInputError)
        assert f"t={t}" in str(err.value) or f"t={t!r}" in str(err.value)
        assert json.dumps(c.state().to_json()) == before
    for i in range(3, len(ts)):  # the committer goes on as if the bad frames never came
        out += c.push(ts[i], embs[i], i)
    out += c.finish()
    assert out == good


def test_decision_fields():
    d = run(CommitConfig(), [1.0], [unit(np.ones(D)).astype(np.float32)])
    assert d == [Decision(t=1.0, key=0, kept=True, reason=None, event_start=True, distance=None)]


def test_a_version_1_state_resumes_as_if_never_stopped():
    from vam_engine.index.semantic import FrameKey, read_state
    from vam_engine.memory.records import GateRecord

    state = read_state(json.loads(V1_STATE))
    assert state.held.key == FrameKey(3, 1.0, None, 1000, 64, 48, GateRecord(120.5, 30.25, 0.5, None, None))
    assert state.held.t == 1.0 and state.last_t == 1.0 and len(state.dedup_history) == 2
    later = [[0.5, 0.8, 0.3, 0.1], [0.49, 0.81, 0.3, 0.1], [0.0, 0.1, 0.9, 0.4]]
    whole = OnlineCommitter(CommitConfig())
    for i, e in enumerate(V1_EMBS):
        whole.push(i * 0.5, np.array(e, float), ("key", i))
    resumed = OnlineCommitter(CommitConfig(), state)
    for k, e in enumerate(later):
        t = 1.5 + 0.5 * k
        a, b = whole.push(t, np.array(e, float), k), resumed.push(t, np.array(e, float), k)
        assert [(d.t, d.kept, d.reason, d.event_start, d.distance) for d in a] == \
               [(d.t, d.kept, d.reason, d.event_start, d.distance) for d in b]
    # what it writes back uses the full names, and reads back to the same state
    data = resumed.state().to_json()
    assert data["version"] == 2 and "dedup_history" in data and "dedup_hist" not in data
    again = read_state(json.loads(json.dumps(data)))
    assert again.to_json() == data


def test_a_bad_state_is_a_clear_error():
    from vam_engine.errors import VamError

    for bad, problem in ((dict(json.loads(V1_STATE), version=7), "version 7"),
                         ({"version": 2}, "KeyError"),
                         (dict(json.loads(V1_STATE), dim=5), "dim")):
        with pytest.raises(VamError, match=problem):
            OnlineCommitter(CommitConfig(), CommitterState.from_json(bad))


def test_keep_overrides_dedup_and_ends_the_held_run():
    """A frame the image gates kept for a local change is kept even when its embedding is a
    near duplicate; the frame held before it (the end of a run) is kept first."""
    same = np.array([1.0, 0.0, 0.0, 0.0])
    plain = OnlineCommitter(CommitConfig())
    forced = OnlineCommitter(CommitConfig())
    for c in (plain, forced):
        c.push(0.0, same, "k0")
        assert c.push(0.5, same, "k1") == []  # redundant: held
    assert plain.push(1.0, same, "k2")[0].reason == "dedup"  # k1 dropped, k2 held
    got = forced.push(1.0, same, "k2", keep=True)
    assert [(d.key, d.kept) for d in got] == [("k1", True), ("k2", True)] and not forced.pending
    assert forced.push(1.5, same, "k3") == [] and forced.pending  # the next near duplicate is held again
