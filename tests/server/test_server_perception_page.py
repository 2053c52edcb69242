"""The web page over what perception found, in a real headless Chromium: the entities card lists
each camera's entities with their crops; opening one shows its frames with its box and label
drawn over the picture; a text search for a sign's words opens on the frame with the sign's box
(cited, drawn highlighted). Screenshots in the test's tmp_path (``perception_*.png``)."""
import pytest

from support import perception_store as ps
from support.browser import chrome, until
from support.server import ServerThread
from vam_engine.engine import Engine
from vam_engine.server import ServeOptions, TokenStore, create_app

pytestmark = [pytest.mark.usefixtures("watchdog"), pytest.mark.browser]
WATCHDOG_S = 240


def boxes(d):
    """(label, kind classes, width px) of the boxes drawn over the viewer's frame."""
    return d.execute_script(
        "return [...document.querySelectorAll('#viewer-boxes .box')].map(b => [b.dataset.label, b.className, "
        "b.getBoundingClientRect().width])")


def test_the_page_draws_boxes_and_lists_entities(perception_store, tmp_path):
    from selenium.webdriver.common.by import By

    token = TokenStore(tmp_path / "tokens").create("read")[1]
    d = chrome(console_log=True)
    try:
        with Engine(perception_store["store"]) as eng, \
                ServerThread(create_app(eng, ServeOptions(tokens_dir=str(tmp_path / "tokens")))) as srv:
            d.get(f"{srv.url}/#token={token}")
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, "#entity-list li.entity"), "the entity list")
            heads = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#entity-list li.cam-head")]
            assert [h.split(" ·")[0] for h in heads] == ["gate", "yard"]  # per camera
            cat = d.find_element(By.CSS_SELECTOR, "#entity-list li.entity")
            assert "cat" in cat.text
            cat.click()
            until(d, lambda: d.find_element(By.ID, "viewer").is_displayed(), "the entity's viewer")
            until(d, lambda: any(b[0] == "cat" for b in boxes(d)), "the cat's box over its frame")
            drawn = [b for b in boxes(d) if b[0] == "cat"]
            assert all("object" in b[1] and b[2] > 20 for b in drawn) and any("cited" in b[1] for b in drawn)
            d.save_screenshot(str(tmp_path / "perception_entity.png"))

            d.find_element(By.ID, "search-text").send_keys(ps.SIGN)
            d.find_element(By.CSS_SELECTOR, "#search-form button").click()
            until(d, lambda: d.find_elements(By.CSS_SELECTOR, "#search-results .thumb"), "search results")
            d.find_element(By.CSS_SELECTOR, "#search-results .thumb").click()
            until(d, lambda: any(b[0] == ps.SIGN for b in boxes(d)), "the sign's box")
            sign = [b for b in boxes(d) if b[0] == ps.SIGN]
            assert all("text" in b[1] for b in sign) and any("cited" in b[1] for b in sign)
            d.save_screenshot(str(tmp_path / "perception_search.png"))
            errors = [m for m in d.get_log("browser") if m["level"] == "SEVERE"]
            assert not errors, errors
    finally:
        d.quit()
