# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build problems: every error and warning names maand's error kind, the file, the field and a fix.

Pure Python, no Ansible imports: shared by the build action, the inventory plugin and the tests.
"""

from __future__ import annotations

import difflib

# maand's error kinds (bucket/errors.go, build/errors.go), plus the ones this collection adds.
KINDS = frozenset(
    {
        "ErrNotInitialized",
        "ErrInvalidMaandConf",
        "ErrInvalidBucketConf",
        "ErrInvalidBucketJobsConf",
        "ErrInvalidWorkerJSON",
        "ErrInvalidDisabledJSON",
        "ErrInvalidManifest",
        "ErrInvalidJob",
        "ErrInvalidJobCommandConfiguration",
        "ErrInvalidJobCommandDemand",
        "ErrLocked",
        "ErrInvalidJobVersion",
        "ErrJobCommandDemandVersionMismatch",
        "ErrCircularJobCommandDependency",
        "ErrUnsupportedResourceConfiguration",
        "ErrInsufficientResource",
        "ErrInsufficientAllocations",
        "ErrPortKeyFormat",
        "ErrInvalidManifestPort",
        "ErrInvalidPortRange",
        "ErrPortCollision",
        "ErrPortRangeExhausted",
        "ErrInvalidConstraint",
        "ErrInvalidPlacement",
        "ErrInvalidCatalog",
        "ErrJobCommandFileNotFound",
        "ErrInvalidJobVars",
        "ErrInvalidContainer",
        "ErrInvalidCA",
        "ErrInvalidMaandDB",
        "ErrStaleCheckout",
        "ErrRemoveAll",
    }
)


def did_you_mean(name, known):
    """' (did you mean "selectors"?)' for the closest known name, else ''. Case-insensitive."""
    if not isinstance(name, str) or not known:
        return ""
    lowered = {str(k).lower(): str(k) for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return ' (did you mean "%s"?)' % lowered[close[0]] if close else ""


NEAR_MISS_EDITS = 2


def edit_distance(a, b, limit=None):
    """The optimal string alignment distance of a and b: insertions, deletions, substitutions and swaps of two
    neighbours, one edit each ("helth_check" -> "health_check" is 1, "tpye" -> "type" is 1). With `limit`,
    any distance above it may be returned as limit + 1 (the rows stop early)."""
    if a == b:
        return 0
    if limit is not None and abs(len(a) - len(b)) > limit:
        return limit + 1
    before, row = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (ca != cb))
            if before is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], before[j - 2] + 1)
        if limit is not None and min(current) > limit:
            return limit + 1
        before, row = row, current
    return row[-1]


def near_miss(name, known, edits=NEAR_MISS_EDITS):
    """The known name `name` is most likely a typo of: the closest within `edits` edits, and closer than half
    the known name's length (so a two-letter key is never a typo of another), else None. Ties: the first in
    sorted order."""
    if not isinstance(name, str):
        return None
    best = None
    for candidate in sorted(str(k) for k in known):
        distance = edit_distance(name, candidate, edits)
        if distance <= edits and 2 * distance < len(candidate) and (best is None or distance < best[0]):
            best = (distance, candidate)
    return best[1] if best else None


class Problem:
    """One error or warning. `file` is relative to the bucket directory."""

    __slots__ = ("kind", "file", "field", "message", "fix", "severity", "unhonoured")

    def __init__(self, kind, file, field, message, fix="", severity="error", unhonoured=False):
        if kind not in KINDS and severity == "error":
            raise ValueError("unknown problem kind %r" % kind)
        self.kind = kind
        self.file = file
        self.field = field
        self.message = message
        self.fix = fix
        self.severity = severity
        self.unhonoured = unhonoured  # a field/file maand.core accepts but does not act on yet

    def __str__(self):
        where = self.file + (": " + self.field if self.field else "")
        text = "%s: %s: %s" % (self.kind, where, self.message)
        if self.fix:
            text += " (fix: %s)" % self.fix
        return text

    def __repr__(self):
        return "Problem(%s)" % self

    def as_dict(self):
        return {s: getattr(self, s) for s in self.__slots__}


class Report:
    """Collects every problem of a run, so one build reports all of them at once."""

    def __init__(self):
        self.errors = []
        self.warnings = []

    def error(self, kind, file, field, message, fix=""):
        self.errors.append(Problem(kind, file, field, message, fix))

    def warn(self, kind, file, field, message, fix=""):
        self.warnings.append(Problem(kind, file, field, message, fix, severity="warning"))

    def unhonoured(self, kind, file, field, message, fix=""):
        """Something maand acts on that maand.core does not (yet): a warning, an error in strict mode."""
        self.warnings.append(Problem(kind, file, field, message, fix, severity="warning", unhonoured=True))

    def apply_strict(self):
        """maand_strict=true: every not-honoured warning becomes an error of the same kind."""
        keep = []
        for problem in self.warnings:
            if problem.unhonoured:
                self.errors.append(Problem(problem.kind, problem.file, problem.field,
                                           problem.message + " (an error because maand_strict is true)",
                                           problem.fix, unhonoured=True))
            else:
                keep.append(problem)
        self.warnings = keep

    @property
    def ok(self):
        return not self.errors

    def error_text(self):
        return "\n".join(str(p) for p in self.errors)
