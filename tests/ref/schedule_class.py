"""tests/ref/schedule_class.py - read a class file of schedule.json (format 2, docs/SCHEDULE.md) into
plain objects: buffers and steps as dicts named by the file's field lists, step descriptions from its
texts, and a step's collective fields (comm_fields) merged into the step. Shared by the tests that read
schedules; it follows the documented format, not tessgen's code."""
import json
import os


def rows(table):
    return [dict(zip(table["fields"], r)) for r in table["rows"]]


def load_class(index_path, cls):
    """The class entry cls of the index at index_path, read and unpacked."""
    here = os.path.dirname(index_path)
    C = json.load(open(os.path.join(here, cls["json"])))
    C["buffers"] = rows(C["buffers"])
    steps = rows(C["steps"])
    cf = C["steps"]["comm_fields"]
    for s in steps:
        s["what"] = C["texts"][s["what"]]
        c = s["comm"]
        s["comm"] = c is not None
        if c is not None:
            s.update(zip(cf, c))
            s["bytes"] = 4 * s["elems"]
            s["is_root"] = bool(s["is_root"])
    C["steps"] = steps
    return C
