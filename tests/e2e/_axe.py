"""axe-core for the browser tests: the version pinned in tests/e2e/package.json, installed by npm into
tests/e2e/node_modules (ignored by git) the first time a test needs it. Without npm or the registry
the tests skip, and fail under CI=true (as tests/_browser.py does for chromium)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
AXE_JS = HERE / "node_modules" / "axe-core" / "axe.min.js"
PINNED = json.loads((HERE / "package.json").read_text(encoding="utf-8"))["dependencies"]["axe-core"]
IMPACTS = ("critical", "serious", "moderate", "minor")


def _installed_version() -> str | None:
    meta = AXE_JS.parent / "package.json"
    try:
        return json.loads(meta.read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return None


def _install() -> str | None:
    """Install the pinned axe-core; the reason when it cannot be installed, else None."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed (apt-get install npm), so axe-core cannot be installed"
    lock = HERE / "package-lock.json"
    command = [npm, "ci" if lock.exists() else "install", "--no-audit", "--no-fund", "--ignore-scripts"]
    try:
        done = subprocess.run(command, cwd=HERE, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npm could not install axe-core: {exc}"
    if done.returncode != 0:
        return f"npm could not install axe-core: {(done.stderr or done.stdout).strip()[-300:]}"
    return None


def axe_source() -> str:
    """The text of axe.min.js at the pinned version (installed when missing); skip or fail without it."""
    problem = None
    if _installed_version() != PINNED:
        problem = _install()
        if problem is None and _installed_version() != PINNED:
            problem = f"npm installed axe-core {_installed_version()}, not the pinned {PINNED}"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {problem}", pytrace=False)
        pytest.skip(problem)
    return AXE_JS.read_text(encoding="utf-8")


def run_axe(page, source: str) -> list[dict]:
    """axe's violations on the page as shown: [{id, impact, nodes, targets, help}]."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=source)
    return page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help,
                                       targets: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
    }""")


def table(results: dict[str, list[dict]]) -> str:
    """The violations of several views as a table: rule, impact, count per view."""
    rules = sorted({(v["id"], v["impact"]) for found in results.values() for v in found},
                   key=lambda r: (IMPACTS.index(r[1]) if r[1] in IMPACTS else 9, r[0]))
    views = list(results)
    lines = ["rule | impact | " + " | ".join(views)]
    for rule, impact in rules:
        counts = [str(next((v["nodes"] for v in results[view] if v["id"] == rule), 0)) for view in views]
        lines.append(f"{rule} | {impact} | " + " | ".join(counts))
    if not rules:
        lines.append("(no violations)")
    return "\n".join(lines)
