"""The one rule for secrets (wireup/core/redact.py): which names are secret, what a written or printed
env mapping and URL look like."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import redact


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "WANDB_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "MYSQL_PASSWD",
        "GIT_CREDENTIALS",
        "GOOGLE_APPLICATION_CREDENTIAL",
        "NPM_AUTH",
        "hf_token",
        "Api-Key",
        "HUGGING_FACE_HUB_TOKEN",
        "API_KEYS",
        "TOKEN",
        "OAUTH_TOKEN",
    ],
)
def test_secret_names(name):
    assert redact.is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_IB_HCA",
        "NCCL_SOCKET_IFNAME",
        "OMP_NUM_THREADS",
        "PIP_INDEX_URL",
        "KEYBOARD",
        "MONKEY_PATCH",
        "AUTHOR",
        "TOKENIZERS_PARALLELISM",
        "PASSTHROUGH",
        "",
    ],
)
def test_names_that_are_not_secret(name):
    assert not redact.is_secret_name(name)


def test_listed_names_are_secret_exactly():
    assert redact.is_secret_name("GITHUB_PAT", ["GITHUB_PAT"])
    assert not redact.is_secret_name("github_pat", ["GITHUB_PAT"])
    assert not redact.is_secret_name("GITHUB_PAT", [])
    assert not redact.is_secret_name("GITHUB_PAT", None)


def test_redact_env_keeps_keys_and_marks_values():
    env = {
        "HF_TOKEN": "hf_abcdef",
        "WANDB_API_KEY": 1234,
        "NCCL_IB_HCA": "mlx5_0",
        "GITHUB_PAT": "ghp_xyz",
        "PIP_INDEX_URL": "https://user:pa55@pypi.example.com/simple",
    }
    assert redact.redact_env(env, ["GITHUB_PAT"]) == {
        "HF_TOKEN": "<redacted>",
        "WANDB_API_KEY": "<redacted>",
        "NCCL_IB_HCA": "mlx5_0",
        "GITHUB_PAT": "<redacted>",
        "PIP_INDEX_URL": "https://***@pypi.example.com/simple",
    }
    assert env["HF_TOKEN"] == "hf_abcdef", "the caller's mapping is not changed"
    assert redact.redact_env(None) == {} and redact.redact_env({}) == {}
    assert redact.secret_names(env, ["GITHUB_PAT"]) == [
        "GITHUB_PAT",
        "HF_TOKEN",
        "PIP_INDEX_URL",
        "WANDB_API_KEY",
    ]
    assert redact.secret_names({"NCCL_IB_HCA": "mlx5_0", "N": 3}) == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pw@pypi.example.com/simple", "https://***@pypi.example.com/simple"),
        ("https://__token__@host:8443/simple/", "https://***@host:8443/simple/"),
        ("https://u:p@ss@host/x", "https://***@host/x"),  # a bare '@' in the password
        ("git+https://u:p@git.example.com/r.git", "git+https://***@git.example.com/r.git"),
        ("https://download.pytorch.org/whl/cu130", "https://download.pytorch.org/whl/cu130"),
        ("https://host/x?to=a@b", "https://host/x?to=a@b"),  # an '@' after the host is no userinfo
        ("file:///srv/wheels", "file:///srv/wheels"),
        ("", ""),
        (
            "pip could not install x from https://a:b@one/simple: Looking in https://c@two/",
            "pip could not install x from https://***@one/simple: Looking in https://***@two/",
        ),
    ],
)
def test_redact_url(url, shown):
    assert redact.redact_url(url) == shown


_userinfo = st.text(alphabet=st.characters(blacklist_characters="/?#@ \t\r\n\x0b\x0c"), min_size=1)


@settings(max_examples=60, deadline=200)
@given(user=_userinfo, password=st.text(alphabet=st.characters(blacklist_characters="/?# \t\r\n\x0b\x0c")))
def test_no_url_credential_survives(user, password):
    url = f"https://{user}:{password}@index.example.com/simple"
    shown = redact.redact_url(url)
    assert shown == "https://***@index.example.com/simple"
