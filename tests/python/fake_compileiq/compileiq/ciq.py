"""The fake ``Search``: ask/tell with a log of its calls (see the package's docstring)."""

import json
import os


class Candidate:
    def __init__(self, param_id, params):
        self.param_id = param_id
        self.params = params


class Search:
    def __init__(self, objective_function, search_space, search_config, worker_type, disable_progress_bar,
                 exit_on_failure, cache_folder):
        self.pool_size = search_config["pool_size"]
        self.next_id = 0

    def ask(self):
        asked = []
        for _ in range(self.pool_size):
            asked.append(Candidate(self.next_id, f"acf {self.next_id}".encode().hex()))
            self.next_id += 1
        _log({"call": "ask", "ids": [c.param_id for c in asked]})
        return asked

    def tell(self, scores):
        _log({"call": "tell", "scores": {str(s.param_id): s.score for s in scores}})


def _log(entry):
    with open(os.environ["FAKE_COMPILEIQ_LOG"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")
