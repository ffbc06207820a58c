"""The build a benchmark times: one with debug assertions (``make test`` installs one) is
refused, as its figures are not windowfit's."""

from __future__ import annotations

import os

#: Set to time whatever build is installed.
ANY_BUILD = "WINDOWFIT_BENCH_ANY_BUILD"


def require_release() -> None:
    """Exit with a message if the installed windowfit checks debug assertions."""
    from windowfit import _core

    if _core.DEBUG_ASSERTIONS and not os.environ.get(ANY_BUILD):
        raise SystemExit(
            "windowfit is installed as a build with debug assertions (`make test` installs one);"
            f" run `make release` first, or set {ANY_BUILD}=1 to time it anyway"
        )
