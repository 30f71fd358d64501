"""The spawned tests (memory, STREAM, spinWait, video, -cyclic) and their process entry:
entry.py is the worker main the orchestrator names, timed.py its timed loops. Imports
torque_async; torque_async imports nothing from here (the registry names classes by string)."""
