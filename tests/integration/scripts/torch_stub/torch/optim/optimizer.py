_pre_hooks = []
_post_hooks = []


def register_optimizer_step_pre_hook(hook):
    _pre_hooks.append(hook)


def register_optimizer_step_post_hook(hook):
    _post_hooks.append(hook)


class Optimizer:
    """As torch's: every subclass's step() runs the global pre-hooks, its update, the post-hooks."""

    def __init__(self, params, defaults):
        self.params = params

    def step(self):
        for hook in _pre_hooks:
            hook(self, (), {})
        self._update()
        for hook in _post_hooks:
            hook(self, (), {})

    def _update(self):
        pass
