"""Hugging Face hub ids as model folders: ``zoo import Qwen/Qwen3-0.6B``, ``zoo generate Qwen/Qwen3-0.6B``, ...

A name that is not a path on disk and reads ``owner/name`` is looked up through ``huggingface_hub``: the local
cache first (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``), then a download unless
``HF_HUB_OFFLINE`` is set. The folder read is the cached snapshot, files linked into the cache's blobs as the hub
keeps them. ``huggingface_hub`` comes with transformers (``pip install 'zoo[hf]'``); zoo only imports it here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import ZooError

HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
"""``owner/name`` as the hub spells repository ids."""
TRUE = {"1", "ON", "YES", "TRUE"}


class HubError(ZooError):
    """A hub id that cannot be read: not cached and offline, no such repository, or no huggingface_hub."""


def is_hub_id(given: str | Path) -> bool:
    """Whether ``given`` reads as a hub id, and is neither a path on disk (a local folder always wins) nor a recipe
    file's name."""
    text = str(given)
    recipe_file = text.endswith((".yaml", ".yml", ".json"))
    return HUB_ID.fullmatch(text) is not None and not recipe_file and not os.path.lexists(text)


def offline() -> bool:
    """``HF_HUB_OFFLINE`` as the environment says it now."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in TRUE


def cache_dir() -> str | None:
    """The hub cache the environment names now (``HF_HUB_CACHE``, else ``HF_HOME/hub``); None: the default."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None


def hub_folder(repo_id: str) -> Path:
    """The local snapshot of the hub model ``repo_id``: the cached one, else downloaded (unless offline).

    Raises:
        HubError: not cached while offline (with how to get it), no such repository, no huggingface_hub.
    """
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise HubError(
            f"{repo_id}: no such folder; reading it as a Hugging Face hub id needs huggingface_hub "
            "(pip install 'zoo[hf]')"
        ) from None
    try:
        return Path(snapshot_download(repo_id, cache_dir=cache_dir(), local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 - the hub client reports a damaged cache in its own ways
        raise HubError(f"{repo_id}: the Hugging Face cache holds it damaged ({type(exc).__name__}: {exc})") from None
    if offline():
        raise HubError(
            f"{repo_id} is not a folder, and not in the Hugging Face cache while HF_HUB_OFFLINE is set: download it "
            f"where the hub is reachable (hf download {repo_id}), or unset HF_HUB_OFFLINE"
        )
    try:
        return Path(snapshot_download(repo_id, cache_dir=cache_dir()))
    except Exception as exc:  # noqa: BLE001 - network, authentication, no such repository
        raise HubError(
            f"{repo_id} is not a folder, and the Hugging Face hub did not give it ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no reason given'})"
        ) from None


def resolve(given: str | Path) -> Path:
    """``given`` as a local path: itself, or the cached snapshot of a hub id that is not a path on disk."""
    return hub_folder(str(given)) if is_hub_id(given) else Path(given)
