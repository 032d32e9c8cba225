"""The search page of `codesearch serve` in a real headless browser (Debian's chromium, driven by Selenium):
type a query, see highlighted results and the tier, follow a filter, use the keys, see why an answer is empty.

Under CI a missing chromium fails the test (.ci/run installs it); elsewhere it skips. With
``$CODESEARCH_SCREENSHOT`` set, the page of results is saved there (the README's picture).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import missing_reference

pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

from test_serve import make_repos

from benchmarks.serve_load import start_server, stop_server

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                  "--window-size=1280,900")


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        missing_reference("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    return chromium, driver  # type: ignore[return-value]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium, driver = _browser_paths()
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_page_load_timeout(60)
    yield session
    session.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("onnxruntime")
    from codesearch import CodeSearch

    repo, other = make_repos(tmp_path_factory.mktemp("page"))
    for root in (repo, other):
        with CodeSearch(root) as cs:
            cs.index()
    process, base = start_server([str(repo), str(other)])
    yield base
    stop_server(process)


def _wait(browser: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))
    return list(browser.find_elements(By.CSS_SELECTOR, css))


def test_type_a_query_see_results_follow_a_filter(browser: Any, site: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(site + "/")
    box = _wait(browser, "#q")[0]
    assert browser.switch_to.active_element == box  # the query box has the focus
    box.send_keys("strip the auth header on redirect", Keys.ENTER)
    hits = _wait(browser, "li.hit")
    locations = [h.get_attribute("data-location") for h in hits]
    assert locations[0].startswith("pkg/sessions.py:")
    assert browser.find_element(By.CSS_SELECTOR, ".tier").text == "full"
    assert browser.find_elements(By.CSS_SELECTOR, "li.hit .hl .linenos")  # highlighted, with line numbers
    assert browser.find_elements(By.CSS_SELECTOR, "li.hit .hl span.k, li.hit .hl span.kn")  # Python keywords coloured
    assert {h.get_attribute("data-kind") for h in hits} >= {"source"}
    screenshot = tmp_path / "serve.png"
    browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 10_000
    if os.environ.get("CODESEARCH_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["CODESEARCH_SCREENSHOT"])

    browser.find_element(By.CSS_SELECTOR, '.facets a[data-kind="test"]').click()
    _wait(browser, '.facets a[aria-current][data-kind="test"]')
    tests = _wait(browser, "li.hit")
    assert tests and {h.get_attribute("data-kind") for h in tests} == {"test"}
    assert browser.find_element(By.ID, "kind").get_attribute("value") == "test"

    # Keys: "/" goes to the query box, j to the first result, Enter to code like it.
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    browser.find_element(By.TAG_NAME, "body").send_keys("/")
    assert browser.switch_to.active_element.get_attribute("id") == "q"
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    browser.find_element(By.TAG_NAME, "body").send_keys("j")
    focused = browser.switch_to.active_element
    assert "hit-link" in focused.get_attribute("class")
    focused.send_keys(Keys.ENTER)
    _wait(browser, "#summary")
    assert "mode=related" in browser.current_url


def test_an_empty_answer_says_why_and_a_repository_filter_narrows(browser: Any, site: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(site + "/?q=session&scope=nowhere/")
    note = _wait(browser, "#note")[0]
    assert "no indexed file under 'nowhere'" in note.text
    assert not browser.find_elements(By.CSS_SELECTOR, "li.hit")

    browser.get(site + "/?q=parse+netrc+credentials")
    assert {h.find_element(By.CSS_SELECTOR, ".repository").text for h in _wait(browser, "li.hit")} == {"repo", "other"}
    Select(browser.find_element(By.ID, "repo")).select_by_visible_text("other")  # a changed filter searches again
    _wait(browser, "#summary")
    hits = _wait(browser, "li.hit")
    assert [h.get_attribute("data-location").split(":")[0] for h in hits] == ["lib/netrc.py"]
    assert "repo=" in browser.current_url

    browser.get(site + "/?q=Session.should_strip_auth&mode=definitions")
    hit = _wait(browser, "li.hit")[0]
    assert hit.get_attribute("data-location").startswith("pkg/sessions.py:")
    assert "defines Session.should_strip_auth" in hit.text
