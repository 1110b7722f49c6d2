"""The metatrain versions blockmap.metatrain was written for and is tested
with. What it uses of metatrain beyond its command line is metatrain's
internals (the functions the patches replace, its readers and
``expand_dataset_config``, ``_compute_single_neighbor_list``,
``DiskDataset.get_target_info`` called on another dataset), not an API
metatrain keeps: each use first checks the version installed
(:func:`require_tested`), and another version is refused with an
``ImportError`` naming the range, instead of being used blindly."""

from __future__ import annotations

from .. import _optional

__all__ = ["SUPPORTED", "check_version", "require_tested"]

#: the metatrain versions blockmap.metatrain was written for and is tested
#: with (pyproject.toml's `metatrain` extra requires the same)
SUPPORTED = ">=2026.4,<2026.5"
#: SUPPORTED as the (major, minor) of the first version in and out of it
_FIRST, _PAST = (2026, 4), (2026, 5)


def check_version(version: str) -> None:
    """Refuse a metatrain ``version`` outside :data:`SUPPORTED`
    (``ImportError``, naming the range and how to install a version in
    it)."""
    parts = version.split(".")
    try:
        found = (int(parts[0]), int(parts[1]))
    except (ValueError, IndexError):
        found = None
    if found is None or not _FIRST <= found < _PAST:
        raise ImportError(
            f"blockmap.metatrain uses metatrain {SUPPORTED} (what it replaces and calls "
            f"are metatrain's internals, tested with these versions), and metatrain "
            f"{version} is installed: nothing was patched or used; install a metatrain "
            f"in that range: {_optional.install_hint(f'metatrain{SUPPORTED}', 'metatrain')}",
            name="metatrain",
        )


def require_tested() -> None:
    """Refuse the metatrain installed unless it is one of :data:`SUPPORTED`
    (:func:`check_version`); ``ModuleNotFoundError`` when there is none."""
    if _optional.find_spec("metatrain") is None:
        raise _optional.missing(
            "blockmap.metatrain needs metatrain, which is not installed",
            "metatrain",
            f"metatrain{SUPPORTED}",
            "metatrain",
        )
    import metatrain

    check_version(str(getattr(metatrain, "__version__", "(of no version)")))
