"""What was said, on the web page (a real headless Chromium against a real server with a token):
each camera's timeline shows its transcript segments at their times, and the search box finds a
spoken phrase: the hit shows its words, and opening it jumps to its time with its text in the
viewer. Screenshots in the test's temporary directory (``page_speech_*.png``)."""
import os
import shutil

import pytest

from support.browser import until
from support.server import ServerThread, build_engine
from vam_engine.audio import TranscriptSegment
from vam_engine.memory.transcripts import TranscriptWriter
from vam_engine.server import ServeOptions, TokenStore, create_app

pytestmark = [pytest.mark.usefixtures("watchdog"), pytest.mark.browser]
WATCHDOG_S = 300
PLANTS = "Please remember to water the plants in the kitchen tomorrow morning."
TRUCK = "The delivery truck arrived at the loading dock at noon."


def test_the_page_shows_and_finds_what_was_said(tmp_path, browser):
    from selenium.webdriver.common.by import By

    eng = build_engine(tmp_path / "store", n=36)
    TranscriptWriter(eng.store.transcripts, eng.text_embedder())(
        [TranscriptSegment("front", 3.0, 6.5, PLANTS, "en", 0.9), TranscriptSegment("yard", 10.0, 13.0, TRUCK, "en", 0.8)])
    token = TokenStore(tmp_path / "store").create("read")[1]

    def shot(name):
        path = tmp_path / f"page_speech_{name}.png"
        browser.save_screenshot(str(path))
        if os.environ.get("VAM_SCREENSHOTS"):
            shutil.copy(path, os.path.join(os.environ["VAM_SCREENSHOTS"], path.name))
        return path

    try:
        with ServerThread(create_app(eng, ServeOptions(status_poll_s=0.5))) as srv:
            d = browser
            d.get(f"{srv.url}/#token={token}")
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, ".track[data-camera=yard] .sp"), "speech on the timeline")
            (front,) = d.find_elements(By.CSS_SELECTOR, ".track[data-camera=front] .sp")
            assert PLANTS in front.get_attribute("title")
            (yard,) = d.find_elements(By.CSS_SELECTOR, ".track[data-camera=yard] .sp")
            assert TRUCK in yard.get_attribute("title")
            # placed at its time: the yard's segment (10-13 s) lies right of the front's (3-6.5 s)
            assert yard.location["x"] > front.location["x"] + front.size["width"]
            shots = [shot("timeline")]

            d.find_element(By.ID, "search-text").send_keys('"loading dock"')
            d.find_element(By.CSS_SELECTOR, "#search-form button").click()
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, "#search-results .thumb.said"), "a speech hit")
            hit = d.find_elements(By.CSS_SELECTOR, "#search-results .thumb")[0]
            assert "said" in hit.get_attribute("class") and TRUCK in hit.find_element(By.CSS_SELECTOR, ".quote").text
            assert hit.find_element(By.CSS_SELECTOR, ".cap").text.startswith("yard")
            hit.click()  # opens its text and jumps to its time
            until(d, lambda: d.find_element(By.ID, "viewer").is_displayed(), "viewer")
            assert TRUCK in d.find_element(By.ID, "viewer-text").text
            assert "(speech)" in d.find_element(By.ID, "viewer-title").text
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, ".track[data-camera=yard] .cursor"), "the time marker")
            shots.append(shot("search"))
            d.find_element(By.CSS_SELECTOR, ".track[data-camera=front] .sp").click()  # a segment on the timeline
            until(d, lambda: PLANTS in d.find_element(By.ID, "viewer-text").text, "the segment's text")
            severe = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
            assert severe == [], severe
    finally:
        eng.close()
    assert all(p.stat().st_size > 10_000 for p in shots)
