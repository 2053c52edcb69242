"""The web page in a real headless Chromium (selenium; tests/support/browser.py finds it) against
a real server with a token: it loads without console errors, shows the store's timeline with
thumbnails, a search shows thumbnail results, an answer shows citations that open their frames,
and a monitor added from the page raises an alert that appears without a reload. Screenshots
are saved in the test's temporary directory (``page_*.png``)."""
import os
import shutil
import time

import pytest

from support.browser import until
from support.server import WHITE, Door, ServerThread, build_engine, texture
from vam_engine.server import ServeOptions, TokenStore, create_app

pytestmark = [pytest.mark.usefixtures("watchdog"), pytest.mark.browser]
WATCHDOG_S = 300


def loaded_images(d, css):
    """Images under ``css`` whose blob has arrived and decoded."""
    return d.execute_script(
        "return [...document.querySelectorAll(arguments[0])].filter(i => i.src.startsWith('blob:') && "
        "i.complete && i.naturalWidth > 0).length", css)


def test_the_page(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    eng = build_engine(tmp_path / "store", n=48)
    door = Door(eng)  # a third camera, watched later: one frame so far
    door.push(texture(0, "front"))
    eng.flush()
    token = TokenStore(tmp_path / "store").create("write")[1]
    shots = []

    def shot(name):
        path = tmp_path / f"page_{name}.png"
        browser.save_screenshot(str(path))
        shots.append(path)
        if os.environ.get("VAM_SCREENSHOTS"):  # a copy to look at outside pytest's temp dirs
            shutil.copy(path, os.path.join(os.environ["VAM_SCREENSHOTS"], path.name))

    try:
        with ServerThread(create_app(eng, ServeOptions(status_poll_s=0.5))) as srv:
            d = browser
            d.get(f"{srv.url}/#token={token}")  # the fragment never reaches the server
            until(d, lambda: loaded_images(d, ".track .mt img") >= 6, "timeline thumbnails")
            assert "token=" not in d.current_url  # taken from the address bar into local storage
            cams = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".cam .label .name")]
            assert cams == ["door", "front", "yard"]
            assert len(d.find_elements(By.CSS_SELECTOR, ".track .ev")) >= 4  # events as bars
            until(d, lambda: "live" in d.find_element(By.ID, "conn").text, "WebSocket up")
            shot("timeline")

            d.find_element(By.ID, "search-text").send_keys("green textured scene seen by the yard camera")
            d.find_element(By.CSS_SELECTOR, "#search-form button").click()
            until(d, lambda: loaded_images(d, "#search-results .thumb img") >= 3, "search thumbnails")
            first_caption = d.find_element(By.CSS_SELECTOR, "#search-results .thumb .cap").text
            assert first_caption.startswith("yard")
            d.find_element(By.CSS_SELECTOR, "#search-results .thumb").click()  # jumps to its time
            until(d, lambda: d.find_element(By.ID, "viewer").is_displayed(), "viewer")
            until(d, lambda: loaded_images(d, "#viewer-main img") == 1, "the result's frame")
            shot("search")

            # the camera a question names is shown, and cited, first: its citation jumps the view
            # to the door's first seconds, where its alert will be marked
            d.find_element(By.ID, "ask-text").send_keys("what did the door camera see?")
            d.find_element(By.CSS_SELECTOR, "#ask-form button").click()
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, "#ask-answer .cite"), "citations")
            assert d.find_element(By.CSS_SELECTOR, "#ask-answer .text").text == "a red textured scene"
            assert d.find_element(By.CSS_SELECTOR, "#ask-answer .cite").text.startswith("[1] door ")
            d.find_element(By.CSS_SELECTOR, "#ask-answer .cite").click()  # its frames
            until(d, lambda: "[1]" in d.find_element(By.ID, "viewer-title").text, "the citation's viewer")
            until(d, lambda: loaded_images(d, "#viewer-main img") == 1, "the cited frames")
            shot("ask")

            d.find_element(By.ID, "monitor-condition").send_keys("a white flash")
            Select(d.find_element(By.ID, "monitor-camera")).select_by_value("door")
            d.find_element(By.CSS_SELECTOR, "#monitor-form button").click()
            until(d, lambda: "a white flash" in d.find_element(By.ID, "monitor-list").text, "monitor listed")
            mon = eng.monitors()[0]
            assert mon.cameras == ("door",) and mon.mode == "repeat"
            assert not d.find_elements(By.CSS_SELECTOR, "#alert-list li .d")
            # the monitor checks every 2 s of stream time: white frames fire it at its next check
            for _ in range(12):
                door.push(WHITE)
                if eng.alerts():
                    break
            assert eng.alerts(), "the monitor did not fire"
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, "#alert-list li .d"), "the alert, live")
            assert "door" in d.find_element(By.CSS_SELECTOR, "#alert-list li .d b").text
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, ".track[data-camera=door] .al"), "alert marker")
            until(d, lambda: loaded_images(d, "#alert-list .thumb img") >= 1, "the alert's frame")
            d.find_element(By.ID, "viewer-close").click()
            d.execute_script("document.getElementById('alert-list').scrollIntoView()")
            time.sleep(0.5)
            shot("alert")
            d.find_element(By.CSS_SELECTOR, "#alert-list li").click()  # the alert's frames, at its time
            until(d, lambda: d.find_element(By.ID, "viewer-title").text.startswith("alert"), "alert viewer")
            until(d, lambda: loaded_images(d, "#viewer-main img") == 1, "the alert's frame, large")
            shot("alert_open")

            severe = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
            assert severe == [], severe
    finally:
        eng.close()
    assert all(p.stat().st_size > 10_000 for p in shots)
