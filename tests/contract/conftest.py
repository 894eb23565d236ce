import pytest


@pytest.fixture(scope="session")
def workspace(tmp_path_factory):
    """The hostile batteries' shared workspace: a real model, data, caches, an engine; the cases only read it."""
    from contract.test_battery import make_workspace

    return make_workspace(tmp_path_factory)
