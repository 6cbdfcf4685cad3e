class ProcessGroup:
    """As in torch before 2.15: no register_pre_hook / register_post_hook."""

    def __init__(self, name, rank):
        self.group_name = name
        self._rank = rank

    def rank(self):
        return self._rank
