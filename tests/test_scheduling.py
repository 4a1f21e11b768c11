"""tests/conftest.py's order for `-n 2` (setup.cfg: --dist loadscope): the longest modules first,
each module's tests together and in their own order, and no stale module name in its table."""

import pathlib

import pytest

TESTS = pathlib.Path(__file__).resolve().parent


@pytest.fixture
def conftest(pytestconfig):
    """tests/conftest.py as pytest loaded it (`import conftest` may name a sub-folder's conftest)."""
    plugin = pytestconfig.pluginmanager.get_plugin(str(TESTS / "conftest.py"))
    assert plugin is not None and hasattr(plugin, "MODULE_SECONDS")
    return plugin


class _Item:
    def __init__(self, module, name, slow=False):
        self.path = TESTS / module
        self.name = name
        self._slow = slow

    def get_closest_marker(self, name):
        return object() if name == "slow" and self._slow else None


def test_every_module_in_the_table_exists(conftest):
    missing = [m for m in conftest.MODULE_SECONDS if not (TESTS / m).is_file()]
    assert not missing, f"tests/conftest.py MODULE_SECONDS names modules that are gone: {missing}"


def test_longest_modules_first_and_each_module_kept_together_in_order(conftest):
    items = [_Item("test_config.py", "c"), _Item("study/test_domain_study.py", "f"),
             _Item("test_config.py", "a"), _Item("new/test_new.py", "e"), _Item("new/test_new.py", "d", slow=True),
             _Item("study/test_domain_study.py", "b"), _Item("test_readme_commands.py", "g")]
    conftest.pytest_collection_modifyitems(None, items)
    # domain_study (196 s) > readme (108 s) > an unlisted module with a slow test (30.1 s) > test_config (0.2 s)
    assert [i.name for i in items] == ["f", "b", "g", "e", "d", "c", "a"]
