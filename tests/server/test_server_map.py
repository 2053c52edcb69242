"""The page's top-down map in a real headless Chromium: a robot's moments with poses are drawn
where they were taken (one point each, a camera without poses is left out), and a point opens
its frame. A screenshot is saved in the test's temporary directory (``page_map.png``)."""
import os
import shutil

import numpy as np
import pytest

from support.browser import chrome, until
from support.server import ServerThread
from vam_engine.engine import Engine
from vam_engine.server import ServeOptions, TokenStore, create_app
from vam_engine.synthetic.robot import RobotRun

pytestmark = [pytest.mark.usefixtures("watchdog"), pytest.mark.browser]
WATCHDOG_S = 180


def test_the_map_draws_the_robots_moments_and_opens_their_frames(tmp_path):
    from selenium.webdriver.common.by import By

    run = RobotRun(seconds=32.0)
    eng = Engine(tmp_path / "store", {"ingest": {"fps": run.fps}, "writer": {"enabled": False}}, device="cpu")
    for t, frame, pose in run.frames():
        eng.push("rover", frame, t, pose=pose)
    for t in range(4):  # a fixed camera without poses: on the timeline, not on the map
        eng.push("door", np.full((64, 64, 3), 40 * (t + 1), np.uint8), float(t))
    eng.end_push("rover")
    eng.end_push("door")
    posed = eng.moments("rover")
    token = TokenStore(tmp_path / "store").create("read")[1]
    d = chrome(console_log=True)
    try:
        with ServerThread(create_app(eng, ServeOptions())) as srv:
            d.get(f"{srv.url}/#token={token}")
            until(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#map circle.pt")) == len(posed), "the map's points")
            assert d.find_element(By.ID, "map-card").is_displayed()
            # read in one go: the map is redrawn with the timeline every few seconds
            points = d.execute_script("return [...document.querySelectorAll('#map circle.pt')].map(c => "
                                      "[c.dataset.camera, +c.dataset.moment, +c.getAttribute('cx'), "
                                      "+c.getAttribute('cy')])")
            assert {p[0] for p in points} == {"rover"} and "door" not in d.find_element(By.ID, "map-legend").text
            # drawn where they were taken: the loop's corners are the extreme points, y up on screen
            xy = {p[1]: (p[2], p[3]) for p in points}
            by_id = {m.moment_id: m.pose for m in posed}
            assert set(xy) == set(by_id)
            right = max(xy, key=lambda k: xy[k][0])
            top = min(xy, key=lambda k: xy[k][1])
            assert by_id[right].x == max(p.x for p in by_id.values())
            assert by_id[top].y == max(p.y for p in by_id.values())
            d.execute_script("document.querySelector(`#map circle.pt[data-moment='${arguments[0]}']`)"
                             ".dispatchEvent(new MouseEvent('click', {bubbles: true}))", posed[5].moment_id)
            until(d, lambda: d.find_element(By.ID, "viewer").is_displayed(), "the viewer")
            assert d.find_element(By.ID, "viewer-title").text.startswith("rover")
            where = f"seen at ({posed[5].pose.x:.2f}, {posed[5].pose.y:.2f}) in map 'map'"
            assert where in d.find_element(By.ID, "viewer-text").text
            until(d, lambda: d.execute_script("const i = document.getElementById('viewer-img'); return "
                                              "i.src.startsWith('blob:') && i.complete && i.naturalWidth > 0"),
                  "the point's frame")
            path = tmp_path / "page_map.png"
            d.save_screenshot(str(path))
            if os.environ.get("VAM_SCREENSHOTS"):
                shutil.copy(path, os.path.join(os.environ["VAM_SCREENSHOTS"], path.name))
            severe = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
            assert severe == [], severe
    finally:
        d.quit()
        eng.close()
