"""When the monitor reads the head next (``monitor.worker.HeadPacer``)."""

from __future__ import annotations

import random

from invoicing.monitor.worker import HeadPacer


def pacer_after(blocks: list[tuple[int, float]], poll_s: float = 0.5) -> HeadPacer:
    pacer = HeadPacer(poll_s, max_wait_s=20.0)
    for block, seen in blocks:
        pacer.seen(block, seen)
    return pacer


def test_steady_12_s_blocks_wait_for_the_next_block_a_little_late() -> None:
    pacer = pacer_after([(block, 12.0 * block + 0.3) for block in range(1, 7)])

    assert pacer.interval_s() == 12.0
    # Seen at 72.3: the next is due at 84.3, read 0.25 s late (half a poll).
    assert round(pacer.delay_s(72.3), 6) == 12.25
    assert round(pacer.delay_s(80.0), 6) == 4.55


def test_12_s_blocks_on_a_busy_machine_cost_one_head_read_each() -> None:
    """As the loop runs on a loaded machine: each head read takes 5 to 150 ms, every
    fourth block's pass holds the loop up 1 s, and a wake-up is up to 100 ms late. Once the
    pace is known, every read finds a new block (one head read a block)."""
    rng = random.Random(7)
    for phase in (0.05, 3.3, 7.77, 11.9):
        pacer, now, lags, misses = HeadPacer(0.5, max_wait_s=20.0), 0.0, [], 0
        while now < 12.0 * 60:
            now += rng.uniform(0.005, 0.15)
            head = int((now - phase) // 12.0) if now >= phase else 0
            new = head > 0 and (not pacer._changes or head > pacer._changes[-1][0])
            if not new and now > 12.0 * 10:  # the pace is known by then
                misses += 1
            pacer.seen(head, now)
            if new:
                lags.append(now - (12.0 * head + phase))
                now += 1.0 if len(lags) % 4 == 0 else 0.05
            now += pacer.delay_s(now) + rng.uniform(0.0, 0.1)

        assert misses == 0, phase
        # Seen within half a poll and a read's lateness (of the first sightings, the read
        # and the wake-up), and no later after 60 blocks than after 10: no creep.
        assert max(lags[10:]) <= 0.75, (phase, [round(lag, 2) for lag in lags])


def test_steady_1_s_blocks_are_read_when_due_then_chased() -> None:
    pacer = pacer_after([(block, 1.0 * block + 0.03) for block in range(1, 7)])

    assert (pacer.interval_s(), pacer.short_interval_s()) == (None, 1.0)
    # Seen at 6.03 and the pass took 0.08 s: the next is due at 7.03, read a chase step
    # (a fifth of a poll) early, at 6.93.
    assert round(pacer.delay_s(6.11), 6) == 0.82
    # That read found no new block: look again a fifth of a poll later, for one poll.
    pacer.seen(6, 6.93)
    assert round(pacer.delay_s(6.93), 6) == 0.1
    assert round(pacer.delay_s(7.4), 6) == 0.1
    # The block is a whole poll late: back to the plain poll.
    assert pacer.delay_s(7.5) == 0.5
    # Block 7 seen at 7.08, later than the pace says (7.03): the read was late, not the
    # block, so block 8 is still due at 8.03 (read at 7.93).
    pacer.seen(7, 7.08)
    assert round(pacer.delay_s(7.1), 6) == 0.83


def test_chasing_1_s_blocks_sees_each_within_a_fifth_of_a_poll() -> None:
    # Blocks every 1 s at x.37; the pacer's reads (each taking no time) as the loop makes them.
    pacer, now, lags, reads = HeadPacer(0.5, max_wait_s=20.0), 0.0, [], 0
    while now < 30.0:
        head = int(now - 0.37) if now >= 0.37 else 0
        if head and (not pacer._changes or head > pacer._changes[-1][0]):
            lags.append(now - (head + 0.37))
        pacer.seen(head, now)
        reads += 1
        now += pacer.delay_s(now)

    late = [lag for lag in lags[10:]]  # once the pace is known
    assert max(late) <= 0.1 + 1e-9
    assert reads <= 2.2 * 30  # about as many calls as the plain poll (2 a block)


def test_reads_that_take_time_and_passes_that_hold_the_loop_still_lock_on_to_1_s_blocks() -> None:
    """As the loop runs: each head read takes 10 ms and a new block's pass 60 ms, so the
    plain poll beats against the blocks and sees each one later than the last. Once the
    pace is known, every block at any phase is seen within a chase step (a fifth of a poll)
    and a read, for about two reads a block."""
    for phase in (0.05, 0.2, 0.37, 0.6, 0.8, 0.95):
        pacer, now, lags, reads = HeadPacer(0.5, max_wait_s=20.0), 0.0, [], 0
        while now < 60.0:
            now += 0.01
            head = int(now - phase) if now >= phase else 0
            new = head and (not pacer._changes or head > pacer._changes[-1][0])
            pacer.seen(head, now)
            reads += 1
            if new:
                lags.append(now - (head + phase))
                now += 0.06
            now += pacer.delay_s(now)

        assert max(lags[:5]) <= 0.5 + 0.08  # the plain poll, while the pace is unknown
        assert max(lags[12:]) <= 0.1 + 0.01 + 1e-9, (phase, lags)
        assert reads <= 2.2 * 60


def test_a_jump_of_several_blocks_starts_the_estimate_again() -> None:
    pacer = pacer_after([(block, 12.0 * block) for block in range(1, 7)])
    pacer.seen(9, 110.0)  # the loop was held up (an outage): blocks 7 and 8 unseen

    assert pacer.interval_s() is None
    assert pacer.delay_s(110.0) == 0.5


def test_the_wait_never_exceeds_the_cap() -> None:
    pacer = HeadPacer(0.5, max_wait_s=20.0)
    for block in range(1, 7):
        pacer.seen(block, 60.0 * block)

    assert pacer.interval_s() == 60.0
    assert pacer.delay_s(360.0) == 20.0


def test_one_late_head_read_does_not_break_the_pace() -> None:
    # Block 4 was seen 3 s late (a long pass held the loop up); the rest came every 12 s.
    pacer = pacer_after([(1, 12.0), (2, 24.0), (3, 36.0), (4, 51.0), (5, 60.0), (6, 72.0)])

    assert pacer.interval_s() == 12.0
