"""RapidOCR with its bundled PP-OCR models reads rendered text exactly, with boxes."""
import numpy as np
import pytest

from vam_engine.synthetic.perception import backdrop, draw_sign


def test_reads_a_sign_and_a_counter_exactly(ocr_reader, rng):
    frame = backdrop(rng, 720, 1280)
    frame, sign = draw_sign(frame, "GATE 4721", 380, 300, 48)
    frame, counter = draw_sign(frame, "0042", 1000, 80, 24, fg=(40, 230, 90), bg=(20, 20, 20))
    lines = ocr_reader.read([frame])[0]
    texts = {ln.text: ln for ln in lines}
    assert set(texts) == {"GATE 4721", "0042"}, lines
    for text, plate in (("GATE 4721", sign), ("0042", counter)):
        ln = texts[text]
        assert ln.confidence > 0.9
        x0, y0, x1, y1 = ln.box
        # the line's box lies on its plate (the text detector's boxes reach a little past the ink:
        # up to a tenth of the plate and 2 px, on some backdrops, VAM_TEST_SEED=2458557736)
        mx, my = 0.1 * (plate[2] - plate[0]) + 2, 0.25 * (plate[3] - plate[1]) + 2
        assert plate[0] - mx <= x0 < x1 <= plate[2] + mx and plate[1] - my <= y0 < y1 <= plate[3] + my
        assert (x1 - x0) > 0.5 * (plate[2] - plate[0])
        assert len(ln.polygon) == 4
    assert [ln.text for ln in lines] == ["0042", "GATE 4721"]  # top to bottom


def test_no_text_reads_nothing_and_batches_keep_order(ocr_reader, rng):
    blank = backdrop(rng, 360, 640)
    sign, _ = draw_sign(blank, "K 482 AB", 200, 150, 36, fg=(250, 250, 0), bg=(30, 30, 160))
    out = ocr_reader.read(np.stack([blank, sign, blank]))
    assert out[0] == [] and out[2] == []
    assert [ln.text for ln in out[1]] == ["K 482 AB"]


def test_bad_input_and_settings(ocr_reader):
    from vam_engine.perception import RapidOcrReader

    with pytest.raises(ValueError, match="one frame"):
        ocr_reader.read(np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        ocr_reader.read([np.zeros((32, 32, 3), np.float64)])
    with pytest.raises(ValueError, match="min_confidence"):
        RapidOcrReader(min_confidence=2)
    with pytest.raises(ValueError, match="max_side"):
        RapidOcrReader(max_side=8)
