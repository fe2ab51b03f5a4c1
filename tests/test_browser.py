"""The report as a reader sees it: index.html and report.html opened in a real headless Chromium.

Checks that every image loads (complete, naturalWidth > 0), every link resolves to a file of the report,
and the claims table is on the landing page. Chromium is driven over the DevTools protocol with tornado's
websocket client (installed with Jupyter). When `chromium` is missing the set-up installs Debian's package
(apt-get, as root); the test is skipped, with the reason, only where that is impossible.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_report import write_experiment
from tools import ensure_debian_tool

from pdelra.data.summary import summarise
from pdelra.reporting.banner import TOY_HEADLINE
from pdelra.steps.aggregate import aggregate
from pdelra.steps.report import build_report

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[1] / "workflow" / "notebooks" / "report.ipynb"
INSPECT = """JSON.stringify({
  images: Array.from(document.images).map(
    i => ({src: i.currentSrc.slice(0, 120), ok: i.complete && i.naturalWidth > 0})),
  links: Array.from(document.links).map(a => a.href),
  claims: !!document.querySelector('table#claims, table.claims'),
  claimRows: document.querySelectorAll('table#claims tbody tr, table.claims tbody tr').length,
  noAlt: Array.from(document.images).filter(i => !(i.getAttribute('alt') || '').trim()).length,
  text: document.body.innerText,
  title: document.title
})"""


def ensure_chromium() -> str:
    return shutil.which("chromium") or shutil.which("chromium-browser") or ensure_debian_tool("chromium")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _inspect(ws_url: str, page_url: str) -> dict[str, Any]:
    from tornado.websocket import websocket_connect

    conn = await websocket_connect(ws_url, max_message_size=64 * 2**20)
    ids = itertools.count(1)

    async def call(method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(ids)
        await conn.write_message(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            reply = json.loads(await asyncio.wait_for(conn.read_message(), 60))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    await call("Page.enable")
    await call("Page.navigate", url=page_url)
    for _ in range(300):  # until the page and all its images finished loading
        state = await call("Runtime.evaluate", expression="document.readyState", returnByValue=True)
        if state["result"].get("value") == "complete":
            break
        await asyncio.sleep(0.1)
    result = await call("Runtime.evaluate", expression=INSPECT, returnByValue=True)
    conn.close()
    return json.loads(result["result"]["value"])


def open_in_chromium(chromium: str, page: Path, profile: Path) -> dict[str, Any]:
    port = _free_port()
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        targets: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    targets = [t for t in json.load(r) if t.get("type") == "page"]
                if targets:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert targets, "chromium did not open a page for the DevTools protocol within 60 s"
        return asyncio.run(_inspect(targets[0]["webSocketDebuggerUrl"], page.resolve().as_uri()))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    aggregate(write_experiment(root / "runs", range(2)), root / "tables")
    _write_data_description(root)
    build_report(root / "tables", root / "report", NOTEBOOK, experiment="browser")
    return root / "report"


def _write_data_description(root: Path) -> None:
    """tables/data.csv as `pdelra data-summary` writes it: generated ListOps at toy size."""
    manifest = root / "processed" / "listops" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"max_length": 120, "counts": {"train": 1000, "val": 100, "test": 100}}))
    spec = {"manifest": str(manifest), "source": "generated", "origin": "pdelra generate listops {}",
            "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "batch_size": 32}}  # fmt: skip
    summarise({"listops": spec}).to_csv(root / "tables" / "data.csv", index=False)


def _assert_reads_as_a_finished_report(seen: dict[str, Any]) -> None:
    """The data banner first, direction and size beside each other, no temporary path, alt text on
    every image."""
    text = seen["text"]
    assert TOY_HEADLINE in text
    assert text.index(TOY_HEADLINE) < text.index("reproduced"), "the banner comes before any verdict"
    assert "size" in text.lower() and ("smaller than claimed" in text or "as claimed" in text or "—" in text)
    assert ".tmp" not in text and ".report." not in text, "a temporary folder name is shown"
    assert seen["noAlt"] == 0, f"{seen['noAlt']} image(s) without alt text"


@pytest.fixture(scope="module")
def chromium() -> str:
    return ensure_chromium()


def _assert_links_resolve(links: list[str], report: Path) -> None:
    for href in links:
        url = urllib.parse.urlparse(href)
        if url.scheme in ("http", "https", "mailto"):
            continue  # nothing external is linked today; a reader's browser would fetch these
        assert url.scheme == "file", href
        target = Path(urllib.parse.unquote(url.path))
        assert target.is_file(), f"broken link {href}"
        assert report.resolve() in target.resolve().parents, f"{href} points outside the report folder"


def test_index_page_images_load_links_resolve_claims_shown(
    report: Path, chromium: str, tmp_path: Path
) -> None:
    seen = open_in_chromium(chromium, report / "index.html", tmp_path / "profile")
    assert seen["claims"] and seen["claimRows"] >= 10, "the claims table must be on the landing page"
    assert len(seen["images"]) >= 8
    broken = [i["src"] for i in seen["images"] if not i["ok"]]
    assert not broken, f"images that did not load: {broken}"
    assert any(h.endswith("/report.html") for h in seen["links"])
    _assert_links_resolve(seen["links"], report)
    _assert_reads_as_a_finished_report(seen)


def test_full_report_images_load_and_claims_come_first(report: Path, chromium: str, tmp_path: Path) -> None:
    seen = open_in_chromium(chromium, report / "report.html", tmp_path / "profile")
    assert seen["claims"], "the report's first section is the claims table"
    assert len(seen["images"]) >= 8
    assert all(i["ok"] for i in seen["images"]), [i["src"] for i in seen["images"] if not i["ok"]]
    _assert_reads_as_a_finished_report(seen)
    _assert_links_resolve(
        [h for h in seen["links"] if not h.startswith(f"{(report / 'report.html').as_uri()}#")], report
    )


def test_the_checks_see_a_broken_image_and_a_broken_link(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "site" / "index.html"
    page.parent.mkdir()
    page.write_text('<html><body><img src="missing.png"><a href="gone.csv">x</a></body></html>')
    seen = open_in_chromium(chromium, page, tmp_path / "profile")
    assert [i["ok"] for i in seen["images"]] == [False] and not seen["claims"]
    with pytest.raises(AssertionError, match="broken link"):
        _assert_links_resolve(seen["links"], page.parent)
