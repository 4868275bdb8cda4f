"""Shared fixtures of the sweep tests: one local Dask cluster of 2 workers per module."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def client():
    """A ``distributed.Client`` on a LocalCluster of 2 single-threaded worker processes."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.ERROR)
    cl = distributed.Client(cluster)
    yield cl
    cl.close()
    cluster.close()
