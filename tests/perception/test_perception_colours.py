"""Dominant colour names of a thing in its box, with the background around it discounted."""
import numpy as np
import pytest

from vam_engine.perception import PALETTE, colour_names
from vam_engine.perception.appearance import AppearanceEncoder, colour_histogram, crop
from vam_engine.synthetic.perception import coloured_shape, perception_photo

CASES = [  # (thing, background, expected name)
    ((200, 30, 30), (110, 110, 105), "red"),
    ((30, 60, 200), "texture", "blue"),
    ((240, 220, 30), (60, 90, 200), "yellow"),
    ((245, 245, 245), (30, 30, 30), "white"),
    ((20, 20, 20), (240, 240, 240), "black"),
    ((30, 160, 40), (110, 110, 105), "green"),
    ((250, 140, 20), (110, 110, 105), "orange"),
    ((120, 60, 20), (200, 200, 200), "brown"),
    ((140, 40, 170), (110, 110, 105), "purple"),
    ((250, 150, 200), (60, 60, 60), "pink"),
    ((128, 128, 128), (128, 128, 128), "gray"),      # the thing has the background's colour
    ((245, 245, 245), (230, 232, 228), "white"),
]


@pytest.mark.parametrize("shape", ["box", "ellipse"])
@pytest.mark.parametrize("thing,background,name", CASES)
def test_single_colour_things(rng, thing, background, name, shape):
    frame, box = coloured_shape(rng, thing, background=background, shape=shape)
    assert colour_names(crop(frame, box)) == (name,)


def test_two_tone_things_name_both_colours(rng):
    frame, box = coloured_shape(rng, (200, 30, 30), background=(110, 110, 105), second=(245, 245, 245))
    assert set(colour_names(crop(frame, box))) == {"red", "white"}
    frame, box = coloured_shape(rng, (30, 60, 200), background="texture", second=(250, 220, 30), shape="ellipse")
    assert set(colour_names(crop(frame, box))) == {"blue", "yellow"}


def test_a_loose_box_on_a_large_background_still_names_the_thing(rng):
    frame, (x0, y0, x1, y1) = coloured_shape(rng, (30, 60, 200), background=(40, 150, 40))
    grown = (x0 - 20, y0 - 15, x1 + 20, y1 + 15)  # 25% more background around it
    assert colour_names(crop(frame, grown)) == ("blue",)


def test_photographs_and_histograms():
    assert colour_names(perception_photo("astronaut")) == ("white",)  # the space suit
    assert "orange" in colour_names(perception_photo("chelsea"))     # a ginger tabby
    assert set(colour_names(perception_photo("chelsea"))) <= set(PALETTE)
    h = colour_histogram(perception_photo("chelsea"))
    assert h.shape == (AppearanceEncoder().dim - AppearanceEncoder().embedder.dim,)
    assert h.sum() == pytest.approx(1.0, abs=1e-5) and (h >= 0).all()


def test_appearance_vectors_are_unit_and_tell_colours_apart(rng):
    enc = AppearanceEncoder()
    red1, b1 = coloured_shape(rng, (200, 30, 30))
    red2, b2 = coloured_shape(rng, (205, 35, 25), shape="ellipse")
    blue, b3 = coloured_shape(rng, (30, 60, 200))
    v = enc.encode([crop(red1, b1), crop(red2, b2), crop(blue, b3)])
    assert v.shape == (3, enc.dim) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert enc.encode([]).shape == (0, enc.dim)
    with pytest.raises(ValueError, match="hist_weight"):
        AppearanceEncoder(hist_weight=2)
