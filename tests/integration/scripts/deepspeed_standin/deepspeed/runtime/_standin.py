"""What the stand-in's optimizers share (DeepSpeed's each define it): the inner torch
optimizer's param_groups as a class-level property, and zero_grad()."""


class InnerOptimizer(object):
    def _get_param_groups(self):
        return self.optimizer.param_groups

    def _set_param_groups(self, value):
        self.optimizer.param_groups = value

    param_groups = property(_get_param_groups, _set_param_groups)

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)
