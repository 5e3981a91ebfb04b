"""Tiers of keys (``schemas/tiers.toml``): identity, capacity, treatment, annotation."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logpipe.env.keys import TIERS
from logpipe.errors import InputError
from logpipe.resources import schemas_dir

# ------------------------------------------------------------------------------- tiers

@dataclass
class Tiers:
    rules: list[tuple[str, str]]
    performance_prefixes: tuple[str, ...]

    @classmethod
    def load(cls, user_file: Path | None = None) -> Tiers:
        default = tomllib.loads((schemas_dir() / "tiers.toml").read_text())
        rules: list[tuple[str, str]] = []
        prefixes = tuple(default.get("performance_prefixes", ()))
        if user_file is not None:
            try:
                user = tomllib.loads(user_file.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise InputError(f"cannot read tiers file: {exc}", path=user_file,
                                 hint="see schemas/tiers.toml for the format") from exc
            for rule in user.get("rules", []):
                rules += [(k, cls._check(rule.get("tier"), user_file)) for k in rule["keys"]]
            prefixes = tuple(user.get("performance_prefixes", prefixes))
        for rule in default.get("rules", []):
            rules += [(k, rule["tier"]) for k in rule["keys"]]
        return cls(rules, prefixes)

    @staticmethod
    def _check(tier: Any, path: Path) -> str:
        if tier not in TIERS:
            raise InputError(f"unknown tier {tier!r}", path=path,
                             hint="tiers are: " + ", ".join(TIERS))
        return str(tier)

    def tier(self, key: str) -> str:
        memo = self.__dict__.setdefault("_memo", {})
        found = memo.get(key)
        if found is None:  # every run of a file asks for the same few hundred keys
            found = memo[key] = self._tier(key)
        return str(found)

    def _tier(self, key: str) -> str:
        for pattern, tier in self.rules:
            if fnmatch.fnmatchcase(key, pattern):
                return tier
        if "." not in key:  # an environment variable
            return "identity" if key.startswith(self.performance_prefixes) else "annotation"
        return "identity" if key.startswith("arg.") else "annotation"
