"""``--kv-events``: the server panel's KV block rows, drawn by the real app (plain snapshots)."""

from __future__ import annotations

from dataclasses import replace

from stepview.model.server_window import KvBlocks
from stepview.testing.scenes import make_app
from tests.ui.main.test_server_panel import WINDOW, panel_text, watched

KV = "tcp://127.0.0.1:5557"


async def test_the_panel_shows_churn_residency_and_reuse() -> None:
    kv = KvBlocks(KV, 40, 12.5, 3.0, 750, 250, 6, 410, missed=2)
    app, _ = make_app(watched(replace(WINDOW, kv_blocks=kv)), accepts_requests=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = panel_text(app)
        churn = next(line for line in text.splitlines() if line.startswith("KV blocks"))
        assert "+12.5/s stored  -3.0/s evicted  410 resident" in churn
        assert "(2 batches missed)" in churn
        reuse = next(line for line in text.splitlines() if "prefix reuse" in line)
        assert "250 blocks reused, 750 computed  = 25% reused" in reuse
        assert "6 recomputed after eviction" in reuse


async def test_before_the_first_batch_the_panel_says_so() -> None:
    app, _ = make_app(watched(replace(WINDOW, kv_blocks=KvBlocks(KV))), accepts_requests=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert f"no KV events from {KV} yet" in panel_text(app)
        assert "prefix reuse" not in panel_text(app)


async def test_without_kv_events_there_are_no_kv_rows() -> None:
    app, _ = make_app(watched(WINDOW), accepts_requests=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "KV blocks" not in panel_text(app)
