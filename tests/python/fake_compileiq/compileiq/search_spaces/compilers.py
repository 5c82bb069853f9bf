"""The fake's ptxas search spaces: a local file, or a provider that has none."""


class LocalSearchSpaceBin:
    def __init__(self, path):
        self.path = path


class PtxasSearchSpace:
    def __init__(self, version):
        self.version = version

    def retrieve(self):
        raise ConnectionError(f"the fake has no ptxas {self.version} search space to download")
