"""Wrong values for what a worker reads of a message: the table every intake test goes through.

The runtime's tests send each entry alone through the worker's intake
(test_intake_total.py); the workergen suite sends each one to real brokers as
well (tests/support/hostile.py). A value that once stopped a worker stays here.
"""

from __future__ import annotations

import json
from typing import Any

# Nesting that passes any recursion limit of the interpreter.
DEEP = 5_000


def nested_list(depth: int) -> str:
    """JSON text of a list nested `depth` deep."""
    return "[" * depth + "]" * depth


# Wrong values for every header the worker reads.
WRONG_HEADERS: dict[str, list[Any]] = {
    "id": [5, ["a"], {"x": 1}, "", "i" * 400, True],
    "task": [["a"], 5, {"x": 1}, "", True, 1.5],
    "retries": ["x", -5, 1.5, [1], {"a": 1}, True, "3"],
    "timelimit": ["x", [1], ["a", "b"], 5, [-1, 5], {"a": 1}, [None, None, None]],
    "eta": ["not a date", 5, ["x"], {"a": 1}, "2026-13-45T99:00:00", ""],
    "expires": ["never", 5, ["x"], {"a": 1}, ""],
    "argsrepr": [5, ["x"], {"a": 1}],
    "kwargsrepr": [5, ["x"], {"a": 1}],
    "root_id": [5, ["x"], {"a": 1}],
    "parent_id": [5, ["x"], {"a": 1}],
    "group": [5, ["x"], {"a": 1}],
    "group_index": ["x", -1, [1]],
    "shadow": [5, ["x"]],
    "origin": [5, ["x"]],
    "ignore_result": ["x", 5],
    "stamped_headers": ["x", [1, 2]],
    "stamps": ["x", [1], {"a": json.loads(nested_list(50))}],
    "replaced_task_nesting": ["x", -1],
}

# Bodies that are not a task's `[args, kwargs, embed]`, or that Celery would
# fail on after the job ran (the signatures of its embed).
WRONG_BODIES: list[bytes] = [
    b'"s"',
    b"{}",
    b"[1]",
    b"[[],{}]",
    b"[{}, {}, {}]",
    b"[[], [], {}]",
    b'[[], {}, "x"]',
    b'[[], {}, {"callbacks": "x"}]',
    b'[[], {}, {"chord": 5}]',
    b"null",
    b"123",
    b"not json {",
    b"\xff\xfe\x00 not utf-8 \xc3\x28",
    nested_list(DEEP).encode(),
    f'[[], {{"a": {nested_list(3_000)}}}, {{}}]'.encode(),
    f"[{nested_list(100)}, {{}}, {{}}]".encode(),
    b'[[], {}, {"chain": [{"task": ["x"]}]}]',
    b'[[], {}, {"callbacks": [{"task": ["x"]}]}]',
    b'[[], {}, {"errbacks": [{"task": {"x": 1}}]}]',
    b'[[], {}, {"chord": {"task": ["x"]}}]',
    b'[[], {}, {"chain": [{"task": "t", "options": {"queue": ["q"]}}]}]',
    b'[[], {}, {"chain": [{"task": "t", "options": {"queue": "elsewhere.default"}}]}]',
    b'[[], {}, {"chain": [{"task": "t", "options": {"link": [{"task": 5}]}}]}]',
    b'[[], {}, {"chain": [{"task": "celery.group", "subtask_type": "group",'
    b' "kwargs": {"tasks": [{"task": ["x"]}]}}]}]',
    b'[[], {}, {"chain": [{"task": "t", "subtask_type": ["chain"]}]}]',
    b'[[], {"a": 1}, {"chain": [{"task": "t", "args": "x"}]}]',
    b"[" + b" " * (1024 * 1024) + b"[], {}, null]",
]
