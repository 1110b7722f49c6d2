"""The built site in a real browser: Debian's chromium, headless, driven by
selenium through Debian's chromedriver (``make browser`` installs both;
nothing is downloaded), over HTTP from a server on 127.0.0.1.

The index, the API page of ``TensorMap``, an example's page and the
benchmark page render with no error in the browser's console and their
images load; the search box finds ``TensorMap``'s page. With
``BLOCKMAP_SCREENSHOTS=FOLDER`` set, each page's screenshot is saved
there (for a look by hand)."""

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

# the docs tier (left out unless asked for: a run without it skips nothing)
pytestmark = pytest.mark.docs

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

SCREENSHOTS = os.environ.get("BLOCKMAP_SCREENSHOTS")
TIMEOUT = 60  # seconds to wait for a page or the search (a loaded machine)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    """The site's address, served from ``site`` on a free port of 127.0.0.1."""
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "the browser test needs Debian's chromium and chromium-driver "
            "(`make browser`, or `apt-get install chromium chromium-driver`)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(TIMEOUT)
    yield driver
    driver.quit()


def _errors(driver):
    """The console's errors since the last call (failed loads included)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _open(driver, url, name):
    driver.get(url)
    WebDriverWait(driver, TIMEOUT).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))


def _broken_images(driver):
    return driver.execute_script(
        "return Array.from(document.images)"
        ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
    )


PAGES = {
    "index": ("index.html", "blockmap", ".bd-article, article"),
    "tensormap": ("api/blockmap.TensorMap.html", "blockmap.TensorMap", "dt#blockmap\\.TensorMap"),
    "example": ("gallery/pool.html", "Maps across a multiprocessing Pool", "div.highlight"),
    "benchmarks": ("benchmarks.html", "Benchmarks", "img"),
}


@pytest.mark.parametrize("name", PAGES)
def test_the_page_renders_without_console_errors(browser, server, name):
    path, heading, selector = PAGES[name]
    _errors(browser)  # what earlier pages left
    _open(browser, f"{server}/{path}", name)
    title = browser.find_element(By.TAG_NAME, "h1").text.replace("¶", "").strip()
    assert title == heading
    assert browser.find_elements(By.CSS_SELECTOR, selector)
    assert _broken_images(browser) == []
    assert _errors(browser) == []


def test_the_tensormap_page_lists_its_methods(browser, server):
    _open(browser, f"{server}/api/blockmap.TensorMap.html", "tensormap-methods")
    ids = browser.execute_script(
        "return Array.from(document.querySelectorAll('dt[id]'), d => d.id)"
    )
    for method in ("block", "keys", "save", "share_memory", "to"):
        assert f"blockmap.TensorMap.{method}" in ids


def test_the_example_page_shows_the_output(browser, server):
    _open(browser, f"{server}/gallery/pool.html", "example-output")
    blocks = browser.find_elements(By.CSS_SELECTOR, "div.highlight pre")
    assert len(blocks) >= 2  # the code, then what it printed
    assert "shared memory" in blocks[-1].text


def test_search_finds_the_tensormap_page(browser, server):
    _open(browser, f"{server}/index.html", "search-box")
    box = browser.find_element(By.CSS_SELECTOR, "input[name='q']")
    box.send_keys("TensorMap", Keys.ENTER)
    WebDriverWait(browser, TIMEOUT).until(expected_conditions.url_contains("search.html"))
    results = WebDriverWait(browser, TIMEOUT).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a")
    )
    if SCREENSHOTS:
        browser.save_screenshot(str(Path(SCREENSHOTS) / "search.png"))
    targets = [result.get_attribute("href") for result in results]
    assert any("api/blockmap.TensorMap.html" in target for target in targets), targets
    assert _errors(browser) == []
