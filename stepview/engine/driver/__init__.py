"""The driver: one thread owns an engine and turns each of its steps into a frozen snapshot.

vLLM's ``llm_engine_example`` loop (add, step, read the outputs) on a worker thread, for any
:class:`~stepview.model.engine_api.Engine`: stepview's own vLLM, a watched server, or the fake
engine the UI tests use. Imports no vLLM and no Textual.

``loop``
    :class:`~stepview.engine.driver.loop.Driver`: the thread, the loop, the stop deadline and
    the step figures.
``inbox`` / ``publishing``
    the driver's way in and way out, where other threads meet it: the commands they send
    (and requests due later); each snapshot built, given its alerts, kept for the UI and
    handed to the sinks.
``ledger`` / ``tracks`` / ``freezing``
    every request from accepted to finished: outputs folded in at O(new tokens), then one new
    frozen view per request that changed, its state and dates from the scheduler's entries.
``figures``
    the figures of the steps so far (status bar, sparklines, the clocks of a run's totals), at
    O(1) per step.
``chat_prompts``
    a chat request's messages turned into its prompt by the engine's chat template, as the
    driver accepts it (only the engine holds the template; only this thread calls the engine).
``adoption``
    how requests a watched server's other clients sent enter the ledger and leave it.
``recent_ids``
    the ids of the latest requests, in bounded memory: no id given twice, none taken for another.
``books``
    the lock on the thread's bookkeeping, so a run whose engine never returns from a step can
    still be ended, from another thread, with every request recorded.
``pacing``
    pause, resume and single step, including holding a core in its own process.
``arrivals``
    requests due later (a load's Poisson arrivals, a prompts file's ``"at"``).
``run_stats`` / ``step_faults``
    a run's totals (for the log and the benchmarks) and engine failures told in words.
"""
