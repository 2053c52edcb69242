"""Entities across a cluster's shards (cluster/entities.py) with real detector and OCR weights:
the two generated cameras of the perception store indexed by one engine, and each by an engine
of its own as two shards hold them. The cat walks across both cameras: one engine links it into
one entity, and so do the shards' entities linked by appearance at the router; the merged
thing carries both cameras' times, a crop, and both shards' sightings."""
import pytest

from vam_engine.cluster.entities import entity_candidates, global_timeline, joined_timeline, merged, things_of
from vam_engine.engine import Engine
from vam_engine.memory import Store

pytestmark = pytest.mark.usefixtures("watchdog")
WATCHDOG_S = 600


@pytest.fixture(scope="module")
def stores(perception_store, tmp_path_factory):
    from support.perception_store import perception_config

    root = tmp_path_factory.mktemp("entity-shards")
    for no, cam in enumerate(("gate", "yard")):  # shard 0 holds gate, shard 1 yard
        with Engine(root / f"shard-{no}", perception_config(), device="cpu") as eng:
            (rep,) = eng.index_files([str(perception_store["clips"][cam])], [cam])
            assert not rep.failed
    opened = {"whole": Store(perception_store["store"]), 0: Store(root / "shard-0"), 1: Store(root / "shard-1")}
    yield opened
    for s in opened.values():
        s.close()


def kinds(records):
    return sorted((e.label, tuple(sorted(e.seen))) for e in records)


def test_a_thing_seen_on_two_shards_cameras_is_one_entity(stores):
    whole = stores["whole"].entities.list()
    things = things_of({no: entity_candidates(stores[no]) for no in (0, 1)})
    got = [merged(g) for g in things]
    assert kinds(got) == kinds(whole)  # the same things, seen on the same cameras
    cat = next(e for e in got if e.label == "cat")
    assert set(cat.seen) == {"gate", "yard"} and cat.crop_path is not None
    want = next(e for e in whole if e.label == "cat")
    for cam in ("gate", "yard"):
        assert cat.seen[cam] == pytest.approx(want.seen[cam], abs=1e-6)
    # each shard alone keeps its own cat: the link is the router's
    assert all(sum(e.label == "cat" for e in stores[no].entities.list()) == 1 for no in (0, 1))
    assert [len(g) for g in things if g[0].record.label == "cat"] == [2]


def test_the_things_timeline_joins_its_members_sightings(stores):
    things = things_of({no: entity_candidates(stores[no]) for no in (0, 1)})
    cat = next(g for g in things if g[0].record.label == "cat")
    lines = []
    for e in cat:
        no, local = divmod(e.record.entity_id, 1 << 40)
        lines.append(global_timeline(stores[no].entities.timeline(local), no))
    line = joined_timeline(merged(cat), lines)
    whole = stores["whole"].entities
    want = whole.timeline(next(e.entity_id for e in whole.list() if e.label == "cat"))
    assert [(s.camera_id, s.t) for s in line.sightings] == [(s.camera_id, s.t) for s in want.sightings]
    assert sorted(t.camera_id for t in line.tracks) == sorted(t.camera_id for t in want.tracks)
    ts = [s.t for s in line.sightings]
    assert ts == sorted(ts) and {s.entity_id >> 40 for s in line.sightings} == {0, 1}
    # a camera scope keeps one shard's part: the thing as that camera saw it
    gate_only = things_of({0: entity_candidates(stores[0], cameras=["gate"]), 1: entity_candidates(stores[1],
                                                                                                   cameras=["gate"])})
    assert [set(merged(g).seen) for g in gate_only if g[0].record.label == "cat"] == [{"gate"}]
