"""core/base/redact: secrets a user wrote, masked where text reaches a reason, webhook, report or diff;
control characters from text nobody here wrote, dropped before a terminal."""

from __future__ import annotations

import pytest

from campaignctl.core.base.redact import mask_assignments, mask_secrets, printable


@pytest.mark.parametrize("text, shown", [
    ("export DB_PASSWORD=hunter2; false", "export DB_PASSWORD=***; false"),
    ("API_TOKEN: abc123", "API_TOKEN: ***"),
    ('  DB_PASSWORD: "s3 cret"', '  DB_PASSWORD: "***"'),
    ("train.py --api-key=xyz --lr 0.1", "train.py --api-key=*** --lr 0.1"),
    ('{"aws_secret_access_key": "AKIAX"}', '{"aws_secret_access_key": "***"}'),
    ("postgresql://me:pw@db.example.org/x", "postgresql://me:***@db.example.org/x"),
    ("steps=5 lr: 0.1 HOME=/home/ana", "steps=5 lr: 0.1 HOME=/home/ana"),  # nothing secret-named
    # the short names sites use (a reliability probe found each of them unmasked)
    ("export DB_PASS=hunter2 MYSQL_PWD=s3cret", "export DB_PASS=*** MYSQL_PWD=***"),
    ("GITHUB_PAT=ghp_abc123 HF_AUTH=hf_xyz", "GITHUB_PAT=*** HF_AUTH=***"),
    ("PWD=/home/ana PATH=/usr/bin AUTHOR=ana", "PWD=/home/ana PATH=/usr/bin AUTHOR=ana"),
    ("curl -H 'Authorization: Bearer eyJhbGciOi.x-y' url", "curl -H 'Authorization: Bearer ***' url"),
    ("login --password hunter2 --lr 0.1", "login --password *** --lr 0.1"),
    ("train.py --api-key abc --resume", "train.py --api-key *** --resume"),
    ("train.py --lr 0.1 --passes 3", "train.py --lr 0.1 --passes 3"),
    ("mysql -uroot -phunter2 -e 'select 1'", "mysql -uroot -p*** -e 'select 1'"),
    ("python train.py -p8080", "python train.py -p8080"),  # -p is MySQL's password only there
])
def test_assignments_of_secret_named_variables_are_masked(text: str, shown: str) -> None:
    assert mask_assignments(text) == shown


def test_a_secret_value_printed_by_a_program_is_masked_too() -> None:
    env = {"WANDB_API_KEY": "0123abcd", "HOME": "/home/ana", "PIN_TOKEN": "1"}
    assert mask_secrets("login with 0123abcd failed in /home/ana (1 try)", env) == \
        "login with *** failed in /home/ana (1 try)"


def test_control_characters_are_dropped_but_tabs_and_newlines_kept() -> None:
    assert printable("ok\x1b]0;pwned\x07\x1b[2J\x9b31m\tdone\n") == "ok]0;pwned[2J31m\tdone\n"
