"""The disk cache of exact moment tensors heals itself (issue 12, defects 9 and deliver 7).

A file with the right checksum but wrong shapes is rebuilt (it gave a traceback); a FIFO at the
cache path is refused without blocking (it blocked forever); the directory is created 0700 (it
took the umask); files of another user are refused; stale temporary files are removed.
"""

from __future__ import annotations

import os
import stat
import threading

import numpy as np
import pytest
import torch

from mesadyn.field import ExactField, _cache
from mesadyn.model import gaussian_init
from mesadyn.process import gaussian

FAM, T = gaussian(2, 0.9), 6


def _reference(tmp_path):
    field = ExactField(FAM, T, cache_dir=tmp_path / "ref")
    theta = gaussian_init(2, 0.5, 1)
    return field, theta, field.loss_and_grad(theta)[1]


def _rebuilt(directory, theta, ref, expect: str) -> None:
    field = ExactField(FAM, T, cache_dir=directory)
    assert field.cache_status.startswith("built") and expect in field.cache_status, \
        field.cache_status
    assert torch.equal(field.loss_and_grad(theta)[1], ref)
    assert ExactField(FAM, T, cache_dir=directory).cache_status == "hit"


def test_right_checksum_wrong_shapes_is_rebuilt(tmp_path):
    ref_field, theta, ref = _reference(tmp_path)
    directory = tmp_path / "cache"
    path = ExactField(FAM, T, cache_dir=directory).cache_path
    key = _cache.key_of(FAM.describe(), T)
    good = ref_field.tensors()
    bad_cases = {
        "C has shape": {**good, "C": good["C"].reshape(2, 8, 8)},
        "C has shape ": {**good, "C": good["C"][:, :3]},
        "expected (": {**good, "g_val": good["g_val"][:-1]},
        "indices outside": {**good, "g_q": good["g_q"] + 100},
        "non-finite": {**good, "g_val": np.full_like(good["g_val"], np.nan)},
        "missing array": {k: v for k, v in good.items() if k != "g_a2"},
    }
    for expect, arrays in bad_cases.items():
        _cache.save(path, key, arrays)  # a consistent checksum over the wrong arrays
        assert _cache.load(path, key)[0] is None
        _rebuilt(directory, theta, ref, expect.strip())


def test_fifo_at_the_cache_path_is_refused_without_blocking(tmp_path):
    _, theta, ref = _reference(tmp_path)
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    path = _cache.path_for(_cache.key_of(FAM.describe(), T), directory)
    os.mkfifo(path)
    result: list[object] = []

    def build() -> None:
        result.append(ExactField(FAM, T, cache_dir=directory))

    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    worker.join(timeout=60)
    if worker.is_alive():  # the old code blocked here forever; unblock the reader and fail
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("reading a FIFO at the cache path blocked")
    field = result[0]
    assert isinstance(field, ExactField)
    assert "refused: a FIFO" in field.cache_status
    assert torch.equal(field.loss_and_grad(theta)[1], ref)
    assert stat.S_ISREG(os.lstat(path).st_mode)  # the rebuilt file replaced the FIFO


def test_symlink_and_directory_are_refused(tmp_path):
    key = _cache.key_of(FAM.describe(), T)
    directory = tmp_path / "c"
    field = ExactField(FAM, T, cache_dir=directory)
    path = field.cache_path
    target = tmp_path / "elsewhere.npz"
    os.replace(path, target)
    os.symlink(target, path)
    arrays, why = _cache.load(path, key)
    assert arrays is None and "symlink" in why
    path.unlink()
    path.mkdir()
    arrays, why = _cache.load(path, key)
    assert arrays is None and "directory" in why


def test_cache_directory_is_private(tmp_path, monkeypatch):
    old = os.umask(0o022)
    try:
        directory = tmp_path / "deep" / "cache"
        field = ExactField(FAM, T, cache_dir=directory)
    finally:
        os.umask(old)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(field.cache_path.stat().st_mode) == 0o600


def test_foreign_owner_is_refused(tmp_path, monkeypatch):
    directory = tmp_path / "c"
    field = ExactField(FAM, T, cache_dir=directory)
    key = _cache.key_of(FAM.describe(), T)
    assert _cache.load(field.cache_path, key)[1] == "hit"
    monkeypatch.setattr(_cache.os, "getuid", lambda: os.stat(field.cache_path).st_uid + 1)
    arrays, why = _cache.load(field.cache_path, key)
    assert arrays is None and "another user" in why


def test_stale_temporary_files_are_removed(tmp_path):
    directory = tmp_path / "c"
    directory.mkdir()
    stale = directory / ".exact-abc.npz.somehost-1.x1y2z3.tmp"
    stale.write_bytes(b"half a file")
    old = 1_000_000_000
    os.utime(stale, (old, old))
    ExactField(FAM, T, cache_dir=directory)
    assert not stale.exists()
