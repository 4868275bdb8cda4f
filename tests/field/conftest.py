"""Shared by the field tests: ``field_cases.py`` (the token families every exact field is
checked on, and the relative difference they are compared by) is importable from them."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
