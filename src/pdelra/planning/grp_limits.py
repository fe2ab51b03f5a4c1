"""The account's shared limits (Grp*), as slurmctld holds them now: `scontrol show assoc_mgr flags=assoc,qos`.

A Max* limit (MaxSubmitJobs, MaxJobs) is the user's own; a Grp* limit is shared by every job below the
association or QOS that sets it: an account's GrpSubmitJobs counts the colleagues' jobs too, and its
GrpTRESMins=gres/gpu=N is a budget of GPU-minutes that the whole account draws on (Slurm stops starting jobs,
reason AssocGrpGRESMinutes, once it is spent). slurmctld's association manager prints each limit with what is
in use beside it, `GrpSubmitJobs=100(37)`, `GrpTRESMins=cpu=N(0),...,gres/gpu=60000(41234)` (N: none), so one
call gives both the limit and how much of it is left.

A user's job is under its own association (account, user, partition), that account's association and every
parent account's up to root, and its QOS: each level's Grp limit applies (`applying`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

ASSOC_MGR_PROBE = ["scontrol", "show", "assoc_mgr", "flags=assoc,qos"]
GPU_TRES = "gres/gpu"
_COUNT = re.compile(r"(\w+)=(N|\d+)\((\d+)\)")  # GrpJobs=N(0), GrpSubmitJobs=100(37)
_TRES_MINS = re.compile(r"GrpTRESMins=(\S*)")
_TRES_ITEM = re.compile(r"([\w/:.-]+)=(N|\d+)\((\d+)\)")


@dataclass
class Record:
    """One association or QOS of the manager's answer: its Grp* {field: (limit or None, in use)}."""

    kind: str  # "assoc" or "qos"
    account: str = ""
    user: str = ""  # "" for an account's own association
    partition: str = ""
    parent: str = ""
    name: str = ""  # a QOS's name
    counts: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    tres_mins: dict[str, tuple[int | None, int]] = field(default_factory=dict)

    @property
    def source(self) -> str:
        if self.kind == "qos":
            return f"QOS {self.name}"
        who = f"user {self.user}" if self.user else "the whole account"
        where = f", partition {self.partition}" if self.partition else ""
        return f"association {self.account} ({who}{where})"


def _limit(text: str) -> int | None:
    return None if text == "N" else int(text)


def parse_assoc_mgr(text: str) -> list[Record]:
    """`scontrol show assoc_mgr flags=assoc,qos` as records, in its order; unknown lines are skipped."""
    records: list[Record] = []
    for line in text.splitlines():
        stripped = line.strip()
        head = dict(re.findall(r"(\w+)=(\S*)", stripped)) if not line.startswith(" ") else {}
        if "ClusterName" in head and "Account" in head:
            user = re.sub(r"\(\d+\)$", "", head.get("UserName", ""))
            records.append(Record("assoc", head["Account"], user, head.get("Partition", "")))
            continue
        if "QOS" in head and not line.startswith(" "):
            records.append(Record("qos", name=re.sub(r"\(\d+\)$", "", head["QOS"])))
            continue
        if not records:
            continue
        record = records[-1]
        if parent := re.search(r"ParentAccount=(\S*)", stripped):
            record.parent = re.sub(r"\(\d+\)$", "", parent.group(1))
        if stripped.startswith("GrpTRESMins="):
            found = _TRES_MINS.match(stripped)
            for name, limit, used in _TRES_ITEM.findall(found.group(1) if found else ""):
                record.tres_mins[name] = (_limit(limit), int(used))
        elif stripped.startswith(("GrpJobs=", "GrpSubmitJobs=")):
            for name, limit, used in _COUNT.findall(stripped):
                if name in ("GrpJobs", "GrpSubmitJobs"):
                    record.counts[name] = (_limit(limit), int(used))
    return records


def applying(
    records: list[Record], user: str, accounts: Iterable[str], qos_used: Iterable[str | None]
) -> list[Record]:
    """The records whose Grp limits bind the user's jobs: the user's associations under `accounts` (none
    named: all of the user's), each of their accounts' own association and its parents up to root, and the
    QOS of `qos_used` (None entries: the jobs' default QOS, not known here, so no QOS is added for them)."""
    wanted = {a.lower() for a in accounts if a}
    assocs = [r for r in records if r.kind == "assoc"]
    own = [r for r in assocs if r.user == user and (not wanted or r.account.lower() in wanted)]
    by_account = {r.account: r for r in assocs if not r.user and not r.partition}
    chosen: dict[int, Record] = {id(r): r for r in own}
    for record in own:
        account, seen = record.account, set()
        while account and account not in seen and account in by_account:
            seen.add(account)
            chosen[id(by_account[account])] = by_account[account]
            account = by_account[account].parent
    names = {q for q in qos_used if q}
    chosen.update({id(r): r for r in records if r.kind == "qos" and r.name in names})
    return list(chosen.values())


@dataclass(frozen=True)
class GrpLimit:
    """One shared limit that is set: kind 'submit', 'jobs' or 'gpu_minutes', its limit, what is in use
    now (jobs, or GPU-minutes used), the Slurm field and where it is set."""

    kind: str
    limit: int
    used: int
    name: str
    source: str

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)


def group_limits(records: Iterable[Record]) -> list[GrpLimit]:
    """The Grp limits set on `records` (those left N are not limits)."""
    found = []
    for record in records:
        for name, kind in (("GrpSubmitJobs", "submit"), ("GrpJobs", "jobs")):
            limit, used = record.counts.get(name, (None, 0))
            if limit is not None:
                found.append(GrpLimit(kind, limit, used, name, record.source))
        limit, used = record.tres_mins.get(GPU_TRES, (None, 0))
        if limit is not None:
            found.append(GrpLimit("gpu_minutes", limit, used, f"GrpTRESMins {GPU_TRES}", record.source))
    return found


def budget_line(limit: GrpLimit, needed: float, what: str) -> str:
    """The GPU-minute budget against the campaign: 'this campaign needs ≈ N of your M remaining
    GPU-minutes', and what happens past it."""
    line = (
        f"{limit.source} has {limit.left:,} GPU-minutes left of its {limit.limit:,} ({limit.name}, "
        f"{limit.used:,} used, shared by its jobs): this campaign needs ≈ {needed:,.0f} of your "
        f"{limit.left:,} remaining GPU-minutes ({what})"
    )
    if needed > limit.left:
        line += (
            "; past it Slurm starts none of the account's jobs (reason AssocGrpGRESMinutes or "
            "QOSGrpGRESMinutes) until an administrator raises the limit: run fewer grids (run_grids) first"
        )
    return line
