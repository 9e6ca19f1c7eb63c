"""The one check before zoo reads a file of a folder it was given: a regular file inside that folder.

No torch here: the recipe layer reads a model folder's recipe.yaml through it too.
"""

from __future__ import annotations

import stat
from pathlib import Path

from .errors import CheckpointError, ZooError

__all__ = ["folder_file"]

_KINDS = {stat.S_IFIFO: "named pipe", stat.S_IFCHR: "character device", stat.S_IFBLK: "block device",
          stat.S_IFSOCK: "socket", stat.S_IFDIR: "folder"}  # fmt: skip


def _confines(folder: Path) -> Path:
    """The folder a file of ``folder`` may resolve into: the folder itself, or for a snapshot of the Hugging Face
    hub's cache (``models--org--name/snapshots/REV``) the cached repository, whose files are links into its
    ``blobs``."""
    root = folder.resolve()
    return root.parent.parent if root.parent.name == "snapshots" else root


def folder_file(folder: str | Path, name: str | Path, *, error: type[ZooError] = CheckpointError) -> Path:
    """``folder / name``, checked before it is read: a regular file (no pipe, device or socket) whose real path
    is inside ``folder`` (a symlink may point within the folder, never out of it: a folder given to zoo is all
    that zoo reads).

    Raises:
        ``error``: the file is missing, a link out of the folder or a loop, or not a regular file.
    """
    folder, path = Path(folder), Path(folder) / name
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise error(f"{path} does not exist (or is a link to nothing, or a loop of links)") from None
    root = _confines(folder)
    if real != root and root not in real.parents:
        raise error(
            f"{path} is a link to {real}, outside {folder}: zoo reads only the files inside a folder it is given; "
            "put a copy of the file there instead of a link"
        )
    mode = real.stat().st_mode
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "special file")
        raise error(f"{path} is a {kind}, not a regular file: zoo reads files only")
    return path
