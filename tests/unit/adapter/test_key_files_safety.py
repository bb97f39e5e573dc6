"""``feedha keys new`` never writes through a symlink and always leaves the secret file 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from feedha import keys as keys_command


def test_a_dangling_symlink_is_refused_without_force_and_replaced_not_followed_with_it(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere" / "stolen.key"
    link = tmp_path / "adapter.key"
    link.symlink_to(target)  # dangling: the target does not exist
    assert keys_command.main(["new", str(link)]) == 2  # it exists (as a link): not replaced without --force
    assert keys_command.main(["new", str(link), "--force"]) == 0
    assert not target.exists() and not link.is_symlink()  # the link was replaced, never followed
    assert stat.S_IMODE(link.stat().st_mode) == 0o600


def test_force_replaces_a_loose_key_with_a_private_one(tmp_path: Path) -> None:
    path = tmp_path / "sync.key"
    path.write_text("old")
    os.chmod(path, 0o644)
    old_umask = os.umask(0)
    try:
        assert keys_command.main(["new", str(path), "--force"]) == 0
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "sync.key.pub").stat().st_mode) == 0o644
    assert "secret-key" in path.read_text() and not list(tmp_path.glob(".*tmp"))
