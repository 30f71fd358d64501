"""The test interface every kind implements, and what the core gives a test.

    api.py      TestError, TestContext, make_test, WorkerSpec and the worker-test protocol
    buffers.py  page-aligned test buffers (mmap), wired on request
    rows.py     a test's results row through set-up: spawned, ready, failed, closed

Spawned tests (workers/) and loop tests (io/, streams/) both import from here; the core never
imports workers/ (kinds.py names the worker entry the orchestrator spawns).
"""
