"""The page's ask box in a real headless Chromium against a real server: it offers the cameras
in view, sends the ones ticked as the question's scope (the model sees only those cameras), asks
of every camera when "all cameras" is ticked, and says what the answer looked at (the budget's
account in the answer's trace)."""
import pytest

from support.browser import until
from support.scripted import texts
from support.server import ServerThread, build_engine
from vam_engine.server import ServeOptions, TokenStore, create_app

pytestmark = [pytest.mark.usefixtures("watchdog"), pytest.mark.browser]
WATCHDOG_S = 300


def _coarse_cameras(eng) -> set[str]:
    """The cameras whose present the last coarse request showed."""
    (last,) = [r for r in eng.llm.sent if r.tag == "two_phase_coarse"][-1:]
    return {cam for cam in ("front", "yard") if any(t.startswith(f"Camera {cam}, recent buffer") for t in texts(last))}


def test_the_ask_box_sends_its_scope_and_says_what_it_looked_at(tmp_path, browser):
    from selenium.webdriver.common.by import By

    eng = build_engine(tmp_path / "store", n=24)
    token = TokenStore(tmp_path / "store").create("read")[1]
    try:
        with ServerThread(create_app(eng, ServeOptions(status_poll_s=0.5))) as srv:
            d = browser
            d.get(f"{srv.url}/#token={token}")
            until(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#ask-cameras input")) == 2, "the cameras offered")
            chips = {c.text: c for c in d.find_elements(By.CSS_SELECTOR, "#ask-cameras label")}
            assert set(chips) == {"front", "yard"} and d.find_element(By.ID, "ask-all").is_selected()

            def ask(question):
                before = len([r for r in eng.llm.sent if r.tag == "two_phase_coarse"])
                box = d.find_element(By.ID, "ask-text")
                box.clear()
                box.send_keys(question)
                d.find_element(By.CSS_SELECTOR, "#ask-form button").click()
                until(d, lambda: d.find_element(By.ID, "ask-looked").text, "what the answer looked at")
                assert len([r for r in eng.llm.sent if r.tag == "two_phase_coarse"]) == before + 1
                return d.find_element(By.ID, "ask-looked").text

            # one camera ticked: the question is asked of it alone
            chips["yard"].click()
            assert not d.find_element(By.ID, "ask-all").is_selected()
            looked = ask("what is on the yard camera?")
            assert _coarse_cameras(eng) == {"yard"}
            assert looked.startswith("asked of yard · looked at yard (") and "front" not in looked
            assert "coarse" in looked and "budget 16 img" in looked

            # "all cameras" clears the choice: both are asked of and shown
            d.find_element(By.ID, "ask-all").click()
            assert not any(i.is_selected() for i in d.find_elements(By.CSS_SELECTOR, "#ask-cameras input"))
            looked = ask("what is on the cameras?")
            assert _coarse_cameras(eng) == {"front", "yard"}
            assert looked.startswith("asked of all cameras · looked at ") and "front (" in looked and "yard (" in looked
            logs = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
            assert not logs, logs
    finally:
        eng.close()
