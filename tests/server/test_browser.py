"""End to end in headless Chromium (Debian's chromium and chromium-driver; nothing is downloaded): ingest the
sample folder from the page, ask the README's question, see the answer highlighted in its sentence and in
its document."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spanqa.runtime import Runtime
from spanqa.server.app import create_app
from spanqa.settings import Settings

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "docs"
README_QUESTION = "What is the atomic number of oxygen?"

pytestmark = pytest.mark.skipif(
    not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
    reason="needs Debian's chromium and chromium-driver (scripts/test.sh installs them)",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    import uvicorn

    docs = tmp_path / "samples"
    shutil.copytree(SAMPLES, docs)
    port = _free_port()
    with Runtime(settings.replace(serve_roots=str(docs), min_score=0.0)) as runtime:
        config = uvicorn.Config(create_app(runtime), host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.time() + 60
        while not server.started:
            assert thread.is_alive() and time.time() < deadline, "the server did not start"
            time.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}/", docs
        finally:
            server.should_exit = True
            thread.join(timeout=10)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_ingest_ask_and_see_the_answer_in_its_document(server: tuple[str, Path], browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    url, docs = server
    wait = WebDriverWait(browser, 60)
    browser.get(url + "#documents")
    browser.find_element(By.ID, "ingest-path").send_keys(str(docs))
    browser.find_element(By.CSS_SELECTOR, "#ingest-form button").click()
    wait.until(ready.text_to_be_present_in_element((By.ID, "ingest-label"), "Done: 5 files, 0 failed"))
    rows = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#documents tbody tr td:first-child a"))
    assert {row.text for row in rows} == {p.name for p in SAMPLES.iterdir()}

    browser.get(url)
    browser.find_element(By.ID, "question").send_keys(README_QUESTION)
    browser.find_element(By.CSS_SELECTOR, "#ask-form button").click()
    answer = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, "#answers .answer")))
    text = answer.find_element(By.CSS_SELECTOR, ".answer-text").text
    marked = answer.find_element(By.CSS_SELECTOR, ".context mark")
    assert text and marked.text == text  # the answer, highlighted in its sentence
    assert "%" in answer.find_element(By.CSS_SELECTOR, ".score").text

    answer.find_element(By.CSS_SELECTOR, "a.open-document").click()
    highlight = wait.until(ready.visibility_of_element_located((By.ID, "highlight")))
    assert highlight.text == text  # the same span, highlighted in the document and scrolled to
    assert browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight;",
        highlight,
    )


def test_a_question_in_the_address_is_asked_and_the_address_follows_questions(
    server: tuple[str, Path], browser: Any
) -> None:
    from urllib.parse import quote

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    url, docs = server
    wait = WebDriverWait(browser, 60)
    browser.get(url + "#documents")  # the served roots are set: the page offers to ingest
    assert browser.find_element(By.ID, "ingest-form").is_displayed()
    assert not browser.find_element(By.ID, "ingest-off").is_displayed()
    browser.find_element(By.ID, "ingest-path").send_keys(str(docs))
    browser.find_element(By.CSS_SELECTOR, "#ingest-form button").click()
    wait.until(ready.text_to_be_present_in_element((By.ID, "ingest-label"), "Done: 5 files"))

    browser.get(url + "?q=" + quote(README_QUESTION))  # a shared link: asked on load
    wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, "#answers .answer")))
    assert browser.find_element(By.ID, "question").get_attribute("value") == README_QUESTION
    question = browser.find_element(By.ID, "question")
    question.clear()
    question.send_keys("Who won Super Bowl 50?")
    browser.find_element(By.CSS_SELECTOR, "#ask-form button").click()
    wait.until(lambda d: "Super%20Bowl%2050" in d.current_url)
    browser.back()  # the previous question comes back with its address
    wait.until(lambda d: d.find_element(By.ID, "question").get_attribute("value") == README_QUESTION)


def test_without_served_roots_the_page_says_how_to_ingest(settings: Settings, browser: Any) -> None:
    from fastapi.testclient import TestClient
    from selenium.webdriver.common.by import By

    with Runtime(settings) as runtime:
        page = TestClient(create_app(runtime), base_url="http://127.0.0.1").get("/").text
    assert "ingestEnabled: false" in page
    target = Path(settings.data_dir).parent / "page.html"
    # The page's own script, against a copy of the page served from a file (no API is needed to render it).
    static = Path(__file__).resolve().parents[2] / "spanqa" / "server" / "static"
    target.write_text(page.replace("/static/", static.as_uri() + "/"))
    browser.get(target.as_uri() + "#documents")
    assert browser.find_element(By.ID, "ingest-off").is_displayed()
    assert "SPANQA_SERVE_ROOTS" in browser.find_element(By.ID, "ingest-off").text
    assert not browser.find_element(By.ID, "ingest-form").is_displayed()
