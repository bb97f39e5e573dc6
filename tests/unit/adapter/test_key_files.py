"""CURVE key files: the owner's alone, or root's and group-readable (a Kubernetes Secret with fsGroup)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from feedha.adapter.errors import ConfigError
from feedha.adapter.zap import load_keys, write_keys


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_key_file_loads(tmp_path: Path, mode: int) -> None:
    written = write_keys(tmp_path / "adapter.key")
    (tmp_path / "adapter.key").chmod(mode)
    assert load_keys(tmp_path / "adapter.key").public == written.public


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o660, 0o620])
def test_a_key_file_others_can_read_or_the_group_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    write_keys(tmp_path / "adapter.key")
    (tmp_path / "adapter.key").chmod(mode)
    with pytest.raises(ConfigError, match=rf"mode {mode:04o}.*chmod 600"):
        load_keys(tmp_path / "adapter.key")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own the file as root and as another user")
def test_group_read_is_allowed_only_on_a_file_root_owns(tmp_path: Path) -> None:
    path = tmp_path / "adapter.key"
    written = write_keys(path)
    path.chmod(0o440)  # what the kubelet makes of a Secret with defaultMode 0400 and an fsGroup
    os.chown(path, 0, 10001)
    assert load_keys(path).public == written.public
    os.chown(path, 10001, 10001)
    with pytest.raises(ConfigError, match="owned by root"):
        load_keys(path)
