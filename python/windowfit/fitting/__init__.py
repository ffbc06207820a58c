"""Fitting: the window of a history that fits a token budget (``fit``), repairing broken tool
pairs (``repair``), and a budgeted plain-text rendering of a history (``render_history``)."""

from __future__ import annotations

from windowfit.fitting.render import render_history
from windowfit.fitting.window import FitResult, FitStats, fit, repair

__all__ = ["FitResult", "FitStats", "fit", "render_history", "repair"]
