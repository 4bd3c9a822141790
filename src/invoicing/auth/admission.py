"""Who may be an owner on this service (``INVOICING_OWNERS``).

Unset, any wallet may be an owner (a platform's set-up). Set, it is a comma-separated list
of addresses, or ``file:PATH`` naming a file of one address per line (``#`` starts a
comment); a file is read again whenever its modification time or size changes, so owners
can be added without a restart. A request for any other ownerAddress is refused with 403
``forbidden`` before anything else is done for it, whatever credential it carries.

A file that cannot be read or holds a bad line admits nobody until it is fixed (logged):
failing open would let anyone in.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from invoicing.addresses import normalize_address
from invoicing.db import Database, ProcessLocal
from invoicing.errors import Forbidden

log = logging.getLogger(__name__)

FILE_PREFIX = "file:"


def parse_owner_list(text: str, separator: str) -> frozenset[str]:
    """Lowercased owner keys from ``text``; ValueError naming the first bad entry."""
    keys = set()
    for entry in text.split(separator):
        address = entry.split("#", 1)[0].strip()
        if not address:
            continue
        try:
            keys.add(normalize_address(address).lower())
        except ValueError as exc:
            raise ValueError(f"INVOICING_OWNERS: {address!r} {exc}") from None
    return frozenset(keys)


@dataclass
class OwnerAdmission:
    """The admitted owners as the setting says now (the file's version is re-checked)."""

    setting: str | None
    _keys: frozenset[str] | None = None
    _file_version: tuple[int, int] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.setting is not None and not self.setting.startswith(FILE_PREFIX):
            self._keys = parse_owner_list(self.setting, ",")

    @property
    def is_open(self) -> bool:
        return self.setting is None

    def admits(self, owner_address: str) -> bool:
        if self.setting is None:
            return True
        keys = self._keys if not self.setting.startswith(FILE_PREFIX) else self._from_file()
        return keys is not None and owner_address.lower() in keys

    def _from_file(self) -> frozenset[str]:
        path = self.setting[len(FILE_PREFIX) :] if self.setting else ""
        try:
            stat = os.stat(path)
            version = (stat.st_mtime_ns, stat.st_size)
            if version != self._file_version or self._keys is None:
                with open(path, encoding="utf-8") as owners_file:
                    self._keys = parse_owner_list(owners_file.read(), "\n")
                self._file_version = version
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            if self._file_version != (-1, -1):
                log.error("owners file %s unusable, admitting nobody: %s", path, exc)
            self._keys, self._file_version = frozenset(), (-1, -1)
        return self._keys


# This process's admission lists, by setting (one per database, like its caches).
_ADMISSIONS: ProcessLocal[dict[str | None, OwnerAdmission]] = ProcessLocal(lambda _db: {})


def owner_admission(db: Database, setting: str | None) -> OwnerAdmission:
    """This process's admission list for ``setting``."""
    admissions = _ADMISSIONS.of(db)
    admission = admissions.get(setting)
    if admission is None:
        admission = admissions[setting] = OwnerAdmission(setting)
    return admission


def check_admitted(db: Database, setting: str | None, owner_address: str) -> None:
    """403 ``forbidden`` unless ``owner_address`` may be an owner here."""
    if setting is not None and not owner_admission(db, setting).admits(owner_address):
        raise Forbidden("ownerAddress is not an owner on this service")
