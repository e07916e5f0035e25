"""mnemosyne_environment: the one environment of every child that runs Mnemosyne."""

from pathlib import Path

from mnemo_ops.mnemosyne.api import mnemosyne_environment

BASE = {"PATH": "/usr/bin", "HOME": "/home/user", "MNEMOSYNE_DATA_DIR": "/elsewhere"}


def test_the_live_database_keeps_the_users_home():
    environment = mnemosyne_environment(Path("/data"), Path("/hermes"), base=BASE)
    assert environment == {
        "PATH": "/usr/bin",
        "HOME": "/home/user",  # an embedding model cached there is used, as the agent uses it
        "MNEMOSYNE_DATA_DIR": "/data",
        "HERMES_HOME": "/hermes",
    }


def test_a_private_home_and_variables_that_cannot_move_the_paths():
    environment = mnemosyne_environment(
        Path("/scratch/data"),
        Path("/scratch/hermes"),
        home=Path("/scratch/home"),
        variables={"MNEMOSYNE_SLEEP_BATCH": "50", "MNEMOSYNE_DATA_DIR": "/somewhere"},
        base=BASE,
    )
    assert environment == {
        "PATH": "/usr/bin",
        "HOME": "/scratch/home",
        "MNEMOSYNE_DATA_DIR": "/scratch/data",
        "HERMES_HOME": "/scratch/hermes",
        "MNEMOSYNE_SLEEP_BATCH": "50",
    }
    assert BASE["MNEMOSYNE_DATA_DIR"] == "/elsewhere"  # the base is copied, never changed
