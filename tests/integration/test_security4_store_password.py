"""Security round 4, N7 (issue 32 item 5): the state store's password never shows in a message, and a URL that
holds one is refused wherever it comes from (MAAND_STATE_URL and maand_state_to as maand.conf), against a real
PostgreSQL (tests/fleet/pg.py). Before: libpq's `invalid percent-encoded token: "ab%zzSECRETpw"` was printed
whole, a `%70assword=` query key (libpq decodes keys) was neither redacted nor refused, and MAAND_STATE_URL
with a password was used."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import state_pg
from tests.integration.test_security4_hooks_env import playbook
from tests.maand_init import init_bucket, job, ws

pytestmark = [pytest.mark.slow]

SECRET = "SECRETpw"


def flat(done):
    return " ".join((done.stdout + done.stderr).split())


def make_bucket(root, conf_url=None):
    root = init_bucket(root)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "api", '{"selectors":["worker"]}')
    if conf_url:
        with open(root + "/maand.conf", "a", encoding="utf-8") as handle:
            handle.write('state_url = "%s"\n' % conf_url)
    return root


def urls(pg_server):
    """URLs of the test database that carry a password in every way libpq reads one."""
    url = pg_server.database()
    head, rest = url.split("@", 1)
    return url, [
        "%s:ab%%zz%s@%s" % (head, SECRET, rest),  # an invalid %-escape: libpq echoes the token
        "%s:%s@%s" % (head, SECRET, rest),
        "%s?%%70assword=%s&sslmode=disable" % (url, SECRET),  # %70 is p: libpq decodes keys
        "%s?password=%s" % (url, SECRET),
        "%s?sslpassword=%s" % (url, SECRET),
    ]


def test_a_password_in_maand_state_url_is_refused_and_never_printed(tmp_path, pg_server):
    url, bad = urls(pg_server)
    root = make_bucket(tmp_path / "bucket")
    for i, with_password in enumerate(bad):
        done = playbook("maand.core.build", "-e", "maand_bucket=%s" % root,
                        env=dict(pg_server.env, MAAND_STATE_URL=with_password))
        out = flat(done)
        assert done.returncode != 0, (i, out)
        assert SECRET not in out, (i, out)
        assert "MAAND_STATE_URL" in out and "holds a password, which is refused as in maand.conf" in out, (i, out)
        assert "PGPASSWORD" in out, (i, out)
    ok = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, env=dict(pg_server.env, MAAND_STATE_URL=url))
    assert ok.returncode == 0, flat(ok)


def test_a_percent_encoded_password_key_in_maand_conf_is_refused(tmp_path, pg_server):
    url, bad = urls(pg_server)
    root = make_bucket(tmp_path / "bucket", conf_url=bad[2])
    done = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, env=dict(pg_server.env))
    out = flat(done)
    assert done.returncode != 0 and SECRET not in out, out
    assert "the URL holds a password, and maand.conf is committed" in out or "holds a password" in out, out


def test_a_move_to_a_url_with_a_password_is_refused(tmp_path, pg_server):
    _url, bad = urls(pg_server)
    root = make_bucket(tmp_path / "bucket")
    assert playbook("maand.core.build", "-e", "maand_bucket=%s" % root).returncode == 0
    done = playbook("maand.core.state", "-e", "maand_bucket=%s" % root, "-e", "maand_state_to=%s" % bad[0],
                    env=dict(pg_server.env))
    out = flat(done)
    assert done.returncode != 0 and SECRET not in out and "maand_state_to" in out and "holds a password" in out, out


def test_libpq_errors_never_echo_the_password(pg_server, monkeypatch):
    """The store's own error path (a URL given to PgStore directly, as a holder process or a caller that skipped
    check_url would): libpq's message is scrubbed of every secret of the URL."""
    monkeypatch.setenv("PGPASSWORD", pg_server.env["PGPASSWORD"])
    _url, bad = urls(pg_server)
    for with_password in bad[:4]:
        with pytest.raises(state_pg.StateStoreError) as info:
            state_pg.PgStore(with_password).read("catalog")
        message = str(info.value)
        assert SECRET not in message and "cannot connect to the state store" in message, message
    assert 'invalid percent-encoded token: "***"' in _message(bad[0])


def _message(url):
    try:
        state_pg.PgStore(url).read("catalog")
    except state_pg.StateStoreError as exc:
        return str(exc)
    return ""
