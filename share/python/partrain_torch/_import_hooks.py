"""Runs a function on a module right after it is first imported, without importing it earlier.

A meta-path finder that answers for the named modules only: it lets the other finders find
the module, then wraps that module's loader so the patch runs once the module's code has
executed. Importing torch eagerly would cost every Python process of the job seconds.
"""

import sys


class _PatchOnImport:
    def __init__(self, patches):
        self._patches = dict(patches)

    def find_spec(self, fullname, path=None, target=None):
        patch = self._patches.pop(fullname, None)  # once: a reload is left alone
        if patch is None:
            return None
        if not self._patches:
            sys.meta_path.remove(self)
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_then_patch(module):
            try:
                original(module)
            finally:
                # The loader is this module's own: it goes back to how it was.
                try:
                    del loader.exec_module
                except AttributeError:
                    pass
            patch(module)

        loader.exec_module = exec_then_patch
        return spec

    def find_module(self, fullname, path=None):  # Python < 3.4 finders' protocol: not ours
        return None


def patch_on_import(patches):
    """patches: {module name: function(module)}. A module already imported is patched now."""
    pending = {}
    for name, patch in patches.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
        else:
            pending[name] = patch
    if pending:
        sys.meta_path.insert(0, _PatchOnImport(pending))
