"""The fake's ``Score``."""


class Score:
    def __init__(self, score, param_id, num_objectives):
        self.score = score
        self.param_id = param_id
        self.num_objectives = num_objectives
