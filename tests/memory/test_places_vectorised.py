"""The vectorised place test (``in_polygon_many``, ``Place.contains_many``) against its scalar
reference on fresh random inputs: convex, concave and self-crossing polygons, points on corners'
heights and on edges, circles and boxes combined; the corner bound names its limit."""
import numpy as np
import pytest

from vam_engine.errors import VamError
from vam_engine.memory import MAX_CORNERS, make_place
from vam_engine.memory.places import in_polygon, in_polygon_many


def _polygon(rng, n):
    """A star-shaped polygon of ``n`` corners (concave), or ``n`` random corners (self-crossing)."""
    if rng.random() < 0.5:
        ang = np.sort(rng.uniform(0, 2 * np.pi, n))
        r = rng.uniform(0.3, 5.0, n)
        pts = np.stack([r * np.cos(ang), r * np.sin(ang)], 1) + rng.uniform(-3, 3, 2)
    else:
        pts = rng.uniform(-5, 5, (n, 2))
    if rng.random() < 0.3:
        pts = np.round(pts)  # integer corners: many points share their heights
    return [tuple(map(float, p)) for p in pts]


@pytest.mark.parametrize("seed", range(8))
def test_in_polygon_many_matches_the_reference(seed):
    rng = np.random.default_rng(seed + int(np.random.default_rng().integers(1 << 30)))
    for _ in range(20):
        corners = _polygon(rng, int(rng.integers(3, 40)))
        xs, ys = rng.uniform(-7, 7, 400), rng.uniform(-7, 7, 400)
        k = 100  # a quarter on the corners' own coordinates: the edge cases of the crossing rule
        pick = rng.integers(0, len(corners), k)
        xs[:k] = [corners[i][0] for i in pick]
        ys[:k] = [corners[i][1] for i in pick[::-1]]
        want = np.array([in_polygon(corners, x, y) for x, y in zip(xs, ys)])
        assert (in_polygon_many(corners, xs, ys) == want).all()


def test_contains_many_matches_contains_with_every_condition():
    rng = np.random.default_rng()
    for _ in range(30):
        corners = _polygon(rng, int(rng.integers(3, 20)))
        c = rng.uniform(-3, 3, 2)
        place = make_place(near=tuple(c), radius=float(rng.uniform(0.5, 6)), region=corners)
        box = make_place(region=(-2.0, -1.0, float(rng.uniform(0, 4)), 3.0))
        xs, ys = rng.uniform(-7, 7, 300), rng.uniform(-7, 7, 300)
        for p in (place, box):
            assert (p.contains_many(xs, ys) == np.array([p.contains(x, y) for x, y in zip(xs, ys)])).all()


def test_a_polygon_has_at_most_max_corners():
    ring = [(np.cos(a), np.sin(a)) for a in np.linspace(0, 2 * np.pi, MAX_CORNERS, endpoint=False)]
    assert make_place(region=ring).polygon is not None
    with pytest.raises(VamError, match=f"3..{MAX_CORNERS} corners, got {MAX_CORNERS + 1}"):
        make_place(region=ring + [(0.0, 0.0)])
