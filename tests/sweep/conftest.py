"""Shared fixtures of the sweep tests: one local Dask cluster of 2 workers per session, on
free ports (:func:`mesadyn.sweep.local_cluster`), so that test processes run side by side."""

from __future__ import annotations

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
    from mesadyn.sweep import local_cluster

    cluster = local_cluster(2)
    cl = distributed.Client(cluster)
    yield cl
    cl.close()
    cluster.close()
