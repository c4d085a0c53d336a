"""`DeadlineTimer`: the calls on one loop share one timer at the earliest deadline; each call expires once
its own deadline passes, never after it left, and a loop is not kept alive by it."""

from __future__ import annotations

import asyncio
import gc
import weakref

from toolrt.call.deadline_timer import DeadlineTimer, timer_of


class Call:
    def __init__(self, name: str, expired: list[str], done: asyncio.Event | None = None) -> None:
        self.name, self.expired, self.done = name, expired, done
        self.at = -1.0

    def expire(self) -> None:
        self.at = asyncio.get_running_loop().time()
        self.expired.append(self.name)
        if self.done is not None:
            self.done.set()


def test_each_call_expires_at_its_own_deadline_in_order_and_a_call_that_left_never_does() -> None:
    async def main() -> tuple[list[str], float, float]:
        loop = asyncio.get_running_loop()
        timer = DeadlineTimer()
        expired: list[str] = []
        last = asyncio.Event()
        start = loop.time()
        late, left, early = Call("late", expired, last), Call("left", expired), Call("early", expired)
        timer.enter(late, start + 0.3, loop)  # armed at 0.3
        timer.enter(left, start + 0.05, loop)  # earlier: armed at 0.05 too
        timer.enter(early, start + 0.1, loop)
        timer.leave(left)
        await asyncio.wait_for(last.wait(), 10)
        return expired, early.at - start, late.at - start

    expired, early, late = asyncio.run(main())
    assert expired == ["early", "late"]
    assert 0.1 <= early < late and late >= 0.3


def test_a_call_entered_after_a_later_one_still_expires_on_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        timer = timer_of(loop)
        assert timer_of(loop) is timer
        expired: list[str] = []
        done = asyncio.Event()
        start = loop.time()
        timer.enter(Call("slow", expired), start + 3600, loop)
        timer.enter(Call("quick", expired, done), start + 0.05, loop)
        await asyncio.wait_for(done.wait(), 10)
        return loop.time() - start

    assert 0.05 <= asyncio.run(main()) < 10


def test_a_loop_with_a_timer_still_armed_is_not_kept_alive() -> None:
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loops.append(weakref.ref(loop))
        call = Call("never", [])
        timer_of(loop).enter(call, loop.time() + 3600, loop)
        timer_of(loop).leave(call)

    asyncio.run(main())
    asyncio.run(asyncio.sleep(0))  # another loop asks last
    gc.collect()
    assert loops[0]() is None
