"""Bare names are answered from a directory listing (issue 33, item 6), never from a stale one: a
symlink out of the project made after a listing is seen by the next analysis, including when the
directory's modification time cannot tell the listing from the change (the coarse-clock race)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from toolrt.permissions.model import CallSite
from toolrt.shell import analyze_command, listings
from toolrt.shell.listings import SETTLED_NS, Listings
from toolrt.shell.paths import scope_for

# More bare names than `listings.PER_NAME`: the last ones are answered from the directory's listing.
LINE = "cat one two three lnk"


def _asks_outside(command: str, site: CallSite) -> bool:
    return any(request.permission == "external_directory" for request in analyze_command(command, site))


@pytest.fixture
def settle(monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """`settle(directory, seconds_ago)`: give `directory` a modification time `seconds_ago` in the past
    (returned in nanoseconds) and let its change time, which no process can set back, count as settled
    once the coarse clock that stamps it has moved past it (the settling time made that one tick)."""

    def settle(directory: str, seconds_ago: float = 60.0) -> int:
        when = time.time_ns() - int(seconds_ago * 1e9)
        os.utime(directory, ns=(when, when))
        if seconds_ago * 1e9 >= SETTLED_NS:
            monkeypatch.setattr(listings, "SETTLED_NS", 0)
            _past_the_tick_of(os.stat(directory).st_ctime_ns)
        return when

    return settle


_CLOCK_REALTIME_COARSE = 5
"""Linux's clock id for the coarse clock that stamps file times (Python's `time` does not name it)."""


def _past_the_tick_of(stamp: int) -> None:
    """Wait (a few milliseconds at most) until the coarse clock that stamps files is past `stamp`: a
    change made after that gets another time."""
    deadline = time.monotonic() + 20  # a hang guard: the tick comes within milliseconds
    while time.clock_gettime_ns(_CLOCK_REALTIME_COARSE) <= stamp:
        assert time.monotonic() < deadline, "the coarse clock did not move on"
        time.sleep(0)  # yield; the wait is for the clock's next tick, an event, not a fixed time


def test_a_symlink_made_after_a_settled_listing_is_seen(site: CallSite, settle: Callable[..., int]) -> None:
    (site.root.parent / "outside").mkdir()
    settle(str(site.root))
    assert not _asks_outside(LINE, site)  # listed (settled): no entry of that name
    (site.root / "lnk").symlink_to("../outside")  # the directory's modification time moves on
    assert _asks_outside(LINE, site)
    assert _asks_outside("ls -la lnk", site)


def test_a_listing_of_a_recently_changed_directory_is_never_reused(site: CallSite, settle: Callable[..., int]) -> None:
    """The kernel stamps modification times from a coarse clock: a change within the same tick as a
    listing can leave the time unchanged. Forcing exactly that, the change is still seen."""
    (site.root.parent / "outside").mkdir()
    stamp = settle(str(site.root), seconds_ago=SETTLED_NS / 2e9)  # changed within the settling time
    assert not _asks_outside(LINE, site)
    (site.root / "lnk").symlink_to("../outside")
    os.utime(site.root, ns=(stamp, stamp))  # the same modification time as when it was asked
    assert _asks_outside(LINE, site)


def test_one_name_answered_from_an_earlier_listing_sees_a_symlink_made_since(
    site: CallSite, settle: Callable[..., int]
) -> None:
    """A directory an earlier call listed answers even the first name a line asks about, once one
    `stat` shows it unchanged: a symlink made after that listing is seen by the next line that names
    it alone, and a file made since is read as what it is."""
    (site.root.parent / "outside").mkdir()
    settle(str(site.root))
    assert not _asks_outside(LINE, site)  # the root is listed (settled), and the listing kept
    assert listings._listed[os.path.realpath(site.root)].names == frozenset()
    assert not _asks_outside("cat lnk", site)  # answered from that listing
    (site.root / "lnk").symlink_to("../outside")
    assert _asks_outside("cat lnk", site)
    (site.root / "lnk").unlink()
    (site.root / "lnk").write_text("x", encoding="utf-8")
    assert not _asks_outside("cat lnk", site)


@pytest.mark.parametrize("per_name", [0, 3], ids=["from_a_listing", "name_by_name"])
@pytest.mark.parametrize("seconds_ago", [60.0, 0.0], ids=["settled", "changed_just_now"])
def test_a_listing_tells_missing_names_links_and_other_entries(
    site: CallSite, monkeypatch: pytest.MonkeyPatch, settle: Callable[..., int], per_name: int, seconds_ago: float
) -> None:
    monkeypatch.setattr(listings, "PER_NAME", per_name)
    (site.root / "file").write_text("x", encoding="utf-8")
    (site.root / "link").symlink_to("file")
    settle(str(site.root), seconds_ago)
    asked = Listings()
    kinds = [asked.kind(str(site.root), name) for name in ("file", "link", "missing", "file")]
    assert kinds == ["other", "link", "missing", "other"]
    assert asked.kind(str(site.root / "no-such-directory"), "x") == "missing"


def test_a_modification_time_set_back_after_a_symlink_cannot_pass_for_the_listed_directory(
    site: CallSite, settle: Callable[..., int]
) -> None:
    """`touch -d` (utime) puts the directory's modification time back to what the listing saw after a
    symlink out was made: the change time, which no process can set, tells the listing is stale."""
    (site.root.parent / "outside").mkdir()
    stamp = settle(str(site.root))
    assert not _asks_outside(LINE, site)
    assert _settled_listing_of(site) is not None
    (site.root / "lnk").symlink_to("../outside")
    os.utime(site.root, ns=(stamp, stamp))  # the modification time the listing saw
    assert os.stat(site.root).st_mtime_ns == stamp
    assert _asks_outside(LINE, site)
    assert _asks_outside("cat lnk", site)


def _settled_listing_of(site: CallSite) -> object:
    return listings._listed.get(os.path.realpath(site.root))


def test_a_nul_in_a_glob_or_a_name_fails_closed_without_raising(site: CallSite) -> None:
    """Found by the invalid-UTF-8 property test: `\\x01\\x00/[` reached `os.scandir` with a NUL, which
    raises ValueError (on main too); no path holds a NUL, so it matches nothing, and the line fails closed."""
    for line in ("\x01\x00/[", "cat a\x00b", "ls \x00*"):
        requests = analyze_command(line, site)
        assert any(request.opaque for request in requests), line
    assert Listings().kind(str(site.root), "a\x00b") == "missing"


@pytest.mark.parametrize("per_name", [0, 3], ids=["from_a_listing", "name_by_name"])
def test_a_directory_cd_enters_that_became_a_symlink_out_is_seen(
    site: CallSite, monkeypatch: pytest.MonkeyPatch, settle: Callable[..., int], per_name: int
) -> None:
    """The working directory a `cd` leads to is resolved component by component through the same
    listings as bare names: a directory replaced by a symlink out of the project after a settled
    listing is no longer taken as inside it (nor is a missing one), and a real directory again is."""
    monkeypatch.setattr(listings, "PER_NAME", per_name)
    (site.root.parent / "outside").mkdir()
    (site.root / "sub" / "deeper").mkdir(parents=True)
    settle(str(site.root))
    scope = scope_for(site)
    real = os.path.realpath(site.root)

    def inside(relative: str) -> str | None:
        return scope.real_inside(str(site.root / relative), Listings())

    line = "cd sub && cat notes.txt"
    assert not _asks_outside(line, site)
    assert inside("sub/deeper") == real + "/sub/deeper"
    (site.root / "sub" / "deeper").rmdir()
    (site.root / "sub").rmdir()
    (site.root / "sub").symlink_to("../outside")
    assert inside("sub") is None
    assert inside("sub/deeper") is None
    assert inside("missing/deeper") is None
    assert _asks_outside(line, site)
    (site.root / "sub").unlink()
    (site.root / "sub").mkdir()
    assert inside("sub") == real + "/sub"
    assert not _asks_outside(line, site)
