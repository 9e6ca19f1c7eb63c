"""zoo's own components under the contract that every plugin's components keep (``zoo.testing``)."""

from zoo.testing import ComponentContract


class TestBuiltinComponents(ComponentContract):
    builtin = True
