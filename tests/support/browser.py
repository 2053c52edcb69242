"""The headless Chromium the web page tests drive through selenium: where the browser and its
chromedriver are (PATH first, then the usual install folders), and a driver on them. Tests that
need it carry the ``browser`` marker; tests/conftest.py skips them when ``missing_browser()``
says why not (an error with VAM_TEST_REQUIRE_BROWSER=1)."""
from __future__ import annotations

import importlib.util
import os
import shutil

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
DRIVERS = ("chromedriver",)
USUAL_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/lib/chromium", "/usr/lib/chromium-browser", "/snap/bin",
              "/opt/google/chrome")


def _find(names) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    for folder in USUAL_DIRS:
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def missing_browser() -> str | None:
    """None when selenium, a Chromium and a chromedriver are all here, else what is missing."""
    missing = [what for what, ok in (("selenium (pip install selenium)", importlib.util.find_spec("selenium")),
                                     ("Chromium (apt-get install chromium)", _find(BROWSERS)),
                                     ("chromedriver (apt-get install chromium-driver)", _find(DRIVERS))) if not ok]
    return "needs " + ", ".join(missing) if missing else None


def chrome(*, console_log: bool = False, window: str = "1400,900"):
    """A headless Chrome driver on the Chromium found here; ``console_log`` keeps the page's
    console messages (``driver.get_log("browser")``). The caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    why = missing_browser()
    if why:
        raise RuntimeError(f"no browser for the page tests: {why}")
    opts = webdriver.ChromeOptions()
    opts.binary_location = _find(BROWSERS)
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={window}"):
        opts.add_argument(a)
    if console_log:
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(_find(DRIVERS)), options=opts)


def until(driver, cond, what: str, timeout: float = 30):
    """``cond()`` once it is truthy, polled every 0.2 s; a selenium TimeoutException naming ``what``."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda _: cond(), message=what)
