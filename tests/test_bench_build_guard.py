"""The benchmarks refuse to time a build with debug assertions (``make test`` installs one),
unless asked to: a figure from such a build is not windowfit's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from windowfit import _core

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted((ROOT / "benches" / "reports").glob("report_*.py"))

pytestmark = pytest.mark.skipif(
    not _core.DEBUG_ASSERTIONS, reason="an optimized build is installed: nothing to refuse"
)


@pytest.mark.parametrize("script", REPORTS, ids=lambda p: p.stem)
def test_each_report_refuses_a_build_with_debug_assertions(script: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WINDOWFIT_BENCH_ANY_BUILD"}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode != 0
    assert "make release" in out.stderr, out.stderr[-2000:]


def test_the_refusal_can_be_waived(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benches" / "reports"))
    from _build import ANY_BUILD, require_release

    monkeypatch.delenv(ANY_BUILD, raising=False)
    with pytest.raises(SystemExit, match="debug assertions"):
        require_release()
    monkeypatch.setenv(ANY_BUILD, "1")
    require_release()  # returns


def test_a_field_worker_does_not_check_the_build(tmp_path: Path) -> None:
    # A worker that checked the build imported windowfit before timing its load, so the
    # "load + first" cells left windowfit's import out; the parent checks, once.
    from _corpus import tiktoken_cl100k

    texts = ["hello world", "a second text"]
    expected = [len(tiktoken_cl100k().encode_ordinary(t)) for t in texts]
    data = tmp_path / "corpus.json"
    data.write_text(json.dumps({"passes": [texts] * 5, "expected": [expected, expected]}))
    env = {k: v for k, v in os.environ.items() if k != "WINDOWFIT_BENCH_ANY_BUILD"}
    script = ROOT / "benches" / "reports" / "report_field.py"
    args = ["single", "windowfit", "cl100k_base", str(data), str(tmp_path), "0"]
    out = subprocess.run(
        [sys.executable, str(script), "--worker", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["exact"] is True
